//! The profile stage's records: `artifacts/ncu/summary.json`, one entry per profiled target.

use super::{float, GateResult, Measured, RunStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One warp-stall reason with its share of stall samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallReason {
    pub reason: String,
    #[serde(serialize_with = "float::f4")]
    pub pct: f64,
}

/// One profiled target in `artifacts/ncu/summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcuTarget {
    pub target: String,
    pub variant: String,
    pub kernel: String,
    /// `ok`, `failed` or `skipped`.
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(serialize_with = "float::opt_f4")]
    pub sm_util_pct: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub tensor_core_util_pct: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub achieved_occupancy_pct: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub registers_per_thread: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub l2_hit_rate_pct: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub dram_bw_pct_peak: Option<f64>,
    /// Shared-memory bank conflicts (loads and stores) of one launch.
    #[serde(default, serialize_with = "float::opt_f4")]
    pub smem_bank_conflicts: Option<f64>,
    /// The median over the profiled launches, as every figure here (a baseline call's: the
    /// median of its profiled calls' summed kernel times, see `kernels`).
    #[serde(serialize_with = "float::opt_f4")]
    pub kernel_time_us: Option<f64>,
    /// The spread of `kernel_time_us` over the profiled launches (or calls).
    #[serde(
        default,
        serialize_with = "float::opt_f4",
        skip_serializing_if = "Option::is_none"
    )]
    pub kernel_time_us_min: Option<f64>,
    #[serde(
        default,
        serialize_with = "float::opt_f4",
        skip_serializing_if = "Option::is_none"
    )]
    pub kernel_time_us_max: Option<f64>,
    /// How many launches (a baseline's: calls) the medians are over; absent in summaries
    /// from before the stage profiled several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<u32>,
    /// Named field → the raw metric name it was read from.
    pub metric_names: BTreeMap<String, String>,
    /// Every raw metric read, as ncu printed it (value with unit).
    pub raw: BTreeMap<String, String>,
    pub top_stalls: Vec<StallReason>,
    /// The run that profiled it and the reuse key (absent for targets not profiled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// The workload shape it ran (absent in summaries older than the baselines' profiles,
    /// where every target ran its workload's primary shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// A baseline's call: every kernel it launched inside the profiled NVTX range, in launch
    /// order; `kernel_time_us` is their sum and the other fields are the longest one's.
    /// Empty for a variant (one kernel).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<NcuKernel>,
    /// The metric list ncu profiled it with; absent in summaries from before the stage had
    /// a choice (every target had the full list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_set: Option<MetricSet>,
}

/// The metric list a target was profiled with (the profile stage's `full_profile:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricSet {
    /// Every field, the warp-stall reasons and the stage's extra metrics.
    Full,
    /// What one replay pass gives: the kernel time, the tensor pipe, occupancy, registers
    /// and DRAM throughput; no SM throughput, L2 hit rate, bank conflicts or warp stalls.
    OnePass,
}

impl MetricSet {
    /// As `summary.json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricSet::Full => "full",
            MetricSet::OnePass => "one-pass",
        }
    }
}

/// One kernel of a profiled baseline call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcuKernel {
    /// ncu's `Kernel Name` without its parameter list.
    pub name: String,
    /// Its `gpu__time_duration`.
    #[serde(serialize_with = "float::opt_f4")]
    pub time_us: Option<f64>,
}

/// `artifacts/ncu/summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcuSummary {
    pub ncu_version: Option<String>,
    /// e.g. `base` (ncu's default: clocks locked to base) or `none`.
    pub clock_control: String,
    /// `all` (ncu's default: caches flushed before each replay pass) or `none`; empty in
    /// summaries written before the option.
    #[serde(default)]
    pub cache_control: String,
    pub targets: Vec<NcuTarget>,
    /// The `gates.profile` rules of pipeline.yaml, judged on the targets' medians.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
}
