//! The named fields of `artifacts/ncu/summary.json` and the raw Nsight Compute metrics they
//! are read from, per GPU architecture. Names were checked against `ncu --query-metrics
//! --chip {ga100,ad104,gh100}` of Nsight Compute 2025.3.1 (`tests/fixtures/ncu/`), but for
//! the shared-memory bank conflicts, added later and read on a GPU by the GPU test only.
//!
//! Each field has an ordered list of aliases; the first one present with a number wins and
//! its name is recorded. Details-page exports are read through the section/metric display
//! names, which are the same on every architecture.

use super::parse::{Launch, Metric};
use repro_base::schema::NcuTarget;
use repro_base::schema::RunStatus;
use repro_base::schema::StallReason;
use std::collections::BTreeMap;

/// A named field of [`NcuTarget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    SmUtil,
    TensorCoreUtil,
    AchievedOccupancy,
    RegistersPerThread,
    L2HitRate,
    DramBwPctPeak,
    KernelTimeUs,
    SmemBankConflicts,
}

impl Field {
    pub const ALL: [Field; 8] = [
        Field::KernelTimeUs,
        Field::SmUtil,
        Field::TensorCoreUtil,
        Field::AchievedOccupancy,
        Field::RegistersPerThread,
        Field::L2HitRate,
        Field::DramBwPctPeak,
        Field::SmemBankConflicts,
    ];

    /// The JSON key in `summary.json`.
    pub fn key(self) -> &'static str {
        match self {
            Field::SmUtil => "sm_util_pct",
            Field::TensorCoreUtil => "tensor_core_util_pct",
            Field::AchievedOccupancy => "achieved_occupancy_pct",
            Field::RegistersPerThread => "registers_per_thread",
            Field::L2HitRate => "l2_hit_rate_pct",
            Field::DramBwPctPeak => "dram_bw_pct_peak",
            Field::KernelTimeUs => "kernel_time_us",
            Field::SmemBankConflicts => "smem_bank_conflicts",
        }
    }

    /// The field whose JSON key is `key`.
    pub fn from_key(key: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.key() == key)
    }
}

/// GPU generations with their own metric names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// sm_80, sm_86, sm_87 (A100 = GA100).
    Ampere,
    /// sm_89 (L4 = AD104).
    Ada,
    /// sm_90 (H100, H200 = GH100).
    Hopper,
}

impl Arch {
    pub const ALL: [Arch; 3] = [Arch::Hopper, Arch::Ada, Arch::Ampere];

    /// From `sm_89`, `sm_90a`, ...; `None` for architectures without a table here.
    pub fn from_sm(arch: &str) -> Option<Arch> {
        let digits: String = arch
            .trim_start_matches("sm_")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        match digits.as_str() {
            "80" | "86" | "87" => Some(Arch::Ampere),
            "89" => Some(Arch::Ada),
            "90" => Some(Arch::Hopper),
            _ => None,
        }
    }

    /// From ncu's `CC` column (`9.0`).
    pub fn from_compute_capability(cc: &str) -> Option<Arch> {
        Arch::from_sm(&format!("sm_{}", cc.replace('.', "")))
    }

    /// The `--chip` name of `ncu --query-metrics` the table was checked against.
    pub fn chip(self) -> &'static str {
        match self {
            Arch::Ampere => "ga100",
            Arch::Ada => "ad104",
            Arch::Hopper => "gh100",
        }
    }
}

