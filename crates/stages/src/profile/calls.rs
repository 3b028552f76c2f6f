//! The baselines' calls (`baselines:`): which targets one ncu process profiles (a kernel
//! target alone, every call of the baseline scripts that share one command together), and
//! each call's record and CSV read from that process's output.
//!
//! Each call runs in its own top-level NVTX range ([`call_range`](super::options::call_range)),
//! and ncu includes each of those ranges: the raw page's NVTX column
//! (`thread Domain:Push/Pop_Range:…`) then names the range of every profiled kernel, e.g.
//! `2634  "<default domain>:repro-profile.torch-sdpa-best.mission:none:…" `, so a kernel
//! belongs to exactly one call whatever the order or count of kernels.

use super::run::Reading;
use super::targets::{status_target, Program, Target};
use repro_ncu::launches::median;
use repro_ncu::launches::set_time_spread;
use repro_ncu::launches::summarize_launches;
use repro_ncu::metrics;
use repro_ncu::metrics::Arch;
use repro_ncu::parse;
use repro_ncu::parse::Launch;
use repro_schema::NcuKernel;
use repro_schema::NcuTarget;
use repro_schema::RunStatus;
use std::collections::BTreeSet;

/// Targets grouped by the ncu process that profiles them, in the order of their first
/// member: each kernel target alone, the baseline calls of one command together.
pub fn units(targets: &[Target]) -> Vec<Vec<&Target>> {
    let mut units: Vec<Vec<&Target>> = Vec::new();
    for t in targets {
        let shared = match &t.program {
            Program::Script(_) => units.iter().position(|u| u[0].program == t.program),
            _ => None,
        };
        match shared {
            Some(i) => units[i].push(t),
            None => units.push(vec![t]),
        }
    }
    units
}

/// The line a baseline script prints instead of profiling anything (no torch, no GPU).
const SKIP_MARKER: &str = "repro-profile: skipped: ";
/// The start of the line a script prints for one call it cannot run:
/// `repro-profile: call <range> skipped: <reason>`.
const CALL_MARKER: &str = "repro-profile: call ";

/// What follows the call's range in the line a script prints for a call that would run
/// exactly what another baseline's call on the same shape runs, and so is not run again:
/// `repro-profile: call <range> same as <baseline>: <why>`.
const SAME_AS: &str = " same as ";

/// The reason a baseline script gave for running none of its calls, if it gave one.
pub(super) fn script_skipped(output: &str) -> Option<String> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix(SKIP_MARKER))
        .map(|r| r.trim().to_string())
}

/// The reason a baseline script gave for not running the call in NVTX range `range`.
pub(super) fn call_skipped(output: &str, range: &str) -> Option<String> {
    output.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(CALL_MARKER)?;
        let (named, reason) = rest.split_once(" skipped: ")?;
        (named == range).then(|| reason.trim().to_string())
    })
}

/// The baseline whose call on the same shape the script said call `range` would repeat,
/// and why.
pub(super) fn call_same_as(output: &str, range: &str) -> Option<(String, String)> {
    output.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(CALL_MARKER)?;
        let (named, said) = rest.split_once(SAME_AS)?;
        let (baseline, why) = said.split_once(": ")?;
        (named == range).then(|| (baseline.trim().to_string(), why.trim().to_string()))
    })
}

/// Each call's record and CSV from the output of its script's process, which ended well:
/// `everything` is its stdout and the job's tail (the script's stderr). A call the script
/// did not run because it repeats another's ([`call_same_as`]) gets that call's record
/// under its own name, saying so.
pub(super) fn read_calls(
    unit: &[&Target],
    stdout: &str,
    everything: &str,
    reading: &Reading,
) -> Vec<(NcuTarget, String)> {
    let own = read_own_calls(unit, stdout, everything, reading);
    unit.iter()
        .zip(&own)
        .map(|(t, call)| match call {
            Own::Read(record) => (**record).clone(),
            Own::Repeats { baseline, why } => {
                repeated_call(unit, &own, t, baseline, why, everything)
            }
        })
        .collect()
}

/// A call of the script's process as [`read_own_calls`] reads it.
enum Own {
    /// It ran (or was skipped, or failed): its record and CSV.
    Read(Box<(NcuTarget, String)>),
    /// The script did not run it: it repeats `baseline`'s call on the same shape.
    Repeats { baseline: String, why: String },
}

