//! The [`NcuTarget`] of one launch: every named field, its metric, the raw metrics, the stalls.

use super::{read, top_stalls, Arch, Field, SMEM_BANK_CONFLICT_PARTS};
use super::{L2_HIT_FROM_LOOKUPS, L2_LOOKUP_PARTS};
use crate::{parse::Launch, parse::Metric};
use repro_schema::{NcuTarget, RunStatus};
use std::collections::BTreeMap;

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
            let parts = match name {
                L2_HIT_FROM_LOOKUPS => &L2_LOOKUP_PARTS[..],
                _ => std::slice::from_ref(&name),
            };
            for part in parts {
                record(part, launch.get(part).expect("read found it"));
            }
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
        metric_set: None,
    }
}
