//! Each target's kernel time from a pass of its own. ncu profiles the targets at least
//! twice, with the same warm-up and launches: once with `gpu__time_duration` alone (one
//! replay pass per launch), then with the counters' list ([`super::depth`]). Before each
//! replay pass after the first ncu restores the memory the kernel may write, and the launch
//! it times runs slower than alone, by more for some kernels than others
//! (`benches/results/ncu_time_pass_h200.md`); collecting even the one-pass counters slows it
//! by 1–7 % (`benches/results/ncu_replay_cost_h200.md`). So the kernel time and its spread
//! come from the time pass, every other figure from the counters' passes.

use repro_schema::{NcuTarget, RunStatus};

/// The raw metric the time pass asks for.
pub(super) const METRIC: &str = "gpu__time_duration.sum";

/// `full` (the counters' record) with its kernel time (median, spread, launch count, a baseline call's kernels)
/// from `timed`, the same target's record from the time pass. A target the time pass could
/// not measure has no kernel time to show: it fails, saying why.
pub(super) fn merge(mut full: NcuTarget, timed: &NcuTarget) -> NcuTarget {
    if !full.status.is_ok() {
        return full;
    }
    if !timed.status.is_ok() || timed.kernel_time_us.is_none() {
        let why = match timed.reason.as_deref() {
            Some(why) if !why.is_empty() && !timed.status.is_ok() => why,
            _ => "no kernel time in its output",
        };
        full.status = RunStatus::Failed;
        full.reason = Some(format!("ncu's kernel-time pass failed: {why}"));
        return full;
    }
    full.kernel_time_us = timed.kernel_time_us;
    full.kernel_time_us_min = timed.kernel_time_us_min;
    full.kernel_time_us_max = timed.kernel_time_us_max;
    full.launches = timed.launches;
    if !timed.kernels.is_empty() {
        full.kernels = timed.kernels.clone();
    }
    match timed.raw.get(METRIC) {
        Some(value) => full.raw.insert(METRIC.to_string(), value.clone()),
        None => full.raw.remove(METRIC),
    };
    full
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::targets::status_target;
    use repro_schema::NcuKernel;

    fn record(time: f64, raw: &str) -> NcuTarget {
        NcuTarget {
            kernel_time_us: Some(time),
            kernel_time_us_min: Some(time - 0.1),
            kernel_time_us_max: Some(time + 0.1),
            launches: Some(5),
            sm_util_pct: Some(20.0),
            raw: [(METRIC.to_string(), raw.to_string())].into(),
            kernels: vec![NcuKernel {
                name: "k".into(),
                time_us: Some(time),
            }],
            ..status_target("t", "v", "f", RunStatus::Ok, String::new())
        }
    }

    #[test]
    fn the_time_comes_from_the_time_pass_and_the_rest_from_the_full_profile() {
        let merged = merge(record(7.78, "7,776 ns"), &record(7.33, "7,328 ns"));
        assert_eq!(merged.kernel_time_us, Some(7.33));
        assert_eq!(merged.kernel_time_us_min, Some(7.23));
        assert_eq!(merged.kernel_time_us_max, Some(7.43));
        assert_eq!(merged.kernels[0].time_us, Some(7.33));
        assert_eq!(merged.raw[METRIC], "7,328 ns");
        assert_eq!(merged.sm_util_pct, Some(20.0));
        assert!(merged.status.is_ok());
    }

    #[test]
    fn a_target_the_time_pass_could_not_measure_fails() {
        let timed = status_target("t", "v", "f", RunStatus::Failed, "ncu timed out".into());
        let merged = merge(record(7.78, "7,776 ns"), &timed);
        assert_eq!(merged.status, RunStatus::Failed);
        assert_eq!(
            merged.reason.as_deref(),
            Some("ncu's kernel-time pass failed: ncu timed out")
        );
        let no_time = NcuTarget {
            kernel_time_us: None,
            ..record(7.33, "")
        };
        assert_eq!(
            merge(record(7.78, "7,776 ns"), &no_time).reason.as_deref(),
            Some("ncu's kernel-time pass failed: no kernel time in its output")
        );
    }

    #[test]
    fn a_failed_full_profile_stays_as_it_is() {
        let failed = status_target("t", "v", "f", RunStatus::Failed, "crashed".into());
        let merged = merge(failed.clone(), &record(7.33, "7,328 ns"));
        assert_eq!(merged, failed);
    }
}