/// The record of call `t`, which repeats another baseline's call on its shape: a copy of
/// that call's record (and CSV) under `t`'s name, or a failure when that call has none.
fn repeated_call(
    unit: &[&Target],
    own: &[Own],
    t: &Target,
    other: &str,
    why: &str,
    everything: &str,
) -> (NcuTarget, String) {
    let profiled = unit.iter().zip(own).find_map(|(u, call)| {
        let Own::Read(read) = call else {
            return None;
        };
        let (record, csv) = read.as_ref();
        (u.variant == other && u.shape == t.shape && record.status == RunStatus::Ok)
            .then_some((record, csv))
    });
    match profiled {
        Some((record, csv)) => super::twins::profiled_once_as(record, csv, t, why),
        None => {
            let reason = format!(
                "the script ran it as {other}'s call on {}, which has no profile here: {why}",
                t.shape
            );
            (
                status_target(&t.label, &t.variant, "", RunStatus::Failed, reason),
                everything.to_string(),
            )
        }
    }
}

/// [`read_calls`] of each call as the script's process left it.
fn read_own_calls(unit: &[&Target], stdout: &str, everything: &str, reading: &Reading) -> Vec<Own> {
    if let Some(reason) = script_skipped(everything) {
        return unit
            .iter()
            .map(|t| {
                Own::Read(Box::new(whole_output(
                    t,
                    stdout,
                    RunStatus::Skipped,
                    reason.clone(),
                )))
            })
            .collect();
    }
    let export = parse::parse(stdout);
    unit.iter()
        .map(|t| {
            let range = t.call_range();
            if let Some((baseline, why)) = call_same_as(everything, &range) {
                return Own::Repeats { baseline, why };
            }
            Own::Read(Box::new(match call_skipped(everything, &range) {
                Some(reason) => whole_output(t, stdout, RunStatus::Skipped, reason),
                None => read_one_call(unit, t, &export, stdout, reading),
            }))
        })
        .collect()
}

/// Call `t`'s record with `status` and `reason`, and the process's whole output as its CSV.
fn whole_output(
    t: &Target,
    stdout: &str,
    status: RunStatus,
    reason: String,
) -> (NcuTarget, String) {
    let record = status_target(&t.label, &t.variant, "", status, reason);
    (record, stdout.to_string())
}

/// The record and CSV of call `t`, which ran, from ncu's `export` of its process.
fn read_one_call(
    unit: &[&Target],
    t: &Target,
    export: &Result<parse::Export, parse::ParseError>,
    stdout: &str,
    reading: &Reading,
) -> (NcuTarget, String) {
    let export = match export {
        Ok(e) => e,
        Err(e) => {
            let reason = format!("cannot read ncu's CSV: {e}");
            return whole_output(t, stdout, RunStatus::Failed, reason);
        }
    };
    let launches = launches_of(unit, t, &export.launches);
    if launches.is_empty() {
        return whole_output(t, stdout, RunStatus::Failed, no_kernel(t, &export.launches));
    }
    let ids: BTreeSet<&str> = launches.iter().map(|l| l.id.as_str()).collect();
    match baseline_call(t, &launches, reading.launches, reading.arch, reading.extra) {
        Ok(record) => (record, csv_of(stdout, &ids)),
        Err(why) => whole_output(t, stdout, RunStatus::Failed, why),
    }
}

/// The launches of `call`. Alone in its process, every profiled launch (ncu's include filter
/// chose only its range's); among several, those whose NVTX column names its range.
fn launches_of<'a>(unit: &[&Target], call: &Target, launches: &'a [Launch]) -> Vec<&'a Launch> {
    if unit.len() == 1 {
        return launches.iter().collect();
    }
    let range = call.call_range();
    launches
        .iter()
        .filter(|l| nvtx_column(l).is_some_and(|c| ranges_in(c).any(|r| r == range)))
        .collect()
}

/// The raw page's NVTX push/pop column of a launch (present with `--nvtx`).
fn nvtx_column(launch: &Launch) -> Option<&str> {
    launch
        .metrics
        .iter()
        .find(|(name, _)| name.contains("Push/Pop_Range"))
        .map(|(_, m)| m.value.as_str())
}

/// The words of an NVTX column: the thread id, each pushed range's domain, name and
/// attributes (`2634  "<default domain>:repro-profile.x.mission:none:…" `).
fn ranges_in(column: &str) -> impl Iterator<Item = &str> {
    column
        .split(|c: char| c == '"' || c == ':' || c.is_whitespace())
        .filter(|w| !w.is_empty())
}