/// Raw metric names for `field` on `arch`, best first.
pub fn raw_aliases(field: Field, arch: Arch) -> &'static [&'static str] {
    match (field, arch) {
        (Field::SmUtil, _) => &["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
        // Hopper: the all-MMA tensor pipe (HMMA/HGMMA/QGMMA/IMMA/...), which leaves out the
        // HFMA2.MMA half-precision FMAs that `sm__pipe_tensor_cycles_active` counts.
        (Field::TensorCoreUtil, Arch::Hopper) => &[
            "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        ],
        // Ada: `_v2` replaces the deprecated name.
        (Field::TensorCoreUtil, Arch::Ada) => &[
            "sm__pipe_tensor_cycles_active_v2.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        ],
        // Ampere: the only tensor-pipe total (includes HFMA2.MMA).
        (Field::TensorCoreUtil, Arch::Ampere) => {
            &["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]
        }
        (Field::AchievedOccupancy, _) => &["sm__warps_active.avg.pct_of_peak_sustained_active"],
        (Field::RegistersPerThread, _) => &["launch__registers_per_thread"],
        (Field::L2HitRate, _) => &["lts__t_sector_hit_rate.pct"],
        // What the Speed Of Light section shows as "DRAM Throughput".
        (Field::DramBwPctPeak, _) => &[
            "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        ],
        (Field::KernelTimeUs, _) => &["gpu__time_duration.sum"],
        // Loads and stores; `SMEM_BANK_CONFLICT_PARTS` splits them.
        (Field::SmemBankConflicts, _) => &["l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"],
    }
}

/// Requested beside the fields and kept in `raw`: the shared-memory bank conflicts of loads
/// and of stores.
pub const SMEM_BANK_CONFLICT_PARTS: [&str; 2] = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
];

/// Other raw names ncu has for the same quantity on `arch`, read (never requested) when
/// none of [`raw_aliases`] is in an export: the per-instruction-type tensor-pipe metrics
/// that older profiling scripts ask for. Each is checked against `ncu --query-metrics
/// --chip` of that architecture (`tests/fixtures/ncu/query_metrics_*.txt`).
pub fn fallback_aliases(field: Field, arch: Arch) -> &'static [&'static str] {
    match (field, arch) {
        // gh100: "HMMA/HGMMA/QGMMA ops", then "HMMA/HFMA2.MMA/HGMMA/QGMMA".
        (Field::TensorCoreUtil, Arch::Hopper) => &[
            "sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        ],
        // ad104: "HMMA/QMMA ops", and its deprecated name.
        (Field::TensorCoreUtil, Arch::Ada) => &[
            "sm__pipe_tensor_op_hmma_cycles_active_v2.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
        ],
        // ga100: "HMMA/HFMA2.MMA ops".
        (Field::TensorCoreUtil, Arch::Ampere) => {
            &["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"]
        }
        _ => &[],
    }
}

/// The details page's `<Section Name>: <Metric Name>` for `field`, if it shows one.
pub fn details_alias(field: Field) -> Option<&'static str> {
    match field {
        Field::SmUtil => Some("GPU Speed Of Light Throughput: Compute (SM) Throughput"),
        Field::TensorCoreUtil => None,
        Field::AchievedOccupancy => Some("Occupancy: Achieved Occupancy"),
        Field::RegistersPerThread => Some("Launch Statistics: Registers Per Thread"),
        Field::L2HitRate => Some("Memory Workload Analysis: L2 Hit Rate"),
        Field::DramBwPctPeak => Some("GPU Speed Of Light Throughput: DRAM Throughput"),
        Field::KernelTimeUs => Some("GPU Speed Of Light Throughput: Duration"),
        Field::SmemBankConflicts => None,
    }
}

/// Every name `field` may be read from: the raw names for `arch` (all architectures' when
/// unknown), then their fallbacks, then the details-page name.
pub fn aliases(field: Field, arch: Option<Arch>) -> Vec<&'static str> {
    let archs: Vec<Arch> = match arch {
        Some(a) => vec![a],
        None => Arch::ALL.to_vec(),
    };
    let mut names: Vec<&'static str> = Vec::new();
    let lists: [fn(Field, Arch) -> &'static [&'static str]; 2] = [raw_aliases, fallback_aliases];
    for list in lists {
        for &a in &archs {
            for n in list(field, a) {
                if !names.contains(n) {
                    names.push(n);
                }
            }
        }
    }
    names.extend(details_alias(field));
    names
}

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

const STALL_PCT_PREFIX: &str = "smsp__warp_issue_stalled_";
const STALL_PCT_SUFFIX: &str = "_per_warp_active.pct";
const STALL_RATIO_PREFIX: &str = "smsp__average_warps_issue_stalled_";
const STALL_RATIO_SUFFIX: &str = "_per_issue_active.ratio";

/// The `--metrics` list for `arch` (all architectures' names when unknown): every alias
/// of every field, the warp-stall metrics, then `extra`, without duplicates.
pub fn request_list(arch: Option<Arch>, extra: &[String]) -> Vec<String> {
    let mut list: Vec<String> = Vec::new();
    let mut push = |m: String| {
        if !list.contains(&m) {
            list.push(m);
        }
    };
    let archs: Vec<Arch> = arch.map(|a| vec![a]).unwrap_or_else(|| Arch::ALL.to_vec());
    for field in Field::ALL {
        for a in &archs {
            raw_aliases(field, *a)
                .iter()
                .for_each(|m| push(m.to_string()));
        }
    }
    SMEM_BANK_CONFLICT_PARTS
        .iter()
        .for_each(|m| push(m.to_string()));
    for a in &archs {
        for r in stall_reasons(*a) {
            push(format!("{STALL_PCT_PREFIX}{r}{STALL_PCT_SUFFIX}"));
        }
    }
    extra.iter().for_each(|m| push(m.clone()));
    list
}

/// A time in µs from a value in ncu's unit; `None` for units that are not times.
fn to_microseconds(value: f64, unit: &str) -> Option<f64> {
    let factor = match unit.trim() {
        "ns" | "nsecond" => 1e-3,
        "us" | "usecond" | "µs" => 1.0,
        "ms" | "msecond" => 1e3,
        "s" | "second" => 1e6,
        _ => return None,
    };
    Some(value * factor)
}

/// Read `field` from `launch`: the value (normalised to the field's unit) and the metric.
pub fn read(launch: &Launch, field: Field, arch: Option<Arch>) -> Option<(f64, &'static str)> {
    aliases(field, arch).into_iter().find_map(|name| {
        let metric = launch.get(name)?;
        let v = metric.number()?;
        let v = match field {
            Field::KernelTimeUs => to_microseconds(v, &metric.unit)?,
            _ => v,
        };
        Some((v, name))
    })
}

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

/// Identity of a profiled target, for [`summarize`].
pub struct TargetId<'a> {
    pub target: &'a str,
    pub variant: &'a str,
    pub kernel: &'a str,
}

