//! The named fields of `artifacts/ncu/summary.json` and the raw Nsight Compute metrics they
//! are read from, per GPU architecture. Names were checked against `ncu --query-metrics
//! --chip {ga100,ad104,gh100}` of Nsight Compute 2025.3.1 (`tests/fixtures/ncu/`), but for
//! the shared-memory bank conflicts, added later and read on a GPU by the GPU test only.
//!
//! Each field has an ordered list of aliases; the first one present with a number wins and
//! its name is recorded. Details-page exports are read through the section/metric display
//! names, which are the same on every architecture.

mod aliases;
mod stalls;
mod summary;

pub use aliases::{
    aliases, details_alias, fallback_aliases, raw_aliases, L2_HIT_FROM_LOOKUPS, L2_LOOKUP_PARTS,
    SMEM_BANK_CONFLICT_PARTS,
};
pub use stalls::{stall_reasons, top_stalls};
pub use summary::{summarize, TargetId};

use super::parse::Launch;
use repro_schema::NcuTarget;
use stalls::{STALL_PCT_PREFIX, STALL_PCT_SUFFIX};

/// A named field of [`NcuTarget`](repro_schema::NcuTarget).
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

    /// Whether ncu reads the field in the one pass it needs for the kernel time anyway
    /// ([`one_pass_list`]). Beside them on an H200, the SM throughput adds 9 replay passes,
    /// the warp-stall reasons 7, the L2 hit rate and the bank conflicts 2 each
    /// (`benches/results/ncu_replay_cost_h200.md`).
    pub fn one_pass(self) -> bool {
        matches!(
            self,
            Field::KernelTimeUs
                | Field::TensorCoreUtil
                | Field::AchievedOccupancy
                | Field::RegistersPerThread
                | Field::DramBwPctPeak
        )
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

/// The `--metrics` list for `arch` (all architectures' names when unknown): every alias
/// of every field, the warp-stall metrics, then `extra`, without duplicates.
pub fn request_list(arch: Option<Arch>, extra: &[String]) -> Vec<String> {
    let archs = archs(arch);
    let mut list = field_aliases(&archs, |_| true);
    let mut push = |m: String| {
        if !list.contains(&m) {
            list.push(m);
        }
    };
    L2_LOOKUP_PARTS
        .iter()
        .chain(&SMEM_BANK_CONFLICT_PARTS)
        .for_each(|m| push(m.to_string()));
    for a in &archs {
        for r in stall_reasons(*a) {
            push(format!("{STALL_PCT_PREFIX}{r}{STALL_PCT_SUFFIX}"));
        }
    }
    extra.iter().for_each(|m| push(m.clone()));
    list
}

/// The `--metrics` list of the full profile on `arch`: [`request_list`] without the fields
/// the one-pass profile gives every target and the record takes from there
/// ([`Field::one_pass`]), but the kernel time, which ncu measures in any pass and every
/// record reads. A metric of `extra` stays. On an H200 that is 15 replay passes per launch
/// where the whole list takes 16 (`benches/results/ncu_replay_cost_h200.md`).
pub fn full_list(arch: Option<Arch>, extra: &[String]) -> Vec<String> {
    let given = field_aliases(&archs(arch), |f| f.one_pass() && f != Field::KernelTimeUs);
    request_list(arch, extra)
        .into_iter()
        .filter(|m| !given.contains(m) || extra.contains(m))
        .collect()
}

/// The `--metrics` list of a one-pass profile on `arch` (all architectures' names when
/// unknown): every alias of the fields ncu reads in one replay pass ([`Field::one_pass`]).
pub fn one_pass_list(arch: Option<Arch>) -> Vec<String> {
    field_aliases(&archs(arch), Field::one_pass)
}

fn archs(arch: Option<Arch>) -> Vec<Arch> {
    arch.map(|a| vec![a]).unwrap_or_else(|| Arch::ALL.to_vec())
}

/// Every alias on `archs` of the fields `keep` keeps, in field order, without duplicates.
fn field_aliases(archs: &[Arch], keep: fn(Field) -> bool) -> Vec<String> {
    let mut list: Vec<String> = Vec::new();
    for field in Field::ALL.into_iter().filter(|f| keep(*f)) {
        for a in archs {
            for m in raw_aliases(field, *a) {
                if !list.iter().any(|x| x == m) {
                    list.push(m.to_string());
                }
            }
        }
    }
    list
}

/// The value of field `f` in record `t`.
pub fn value(t: &NcuTarget, f: Field) -> Option<f64> {
    match f {
        Field::SmUtil => t.sm_util_pct,
        Field::TensorCoreUtil => t.tensor_core_util_pct,
        Field::AchievedOccupancy => t.achieved_occupancy_pct,
        Field::RegistersPerThread => t.registers_per_thread,
        Field::L2HitRate => t.l2_hit_rate_pct,
        Field::DramBwPctPeak => t.dram_bw_pct_peak,
        Field::KernelTimeUs => t.kernel_time_us,
        Field::SmemBankConflicts => t.smem_bank_conflicts,
    }
}

/// Field `f` of record `t`, to set.
pub fn value_mut(t: &mut NcuTarget, f: Field) -> &mut Option<f64> {
    match f {
        Field::SmUtil => &mut t.sm_util_pct,
        Field::TensorCoreUtil => &mut t.tensor_core_util_pct,
        Field::AchievedOccupancy => &mut t.achieved_occupancy_pct,
        Field::RegistersPerThread => &mut t.registers_per_thread,
        Field::L2HitRate => &mut t.l2_hit_rate_pct,
        Field::DramBwPctPeak => &mut t.dram_bw_pct_peak,
        Field::KernelTimeUs => &mut t.kernel_time_us,
        Field::SmemBankConflicts => &mut t.smem_bank_conflicts,
    }
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

/// Read `field` from `launch`: the value (normalised to the field's unit) and the metric
/// (for an L2 hit rate computed from [`L2_LOOKUP_PARTS`], [`L2_HIT_FROM_LOOKUPS`]).
pub fn read(launch: &Launch, field: Field, arch: Option<Arch>) -> Option<(f64, &'static str)> {
    if field == Field::L2HitRate {
        if let Some(rate) = l2_hit_from_lookups(launch) {
            return Some((rate, L2_HIT_FROM_LOOKUPS));
        }
    }
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

/// hits ÷ (hits + misses) of the L2's sector lookups, in %; none without both counts or
/// without a lookup.
fn l2_hit_from_lookups(launch: &Launch) -> Option<f64> {
    let [hit, miss] = L2_LOOKUP_PARTS.map(|name| launch.get(name).and_then(|m| m.number()));
    let (hit, miss) = (hit?, miss?);
    (hit + miss > 0.0).then(|| 100.0 * hit / (hit + miss))
}

#[cfg(test)]
mod tests;
