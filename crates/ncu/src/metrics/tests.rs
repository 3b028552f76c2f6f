//! Fields read through their aliases, times normalised, stalls ranked, requests listed.

use super::*;
use crate::parse::Metric;

fn launch(metrics: &[(&str, &str, &str)]) -> Launch {
    Launch {
        id: "0".into(),
        kernel: "k(int)".into(),
        compute_capability: Some("9.0".into()),
        metrics: metrics
            .iter()
            .map(|(n, v, u)| {
                (
                    n.to_string(),
                    Metric {
                        value: v.to_string(),
                        unit: u.to_string(),
                    },
                )
            })
            .collect(),
    }
}

#[test]
fn arch_from_names() {
    assert_eq!(Arch::from_sm("sm_89"), Some(Arch::Ada));
    assert_eq!(Arch::from_sm("sm_90a"), Some(Arch::Hopper));
    assert_eq!(Arch::from_sm("sm_86"), Some(Arch::Ampere));
    assert_eq!(Arch::from_sm("sm_100"), None);
    assert_eq!(Arch::from_compute_capability("9.0"), Some(Arch::Hopper));
    assert_eq!(Arch::from_compute_capability("8.9"), Some(Arch::Ada));
}

#[test]
fn times_are_normalised_to_microseconds() {
    for (v, u, us) in [
        ("16,544", "ns", 16.544),
        ("22.72", "us", 22.72),
        ("22.72", "usecond", 22.72),
        ("1.5", "ms", 1500.0),
        ("1.5", "msecond", 1500.0),
    ] {
        let l = launch(&[("gpu__time_duration.sum", v, u)]);
        let (got, name) = read(&l, Field::KernelTimeUs, Some(Arch::Hopper)).unwrap();
        assert!((got - us).abs() < 1e-9, "{v} {u}: {got}");
        assert_eq!(name, "gpu__time_duration.sum");
    }
    let odd = launch(&[("gpu__time_duration.sum", "3", "cycle")]);
    assert_eq!(read(&odd, Field::KernelTimeUs, None), None);
}

#[test]
fn first_present_alias_wins_and_is_recorded() {
    let l = launch(&[
        (
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "10",
            "%",
        ),
        (
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "n/a",
            "%",
        ),
    ]);
    assert_eq!(
        read(&l, Field::DramBwPctPeak, Some(Arch::Ada)),
        Some((10.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed"))
    );
}

#[test]
fn an_older_scripts_tensor_metric_is_read_and_named_when_the_preferred_is_absent() {
    let old = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";
    let l = launch(&[(old, "41.5", "%")]);
    for arch in Arch::ALL {
        assert_eq!(
            read(&l, Field::TensorCoreUtil, Some(arch)),
            Some((41.5, old)),
            "{arch:?}"
        );
    }
    let t = summarize(
        &l,
        None,
        &[],
        TargetId {
            target: "t",
            variant: "",
            kernel: "k",
        },
    );
    assert_eq!(t.tensor_core_util_pct, Some(41.5));
    assert_eq!(t.metric_names["tensor_core_util_pct"], old);
    // The preferred name still wins when both are there.
    let both = launch(&[
        (old, "41.5", "%"),
        (
            raw_aliases(Field::TensorCoreUtil, Arch::Hopper)[0],
            "40",
            "%",
        ),
    ]);
    assert_eq!(
        read(&both, Field::TensorCoreUtil, Some(Arch::Hopper)).map(|r| r.0),
        Some(40.0)
    );
}

#[test]
fn fallback_names_and_the_l2_lookup_counts_exist_on_their_chip() {
    for arch in Arch::ALL {
        let path = format!(
            "{}/tests/fixtures/ncu/query_metrics_{}.txt",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
            arch.chip()
        );
        let listed = std::fs::read_to_string(path).unwrap();
        let lookups = L2_LOOKUP_PARTS.iter().copied();
        for field in Field::ALL {
            for name in fallback_aliases(field, arch)
                .iter()
                .copied()
                .chain(lookups.clone())
            {
                let base = name.split('.').next().unwrap();
                assert!(
                    listed
                        .lines()
                        .any(|l| l.split_whitespace().next() == Some(base)),
                    "{base} is not a {} metric",
                    arch.chip()
                );
            }
        }
    }
}

#[test]
fn stalls_skip_selected_zero_and_sub_reasons() {
    let l = launch(&[
        (
            "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
            "80",
            "%",
        ),
        (
            "smsp__warp_issue_stalled_long_scoreboard_pipe_l1tex_per_warp_active.pct",
            "70",
            "%",
        ),
        (
            "smsp__warp_issue_stalled_selected_per_warp_active.pct",
            "5",
            "%",
        ),
        (
            "smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct",
            "3",
            "%",
        ),
        (
            "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
            "0",
            "%",
        ),
    ]);
    let (stalls, used) = top_stalls(&l, 5);
    let names: Vec<_> = stalls.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(names, ["long_scoreboard", "math_pipe_throttle"]);
    assert!(!used.iter().any(|u| u.contains("pipe_l1tex")));
}

#[test]
fn stall_ratios_are_normalised_when_percentages_are_missing() {
    let l = launch(&[
        (
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
            "3",
            "inst",
        ),
        (
            "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",
            "1",
            "inst",
        ),
    ]);
    let (stalls, _) = top_stalls(&l, 5);
    assert_eq!(stalls.len(), 1);
    assert!((stalls[0].pct - 75.0).abs() < 1e-9);
}

#[test]
fn request_list_has_no_duplicates_and_keeps_extra() {
    let extra = vec![
        "dram__bytes_read.sum".to_string(),
        "gpu__time_duration.sum".to_string(),
    ];
    let list = request_list(None, &extra);
    let mut dedup = list.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), list.len());
    assert_eq!(list.last().unwrap(), "dram__bytes_read.sum");
    let hopper = request_list(Some(Arch::Hopper), &[]);
    assert!(!hopper.iter().any(|m| m.contains("_v2")));
    assert!(hopper.iter().any(|m| m.contains("stalled_gmma")));
}