/// The [`NcuTarget`] of one launch: named fields, the metric each came from, every raw
/// metric read (with `extra`, the user's own metrics, when present) and the top 5 stalls.
/// The architecture is taken from the launch's `CC` column when `arch` is `None`.
pub fn summarize(launch: &Launch, arch: Option<Arch>, extra: &[String], id: TargetId) -> NcuTarget {
    let arch = arch.or_else(|| {
        launch
            .compute_capability
            .as_deref()
            .and_then(Arch::from_compute_capability)
    });
    let mut values: BTreeMap<Field, f64> = BTreeMap::new();
    let mut metric_names = BTreeMap::new();
    let mut raw: BTreeMap<String, String> = BTreeMap::new();
    let mut record = |name: &str, m: &Metric| {
        raw.insert(name.to_string(), m.display());
    };
    for field in Field::ALL {
        if let Some((v, name)) = read(launch, field, arch) {
            values.insert(field, v);
            metric_names.insert(field.key().to_string(), name.to_string());
            record(name, launch.get(name).expect("read found it"));
        }
    }
    let (top_stalls, stall_metrics) = top_stalls(launch, 5);
    let parts = SMEM_BANK_CONFLICT_PARTS.iter().map(|p| p.to_string());
    for name in stall_metrics.iter().chain(extra).cloned().chain(parts) {
        if let Some(m) = launch.get(&name) {
            record(&name, m);
        }
    }
    let get = |f: Field| values.get(&f).copied();
    NcuTarget {
        target: id.target.to_string(),
        variant: id.variant.to_string(),
        kernel: id.kernel.to_string(),
        status: RunStatus::Ok,
        reason: None,
        sm_util_pct: get(Field::SmUtil),
        tensor_core_util_pct: get(Field::TensorCoreUtil),
        achieved_occupancy_pct: get(Field::AchievedOccupancy),
        registers_per_thread: get(Field::RegistersPerThread),
        l2_hit_rate_pct: get(Field::L2HitRate),
        dram_bw_pct_peak: get(Field::DramBwPctPeak),
        smem_bank_conflicts: get(Field::SmemBankConflicts),
        kernel_time_us: get(Field::KernelTimeUs),
        kernel_time_us_min: None,
        kernel_time_us_max: None,
        launches: None,
        metric_names,
        raw,
        top_stalls,
        measured: None,
        shape: None,
        kernels: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn fallback_names_exist_on_their_chip() {
        for arch in Arch::ALL {
            let path = format!(
                "{}/tests/fixtures/ncu/query_metrics_{}.txt",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../.."),
                arch.chip()
            );
            let listed = std::fs::read_to_string(path).unwrap();
            for field in Field::ALL {
                for name in fallback_aliases(field, arch) {
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
}
