//! Which targets ncu profiles with the full metric list, and which with the one pass that
//! gives the kernel time's neighbours: tensor pipe, occupancy, registers and DRAM
//! throughput (`full_profile:`). A replay pass costs ncu about 10 ms per launch, the first
//! about 60 ms, and the full list takes 15 of them
//! (`benches/results/ncu_replay_cost_h200.md`): the full profile goes where the report and
//! the tuner read its SM throughput, L2 hit rate and warp stalls.

use super::targets::{bench_files, Program, Target};
use repro_ncu::metrics::Field;
use repro_ncu::options::{FullProfile, ProfileOptions};
use repro_pipeline::Pipeline;
use repro_report::best::fastest_on;
use std::path::Path;

/// Whether each of `targets` gets the full profile. With `full_profile: chosen`: the tune
/// elites (the proposer's brief carries their profiles) and, on each shape, the fastest
/// variant there (the kernel the dispatch table calls); not the baselines' calls. Every
/// target when `full_profile: all`, or when a profile gate reads a metric one pass does not
/// give.
pub(super) fn full(
    targets: &[Target],
    opts: &ProfileOptions,
    pipeline: &Pipeline,
    root: &Path,
) -> Vec<bool> {
    if opts.full_profile == FullProfile::All || gates_read_more(pipeline) {
        return vec![true; targets.len()];
    }
    targets
        .iter()
        .map(|t| match &t.program {
            Program::Cubin { .. } => true,
            Program::Script(_) => false,
            Program::Variant(v) => {
                let files = bench_files(pipeline, root, &t.workload);
                fastest_on(&files, &t.shape) == Some(v.as_str())
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

    #[test]
    fn a_twin_that_needs_the_full_profile_gives_it_to_the_target_it_copies() {
        let mut full = vec![false, true, false, false];
        share_with_twins(&mut full, &[None, Some(0), None, Some(2)]);
        assert_eq!(full, [true, true, false, false]);
    }
}