/// Why a call that ran has no kernel, with what ncu's NVTX column said instead.
fn no_kernel(call: &Target, launches: &[Launch]) -> String {
    let range = call.call_range();
    let said = match launches.first().map(nvtx_column) {
        Some(Some(column)) => format!("the first kernel's NVTX column reads `{}`", column.trim()),
        Some(None) => "ncu's CSV has no NVTX push/pop column (run ncu with `--nvtx`)".into(),
        None => "ncu listed no kernel".into(),
    };
    format!("ncu profiled no kernel inside the call's NVTX range `{range}`: {said}")
}

/// ncu's output with only the launches `ids` among its CSV records: its messages, the
/// header and the units row stay, so the file parses alone. (ncu's raw-page records are one
/// line each.)
pub(super) fn csv_of(stdout: &str, ids: &BTreeSet<&str>) -> String {
    let mut out = String::new();
    let mut in_csv = false;
    for line in stdout.lines() {
        let keep = if !in_csv {
            in_csv = line.starts_with("\"ID\",");
            true
        } else if !line.starts_with('"') || line.starts_with("\"\",") {
            true
        } else {
            line[1..]
                .split('"')
                .next()
                .is_some_and(|id| ids.contains(id))
        };
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A baseline call's record from every kernel ncu profiled inside its NVTX range: the
/// script made `calls` profiled calls in turn, each launching the same kernels, so the
/// launches split into `calls` equal runs. A call's kernel time is the sum of its kernels';
/// `kernel_time_us` is the median over the calls (with their spread), `kernels` each
/// kernel's median time, and the other fields the medians of the longest kernel's launches.
pub(super) fn baseline_call(
    target: &Target,
    launches: &[&Launch],
    calls: u32,
    arch: Option<Arch>,
    extra: &[String],
) -> Result<NcuTarget, String> {
    let runs = split_calls(launches, calls as usize)?;
    let time = |l: &Launch| metrics::read(l, metrics::Field::KernelTimeUs, arch).map(|(t, _)| t);
    let kernels: Vec<NcuKernel> = (0..runs[0].len())
        .map(|j| {
            let times: Option<Vec<f64>> = runs.iter().map(|r| time(r[j])).collect();
            NcuKernel {
                name: runs[0][j].function_name().to_string(),
                time_us: times.and_then(|t| median(&t)),
            }
        })
        .collect();
    let longest = (0..kernels.len())
        .max_by(|&a, &b| {
            let t = |j: usize| kernels[j].time_us.unwrap_or(f64::NEG_INFINITY);
            t(a).total_cmp(&t(b))
        })
        .expect("a call with a launch");
    let column: Vec<&Launch> = runs.iter().map(|r| r[longest]).collect();
    let mut record = summarize_launches(
        &column,
        arch,
        extra,
        metrics::TargetId {
            target: &target.label,
            variant: &target.variant,
            kernel: &kernels[longest].name,
        },
    );
    let call_times: Option<Vec<f64>> = runs
        .iter()
        .map(|r| r.iter().map(|l| time(l)).sum())
        .collect();
    set_time_spread(&mut record, call_times.as_deref().unwrap_or_default());
    if record.kernel_time_us.is_none() {
        record.status = RunStatus::Failed;
        record.reason = Some(format!(
            "ncu measured no time for some of the {} kernels of the call",
            kernels.len()
        ));
    }
    record.launches = Some(calls);
    record.kernels = kernels;
    Ok(record)
}

/// `launches` (in launch order) as `calls` runs of the same kernels, one run per call; an
/// error when they do not split so.
fn split_calls<'a>(launches: &[&'a Launch], calls: usize) -> Result<Vec<Vec<&'a Launch>>, String> {
    if calls == 0 || launches.is_empty() || !launches.len().is_multiple_of(calls) {
        return Err(format!(
            "ncu profiled {} kernel launch(es) inside the call's NVTX range, not the same \
             kernels for each of its {calls} profiled calls (`launches: {calls}`)",
            launches.len()
        ));
    }
    let runs: Vec<Vec<&Launch>> = launches
        .chunks(launches.len() / calls)
        .map(<[&Launch]>::to_vec)
        .collect();
    for (i, run) in runs.iter().enumerate().skip(1) {
        for (mine, first) in run.iter().zip(&runs[0]) {
            if mine.function_name() != first.function_name() {
                return Err(format!(
                    "profiled call {} launched `{}` where the first launched `{}`: the calls \
                     did not each launch the same kernels",
                    i + 1,
                    mine.function_name(),
                    first.function_name()
                ));
            }
        }
    }
    Ok(runs)
}
