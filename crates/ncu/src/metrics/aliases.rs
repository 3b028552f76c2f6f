//! The metric names each field is read from, per architecture, best first.

use super::{Arch, Field};

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
        // Computed from `L2_LOOKUP_PARTS` (`super::read`); ncu's own rate is a fallback.
        (Field::L2HitRate, _) => &[],
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

/// What `l2_hit_rate_pct` is computed from: L2 sector lookups that hit and that missed,
/// requested and kept in `raw`; the rate is hits ÷ (hits + misses). ncu's own
/// `lts__t_sector_hit_rate.pct` divides the hits by `lts__t_sectors`, counted in another
/// replay pass that does not see the same traffic: on an H200 it read 115–122 % for
/// ws-c1-x2 on mission and 411–623 % for mma-m64 on small, where hits ÷ (hits + misses)
/// reads 99.6–100 % (`benches/results/l2_hit_rate_h200.md`).
pub const L2_LOOKUP_PARTS: [&str; 2] = [
    "lts__t_sectors_lookup_hit.sum",
    "lts__t_sectors_lookup_miss.sum",
];

/// The name `metric_names` records for an L2 hit rate computed from [`L2_LOOKUP_PARTS`].
pub const L2_HIT_FROM_LOOKUPS: &str =
    "lts__t_sectors_lookup_hit.sum / (lts__t_sectors_lookup_hit.sum + lts__t_sectors_lookup_miss.sum)";

/// Requested beside the fields and kept in `raw`: the shared-memory bank conflicts of loads
/// and of stores.
pub const SMEM_BANK_CONFLICT_PARTS: [&str; 2] = [
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
];

/// Other raw names ncu has for the same quantity on `arch`, read (never requested) when
/// none of [`raw_aliases`] is in an export: the per-instruction-type tensor-pipe metrics
/// that older profiling scripts ask for, and ncu's own L2 hit rate. Each is checked against
/// `ncu --query-metrics --chip` of that architecture (`tests/fixtures/ncu/query_metrics_*.txt`).
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
        // An export without the lookup counts (`L2_LOOKUP_PARTS`): ncu's rate, as it is.
        (Field::L2HitRate, _) => &["lts__t_sector_hit_rate.pct"],
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