#[test]
fn the_one_pass_list_has_the_one_pass_fields_and_nothing_else() {
    let hopper = one_pass_list(Some(Arch::Hopper));
    assert_eq!(hopper[0], "gpu__time_duration.sum");
    for field in Field::ALL {
        let named = raw_aliases(field, Arch::Hopper)
            .iter()
            .any(|m| hopper.iter().any(|x| x == m));
        assert_eq!(named, field.one_pass(), "{field:?}");
    }
    assert!(!hopper.iter().any(|m| m.contains("stalled")));
    let every = one_pass_list(None);
    assert!(every.iter().any(|m| m.contains("_v2")), "Ada's names too");
    let full = request_list(None, &[]);
    assert!(
        every.iter().all(|m| full.contains(m)),
        "a part of the full list"
    );
}

#[test]
fn the_full_list_leaves_out_what_the_one_pass_gives_but_the_time_and_extra() {
    let registers = "launch__registers_per_thread".to_string();
    for arch in [Some(Arch::Hopper), Some(Arch::Ada), None] {
        let full = full_list(arch, &[]);
        let one = one_pass_list(arch);
        assert_eq!(
            one.iter().filter(|m| full.contains(m)).collect::<Vec<_>>(),
            ["gpu__time_duration.sum"],
            "{arch:?}"
        );
        let whole = request_list(arch, &[]);
        let rest: Vec<&String> = whole.iter().filter(|m| !one.contains(m)).collect();
        assert_eq!(full.iter().skip(1).collect::<Vec<_>>(), rest, "{arch:?}");
    }
    let asked = full_list(Some(Arch::Hopper), std::slice::from_ref(&registers));
    assert!(
        asked.contains(&registers),
        "a metric the stage asks for stays"
    );
}

#[test]
fn the_l2_hit_rate_is_hits_over_lookups_of_one_count_and_ncus_own_only_without_them() {
    // ws-c1-x2 on mission, one launch on an H200: ncu's rate divides the hits by
    // `lts__t_sectors` of another replay pass (benches/results/l2_hit_rate_h200.md).
    let both = launch(&[
        ("lts__t_sector_hit_rate.pct", "118.24", "%"),
        ("lts__t_sectors_lookup_hit.sum", "266,155", "sector"),
        ("lts__t_sectors_lookup_miss.sum", "20", "sector"),
    ]);
    let (rate, name) = read(&both, Field::L2HitRate, Some(Arch::Hopper)).unwrap();
    assert!((rate - 100.0 * 266155.0 / 266175.0).abs() < 1e-9, "{rate}");
    assert_eq!(name, L2_HIT_FROM_LOOKUPS);
    let t = summarize(
        &both,
        None,
        &[],
        TargetId {
            target: "t",
            variant: "v",
            kernel: "k",
        },
    );
    assert_eq!(t.metric_names["l2_hit_rate_pct"], L2_HIT_FROM_LOOKUPS);
    assert!(
        L2_LOOKUP_PARTS.iter().all(|p| t.raw.contains_key(*p)),
        "both counts kept: {:?}",
        t.raw
    );
    // An export with ncu's rate only (a user's own): read as it is.
    let own = launch(&[("lts__t_sector_hit_rate.pct", "102.39", "%")]);
    assert_eq!(
        read(&own, Field::L2HitRate, None),
        Some((102.39, "lts__t_sector_hit_rate.pct"))
    );
    // No lookup at all: no rate.
    let idle = launch(&[
        ("lts__t_sectors_lookup_hit.sum", "0", "sector"),
        ("lts__t_sectors_lookup_miss.sum", "0", "sector"),
    ]);
    assert_eq!(read(&idle, Field::L2HitRate, None), None);
    let requested = request_list(Some(Arch::Hopper), &[]);
    assert!(L2_LOOKUP_PARTS
        .iter()
        .all(|p| requested.iter().any(|m| m == p)));
    assert!(!requested.iter().any(|m| m == "lts__t_sector_hit_rate.pct"));
}
