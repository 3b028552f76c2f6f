//! Which targets ncu profiles with the full metric list besides the one pass every target
//! gets, which reads the kernel time's neighbours: tensor pipe, occupancy, registers and
//! DRAM throughput (`full_profile:`). On an H200 a launch profiled in one pass costs ncu a
//! few ms more than its time alone, in three replay passes about 0.1 s, and with the full
//! list's 15 about 0.18 s (`benches/results/ncu_replay_cost_h200.md`): about a second for a
//! target's 5 launches. So the full profile goes to the kernels whose SM throughput,
//! L2 hit rate and warp stalls the report explains: what each tune found, and what the
//! dispatch table calls.

use super::targets::{bench_files, Program, Target};
use repro_ncu::metrics::{value, value_mut, Field};
use repro_ncu::options::{FullProfile, ProfileOptions};
use repro_pipeline::Pipeline;
use repro_report::best::fastest_on;
use repro_schema::{BenchFile, NcuTarget, RunStatus};
use std::collections::BTreeMap;
use std::path::Path;

/// Whether each of `targets` gets the full profile. With `full_profile: chosen`: each tune's
/// best elite (rank 1, the fastest it found) and, on each shape, the fastest variant there by
/// the bench (the kernel the dispatch table calls); not the runners-up of an elite, whose
/// records (and so the proposer's brief) have the one-pass fields, nor the baselines' calls. Every target when `full_profile: all`, or when a profile gate reads
/// a metric one pass does not give.
pub(super) fn full(
    targets: &[Target],
    opts: &ProfileOptions,
    pipeline: &Pipeline,
    root: &Path,
) -> Vec<bool> {
    if opts.full_profile == FullProfile::All || gates_read_more(pipeline) {
        return vec![true; targets.len()];
    }
    // Each workload's bench records, read once.
    let mut benches: BTreeMap<&str, Vec<BenchFile>> = BTreeMap::new();
    targets
        .iter()
        .map(|t| match &t.program {
            Program::Cubin { rank, .. } => *rank == 1,
            Program::Script(_) => false,
            Program::Variant(v) => {
                let files = benches
                    .entry(&t.workload)
                    .or_insert_with(|| bench_files(pipeline, root, &t.workload));
                fastest_on(files, &t.shape) == Some(v.as_str())
            }
        })
        .collect()
}

/// Whether a rule of `gates.profile` reads a metric outside the one-pass fields (another
/// field or a raw ncu metric).
fn gates_read_more(pipeline: &Pipeline) -> bool {
    pipeline.gates.profile.values().any(|rule| {
        rule.checks().iter().any(|(_, check)| {
            check
                .metric
                .as_deref()
                .is_some_and(|m| !Field::from_key(m).is_some_and(Field::one_pass))
        })
    })
}

/// `full`, a target's full profile, with the one-pass fields (but the kernel time, which is
/// the time pass's: [`super::own_time`]) from `one`, its one-pass profile of the same
/// launches: the full profile's replay passes restore memory between them, which leaves the
/// L2 colder than the harness's warm launches (cuDNN's SDPA on mission read 4.9 % of peak
/// DRAM throughput so in results commit 46844e8, 0.0 % in one pass in 629ae40), and each column should mean one thing for every
/// target. A target the one pass could not profile fails, saying so.
pub(super) fn with_one_pass_fields(mut full: NcuTarget, one: &NcuTarget) -> NcuTarget {
    if !full.status.is_ok() {
        return full;
    }
    if !one.status.is_ok() {
        let why = one.reason.as_deref().unwrap_or("no reason recorded");
        full.status = RunStatus::Failed;
        full.reason = Some(format!("ncu's one-pass profile failed: {why}"));
        return full;
    }
    let fields = Field::ALL
        .into_iter()
        .filter(|f| f.one_pass() && *f != Field::KernelTimeUs);
    for field in fields {
        *value_mut(&mut full, field) = value(one, field);
        if let Some(name) = full.metric_names.remove(field.key()) {
            full.raw.remove(&name);
        }
        if let Some(name) = one.metric_names.get(field.key()) {
            full.metric_names.insert(field.key().into(), name.clone());
            if let Some(v) = one.raw.get(name) {
                full.raw.insert(name.clone(), v.clone());
            }
        }
    }
    full
}

/// The targets `twins` copy (`twins[i] = Some(j)`: target `i` is a copy of `j`'s profile)
/// get the full profile when a copy of theirs does.
pub(super) fn share_with_twins(full: &mut [bool], twins: &[Option<usize>]) {
    for (i, twin) in twins.iter().enumerate() {
        if let Some(j) = *twin {
            full[j] |= full[i];
        }
    }
    for (i, twin) in twins.iter().enumerate() {
        if let Some(j) = *twin {
            full[i] = full[j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::targets::status_target;

    fn record(dram: f64, sm: Option<f64>) -> NcuTarget {
        let mut t = status_target("t", "v", "k", RunStatus::Ok, String::new());
        t.reason = None;
        t.kernel_time_us = Some(7.8);
        t.dram_bw_pct_peak = Some(dram);
        t.sm_util_pct = sm;
        t.metric_names = [
            (
                "dram_bw_pct_peak".to_string(),
                "gpu__dram_throughput".to_string(),
            ),
            (
                "kernel_time_us".to_string(),
                "gpu__time_duration.sum".to_string(),
            ),
        ]
        .into();
        t.raw = [
            ("gpu__dram_throughput".to_string(), format!("{dram} %")),
            ("gpu__time_duration.sum".to_string(), "7,800 ns".to_string()),
        ]
        .into();
        t
    }

    #[test]
    fn the_one_pass_fields_come_from_the_one_pass_and_the_rest_from_the_full_profile() {
        let merged = with_one_pass_fields(record(4.9, Some(20.0)), &record(0.0, None));
        assert_eq!(merged.dram_bw_pct_peak, Some(0.0));
        assert_eq!(merged.raw["gpu__dram_throughput"], "0 %");
        assert_eq!(merged.sm_util_pct, Some(20.0), "the full profile's");
        assert_eq!(
            merged.kernel_time_us,
            Some(7.8),
            "the time pass sets it later"
        );
        let failed = status_target("t", "v", "k", RunStatus::Failed, "ncu timed out".into());
        let merged = with_one_pass_fields(record(4.9, Some(20.0)), &failed);
        assert_eq!(merged.status, RunStatus::Failed);
        assert_eq!(
            merged.reason.as_deref(),
            Some("ncu's one-pass profile failed: ncu timed out")
        );
    }

    #[test]
    fn a_twin_that_needs_the_full_profile_gives_it_to_the_target_it_copies() {
        let mut full = vec![false, true, false, false];
        share_with_twins(&mut full, &[None, Some(0), None, Some(2)]);
        assert_eq!(full, [true, true, false, false]);
    }
}
