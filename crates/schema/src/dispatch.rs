//! The summarize stage's dispatch table: `artifacts/dispatch.json`, which kernel to call for
//! each declared shape of each workload, ranked from the bench, tune and profile records
//! (docs/guide/artifacts.md, "artifacts/dispatch.json").

use super::float;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `artifacts/dispatch.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DispatchFile {
    /// One table per workload, in pipeline.yaml's order.
    pub workloads: Vec<DispatchTable>,
}

/// Which kernel to call for each shape of one workload, on one GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchTable {
    pub workload: String,
    /// The GPU model every figure of the table was measured on (the one most of the
    /// workload's timed harness records name); `None` when nothing was timed. Records from
    /// another GPU are left out (each shape's `ineligible` names the kernels so ruled out).
    pub gpu: Option<String>,
    /// How to launch any kernel of the workload.
    pub launch: LaunchRule,
    /// Every shape the workload declares, in its declaration's order.
    pub shapes: Vec<ShapeDispatch>,
    /// What a caller needs to call each kernel the shapes name, by name.
    pub kernels: BTreeMap<String, KernelCall>,
}

/// The workload's launch geometry (its `launch:` in pipeline.yaml): expressions over the
/// shape's dims, the kernel's defines and the cubin's `globals`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchRule {
    /// 1 to 3 extents (x, y, z).
    pub grid: Vec<String>,
    /// 1 to 3 extents (x, y, z).
    pub block: Vec<String>,
    /// Dynamic shared memory per block, bytes; `None`: 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smem: Option<String>,
    /// `extern "C" __device__ const int` globals of the cubin the expressions read: the
    /// geometry the kernel derives from its defines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub globals: Vec<String>,
    /// The values the expressions take for a define a kernel's `defines` leave out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub defaults: BTreeMap<String, i64>,
    /// Conditions a (kernel, shape) must meet to run (`repro_head_dim == D`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
}

/// One shape: the best correct kernel by each measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeDispatch {
    pub shape: String,
    /// Its dimensions, by the workload's names.
    pub dims: BTreeMap<String, i64>,
    /// By the harness's p50 (bench records, and a tune elite's on the shapes it timed);
    /// `None` when no eligible kernel was timed on the shape.
    pub harness: Option<Ranking>,
    /// By ncu's kernel time, among the eligible kernels the profile stage measured on the
    /// shape; `None` when it measured none.
    pub ncu: Option<Ranking>,
    /// Whether ncu's best is the harness's; `None` unless ncu has a figure for the
    /// harness's best on this shape and for another kernel.
    pub agree: Option<bool>,
    /// The kernels with records of this shape that may not be called for it, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ineligible: Vec<Excluded>,
    /// Profiles of eligible kernels on this shape that `ncu` leaves out, and why (another
    /// GPU, or none recorded; another build).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_counted: Vec<Excluded>,
}

/// The eligible kernels of one shape by one measure, fastest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    pub best: Figure,
    pub runner_up: Option<Figure>,
    /// How much slower the runner-up is, % of the best's figure.
    #[serde(serialize_with = "float::opt_f4")]
    pub margin_pct: Option<f64>,
    /// The best's and the runner-up's spreads overlap: a tie within the spread, whatever
    /// `margin_pct` says. `false` without a runner-up.
    pub overlap: bool,
    /// How many eligible kernels had a figure.
    pub ranked: usize,
}

/// One kernel's figure on one shape by one measure, with its spread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// A key of the table's `kernels`.
    pub name: String,
    /// The harness: the median over seeds of each seed's p50. ncu: the median kernel time
    /// over the profiled launches.
    #[serde(serialize_with = "float::f4")]
    pub us: f64,
    /// The harness: the lowest `p50 − ci95` and the highest `p50 + ci95` over the seeds.
    /// ncu: the shortest and longest profiled launch (the figure itself when not recorded).
    #[serde(serialize_with = "float::f4")]
    pub low_us: f64,
    #[serde(serialize_with = "float::f4")]
    pub high_us: f64,
    /// Seeds (the harness) or launches (ncu) behind the figure; 0 when not recorded.
    pub count: u32,
}

/// A kernel, or one of its records, that a shape's ranking leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub name: String,
    /// The first record that rules it out (`correctness failed on mission/sharp/seed1`).
    pub reason: String,
}

/// What a kernel in the table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateKind {
    /// A variant of pipeline.yaml's `variants:`.
    Variant,
    /// A tune stage's elite configuration.
    Tuned,
}

/// How to build and call one kernel of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelCall {
    pub kind: CandidateKind,
    /// The `kernels:` entry it builds.
    pub kernel: String,
    /// The CUDA source, relative to the project root.
    pub source: String,
    /// A tuned configuration of a proposed source: its diff against `source`
    /// (`artifacts/tune/proposals/<digest>.patch`), to apply before building.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The `extern "C"` entry point.
    pub entry: String,
    /// `-DNAME=value` for each: a variant's from pipeline.yaml, a tuned one's its tune's
    /// base defines overridden by its configuration.
    pub defines: BTreeMap<String, String>,
    /// Extra nvcc flags of the kernel.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Its precision class (which per-class correctness thresholds judged it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// A tuned configuration: the tune stage, its folder's elite rank and its trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<TuneOrigin>,
}

/// Where a tuned configuration comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneOrigin {
    pub stage: String,
    pub rank: u32,
    pub trial: u32,
}
