//! Warp-stall reasons: the metrics that name them, and the top ones of a launch.

use super::Arch;
use crate::parse::Launch;
use repro_schema::StallReason;
use std::collections::BTreeMap;

/// Warp-stall reasons as they appear in `smsp__warp_issue_stalled_<reason>_per_warp_active`.
pub fn stall_reasons(arch: Arch) -> &'static [&'static str] {
    const COMMON: &[&str] = &[
        "barrier",
        "branch_resolving",
        "dispatch_stall",
        "drain",
        "imc_miss",
        "lg_throttle",
        "long_scoreboard",
        "math_pipe_throttle",
        "membar",
        "mio_throttle",
        "misc",
        "no_instruction",
        "not_selected",
        "selected",
        "short_scoreboard",
        "sleeping",
        "tex_throttle",
        "wait",
    ];
    const HOPPER: &[&str] = &[
        "barrier",
        "branch_resolving",
        "dispatch_stall",
        "drain",
        "gmma",
        "imc_miss",
        "lg_throttle",
        "long_scoreboard",
        "math_pipe_throttle",
        "membar",
        "mio_throttle",
        "misc",
        "no_instruction",
        "not_selected",
        "selected",
        "short_scoreboard",
        "sleeping",
        "tex_throttle",
        "wait",
    ];
    match arch {
        Arch::Hopper => HOPPER,
        Arch::Ada | Arch::Ampere => COMMON,
    }
}

pub(super) const STALL_PCT_PREFIX: &str = "smsp__warp_issue_stalled_";
pub(super) const STALL_PCT_SUFFIX: &str = "_per_warp_active.pct";
const STALL_RATIO_PREFIX: &str = "smsp__average_warps_issue_stalled_";
const STALL_RATIO_SUFFIX: &str = "_per_issue_active.ratio";
/// The top `n` warp-stall reasons: the share of active warp-cycles stalled on each, from
/// `smsp__warp_issue_stalled_<r>_per_warp_active.pct`, or, where an export has only
/// `smsp__average_warps_issue_stalled_<r>_per_issue_active.ratio` (ncu's WarpStateStats
/// section), from those ratios normalised over all reasons (the same quantity).
/// `selected` (the warp issued) and zero shares are left out, and so are sub-reasons
/// such as `long_scoreboard_pipe_l1tex`, which split a reason already counted.
pub fn top_stalls(launch: &Launch, n: usize) -> (Vec<StallReason>, Vec<String>) {
    let by_pct = collect_stalls(launch, STALL_PCT_PREFIX, STALL_PCT_SUFFIX);
    let (shares, used) = if !by_pct.0.is_empty() {
        by_pct
    } else {
        let (ratios, used) = collect_stalls(launch, STALL_RATIO_PREFIX, STALL_RATIO_SUFFIX);
        let total: f64 = ratios.values().sum();
        if total <= 0.0 {
            return (Vec::new(), Vec::new());
        }
        let shares = ratios
            .into_iter()
            .map(|(r, v)| (r, 100.0 * v / total))
            .collect();
        (shares, used)
    };
    let mut stalls: Vec<StallReason> = shares
        .into_iter()
        .filter(|(r, v)| r != "selected" && *v > 0.0)
        .map(|(reason, pct)| StallReason { reason, pct })
        .collect();
    stalls.sort_by(|a, b| b.pct.total_cmp(&a.pct).then(a.reason.cmp(&b.reason)));
    stalls.truncate(n);
    (stalls, used)
}

/// Reason → value for metrics named `<prefix><reason><suffix>`, without sub-reasons; and
/// the metric names read.
fn collect_stalls(
    launch: &Launch,
    prefix: &str,
    suffix: &str,
) -> (BTreeMap<String, f64>, Vec<String>) {
    let found: Vec<(String, f64, String)> = launch
        .metrics
        .iter()
        .filter_map(|(name, m)| {
            let reason = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            Some((reason.to_string(), m.number()?, name.clone()))
        })
        .collect();
    let is_sub_reason = |r: &str| {
        found
            .iter()
            .any(|(other, _, _)| r.len() > other.len() && r.starts_with(&format!("{other}_")))
    };
    let kept: Vec<_> = found
        .iter()
        .filter(|(r, _, _)| !is_sub_reason(r))
        .cloned()
        .collect();
    let used = kept.iter().map(|(_, _, name)| name.clone()).collect();
    (kept.into_iter().map(|(r, v, _)| (r, v)).collect(), used)
}
