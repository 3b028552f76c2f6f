//! Several profiled launches of one kernel read as one record: every metric the median over
//! the launches, and the spread of the kernel time. One launch alone is a poor figure (the
//! first launches after a warm-up still vary by several percent), so the profile stage
//! profiles `launches:` of each and records their medians.

use super::metrics::{self, Arch, Field, TargetId};
use super::parse::{Launch, Metric};
use repro_schema::NcuTarget;

/// The median of `values` (type-7, as [`repro_base::stats`]); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (!sorted.is_empty()).then(|| repro_base::stats::percentile_sorted(&sorted, 0.5))
}

/// A launch whose every metric is the median of that metric over `launches` (which share
/// its unit, as one raw-page export's do); a metric that is not a number in each of them
/// keeps the first launch's value. Identity (ID, kernel, CC) is the first launch's.
pub fn median_launch(launches: &[&Launch]) -> Launch {
    let first = launches[0];
    let metrics = first
        .metrics
        .iter()
        .map(|(name, m)| {
            let numbers: Option<Vec<f64>> = launches
                .iter()
                .map(|l| l.get(name).filter(|o| o.unit == m.unit)?.number())
                .collect();
            let value = numbers
                .and_then(|n| median(&n))
                .map_or_else(|| m.value.clone(), |v| v.to_string());
            let unit = m.unit.clone();
            (name.clone(), Metric { value, unit })
        })
        .collect();
    Launch {
        metrics,
        ..first.clone()
    }
}

/// The record of `launches` of one kernel: [`metrics::summarize`] of their
/// [`median_launch`], with the kernel time's median, minimum and maximum over the launches
/// (each read in its own unit) and their count. No kernel time unless every launch has one.
pub fn summarize_launches(
    launches: &[&Launch],
    arch: Option<Arch>,
    extra: &[String],
    id: TargetId,
) -> NcuTarget {
    let mut record = metrics::summarize(&median_launch(launches), arch, extra, id);
    let times: Option<Vec<f64>> = launches
        .iter()
        .map(|l| metrics::read(l, Field::KernelTimeUs, arch).map(|(t, _)| t))
        .collect();
    set_time_spread(&mut record, times.as_deref().unwrap_or_default());
    record.launches = Some(launches.len() as u32);
    record
}

/// `kernel_time_us` and its spread from one time per launch (or per call); none from none.
pub fn set_time_spread(record: &mut NcuTarget, times: &[f64]) {
    record.kernel_time_us = median(times);
    record.kernel_time_us_min = times.iter().copied().reduce(f64::min);
    record.kernel_time_us_max = times.iter().copied().reduce(f64::max);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const ID: TargetId = TargetId {
        target: "t",
        variant: "v",
        kernel: "k",
    };

    fn launch(id: &str, time: &str, unit: &str, sm: &str) -> Launch {
        let m = |v: &str, u: &str| Metric {
            value: v.into(),
            unit: u.into(),
        };
        Launch {
            id: id.into(),
            kernel: "k(int)".into(),
            compute_capability: Some("9.0".into()),
            metrics: BTreeMap::from([
                ("gpu__time_duration.sum".into(), m(time, unit)),
                (
                    "sm__throughput.avg.pct_of_peak_sustained_elapsed".into(),
                    m(sm, "%"),
                ),
                ("launch__grid_size".into(), m("(4, 1, 1)", "")),
            ]),
        }
    }

    #[test]
    fn every_metric_is_the_median_and_text_stays_the_firsts() {
        let ls = [
            launch("0", "9,250", "ns", "40"),
            launch("1", "8,130", "ns", "44"),
            launch("2", "8,640", "ns", "41"),
        ];
        let refs: Vec<&Launch> = ls.iter().collect();
        let m = median_launch(&refs);
        assert_eq!(
            m.get("gpu__time_duration.sum").unwrap().number(),
            Some(8640.0)
        );
        assert_eq!(
            m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed")
                .unwrap()
                .number(),
            Some(41.0)
        );
        assert_eq!(m.get("launch__grid_size").unwrap().value, "(4, 1, 1)");
        assert_eq!(m.id, "0");
    }

    #[test]
    fn the_time_spread_is_over_every_launch_in_its_own_unit() {
        let ls = [
            launch("0", "9.25", "us", "40"),
            launch("1", "8.13", "us", "44"),
            launch("2", "8.64", "us", "41"),
            launch("3", "8.70", "us", "41"),
        ];
        let refs: Vec<&Launch> = ls.iter().collect();
        let t = summarize_launches(&refs, None, &[], ID);
        assert!((t.kernel_time_us.unwrap() - 8.67).abs() < 1e-9, "{t:?}");
        assert_eq!(t.kernel_time_us_min, Some(8.13));
        assert_eq!(t.kernel_time_us_max, Some(9.25));
        assert_eq!(t.launches, Some(4));
        assert_eq!(t.sm_util_pct, Some(41.0));
    }

    #[test]
    fn a_launch_without_a_time_leaves_the_record_without_one() {
        let ls = [
            launch("0", "9.25", "us", "40"),
            launch("1", "n/a", "us", "44"),
        ];
        let refs: Vec<&Launch> = ls.iter().collect();
        let t = summarize_launches(&refs, None, &[], ID);
        assert_eq!(t.kernel_time_us, None);
        assert_eq!(t.kernel_time_us_min, None);
    }
}
