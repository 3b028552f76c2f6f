//! The artifact records stages hand each other (docs/ARCHITECTURE.md, "The artifact contract"). Field names are
//! the contract: the report templates, `repro diff` and users' scripts read them.
//!
//! Floats are rounded to a fixed number of decimals when written (see [`float`]) so
//! artifacts are stable text that diffs well; maps are `BTreeMap` so keys are sorted.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use verdict::{Limit, Verdict};

pub mod verdict;

/// Fixed-precision float serializers: `f4` for times and percentages, `f6` for errors,
/// `figure` for what a gate judges (NaN and the infinities kept).
pub mod float {
    use serde::Serializer;

    fn round(x: f64, decimals: i32) -> f64 {
        if !x.is_finite() {
            return x;
        }
        let p = 10f64.powi(decimals);
        let r = (x * p).round() / p;
        if r == 0.0 {
            0.0 // no "-0.0"
        } else {
            r
        }
    }

    pub fn f4<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round(*x, 4))
    }
    pub fn f6<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(round(*x, 6))
    }
    pub fn opt_f4<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match x {
            Some(v) => s.serialize_some(&round(*v, 4)),
            None => s.serialize_none(),
        }
    }

    mod figure;
    pub use figure::{figure, opt_figure, read_figure, read_opt_figure};
}

/// One gate check: a measured figure against a threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    /// e.g. `ptxas.max_registers`, `correctness.max_abs_err`, `performance.min_speedup_vs_control`.
    pub gate: String,
    /// What the gate applies to, e.g. `rmsnorm_fwd` or `mission/seed0`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub measured: f64,
    #[serde(serialize_with = "float::f6")]
    pub threshold: f64,
    /// `<=` or `>=`: how `measured` must compare to `threshold` (a profile gate's relation
    /// to another variant: `>`, `<`, or `≈` within the tolerance its `detail` states).
    pub op: String,
    pub pass: bool,
    /// What failed, when the figures alone do not say (the ABI gate's `file:line:col`
    /// errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl GateResult {
    pub fn at_most(gate: &str, subject: &str, measured: f64, threshold: f64) -> Self {
        GateResult::judged(gate, subject, measured, Limit::at_most(threshold))
    }
    pub fn at_least(gate: &str, subject: &str, measured: f64, threshold: f64) -> Self {
        GateResult::judged(gate, subject, measured, Limit::at_least(threshold))
    }

    /// `measured` judged against `limit` by [`verdict`]; a figure that is not finite says
    /// so in `detail`.
    fn judged(gate: &str, subject: &str, measured: f64, limit: Limit) -> Self {
        let verdict = limit.judge(measured);
        let detail = match verdict {
            Verdict::NotFinite(_) => verdict.failure(gate),
            _ => None,
        };
        GateResult {
            gate: gate.into(),
            subject: subject.into(),
            measured,
            threshold: limit.value,
            op: limit.bound.op().into(),
            pass: verdict.pass(),
            detail,
        }
    }
}

// ---------------------------------------------------------------- build

/// Resource usage of one entry function, from ptxas `-v`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EntryResources {
    pub name: String,
    pub registers: Option<u32>,
    pub smem_bytes: Option<u64>,
    /// The entry's own stack frame (`N bytes stack frame`).
    pub stack_bytes: Option<u64>,
    /// Stack including the device functions it calls (`N bytes cumulative stack size`;
    /// CUDA 12.x and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cumulative_stack_bytes: Option<u64>,
    pub spill_store_bytes: Option<u64>,
    pub spill_load_bytes: Option<u64>,
    pub barriers: Option<u32>,
    pub cmem_bytes: Option<u64>,
}

/// `artifacts/build/<variant>.json`: one variant compiled for every architecture the
/// pipeline declares. It depends only on the sources, the pinned nvcc and the declared
/// architectures — nothing of the machine that compiled it — so any machine writes the
/// same bytes. What only a GPU can say (the driver's figures) is in the bench records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "BuildRecordOnDisk")]
pub struct BuildRecord {
    pub variant: String,
    pub kernel: String,
    pub source: String,
    pub entry: String,
    pub defines: BTreeMap<String, String>,
    pub nvcc_version: String,
    /// `ok` when every architecture compiled, else `compile_error`.
    pub status: String,
    /// Architecture (`sm_89`, `sm_90a`, …) → its compile, sorted.
    pub archs: BTreeMap<String, ArchBuild>,
}

/// One architecture's compile of a variant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchBuild {
    /// The full compile command, argv form.
    pub command: Vec<String>,
    /// `ok` or `compile_error`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Content hash of the cubin (the cubin itself is `.repro/cubins/<variant>.<arch>.cubin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin_sha256: Option<String>,
    pub entries: Vec<EntryResources>,
    /// Dynamic shared memory per block the kernel asks for at launch, from the cubin's
    /// `repro_dynamic_smem_bytes` global (ptxas's `smem` is static only). The
    /// `ptxas.max_smem_bytes` gate counts static + dynamic for the declared entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_smem_bytes: Option<u64>,
    pub gates: Vec<GateResult>,
}

impl ArchBuild {
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

impl BuildRecord {
    /// The declared entry's resources on `arch`.
    pub fn entry_on(&self, arch: &str) -> Option<&EntryResources> {
        self.archs
            .get(arch)?
            .entries
            .iter()
            .find(|e| e.name == self.entry)
    }

    /// Every architecture's gates, with the architecture.
    pub fn gates(&self) -> impl Iterator<Item = (&str, &GateResult)> {
        self.archs
            .iter()
            .flat_map(|(a, b)| b.gates.iter().map(move |g| (a.as_str(), g)))
    }
}

/// A build record as read: the per-architecture layout, or the single-architecture one
/// written before it (`arch`, `command`, … at the top), read as one architecture, so
/// `repro diff` still reads older commits' results.
#[derive(Deserialize)]
struct BuildRecordOnDisk {
    variant: String,
    kernel: String,
    source: String,
    entry: String,
    defines: BTreeMap<String, String>,
    nvcc_version: String,
    status: String,
    #[serde(default)]
    archs: Option<BTreeMap<String, ArchBuild>>,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    cubin_sha256: Option<String>,
    #[serde(default)]
    entries: Vec<EntryResources>,
    #[serde(default)]
    dynamic_smem_bytes: Option<u64>,
    #[serde(default)]
    gates: Vec<GateResult>,
}

impl From<BuildRecordOnDisk> for BuildRecord {
    fn from(d: BuildRecordOnDisk) -> Self {
        let archs = d.archs.unwrap_or_else(|| {
            let single = ArchBuild {
                command: d.command,
                status: d.status.clone(),
                error: d.error,
                cubin_sha256: d.cubin_sha256,
                entries: d.entries,
                dynamic_smem_bytes: d.dynamic_smem_bytes,
                gates: d.gates,
            };
            d.arch.into_iter().map(|a| (a, single.clone())).collect()
        });
        BuildRecord {
            variant: d.variant,
            kernel: d.kernel,
            source: d.source,
            entry: d.entry,
            defines: d.defines,
            nvcc_version: d.nvcc_version,
            status: d.status,
            archs,
        }
    }
}

// ---------------------------------------------------------------- bench

/// How the timing samples were taken: say it in every record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingMode {
    /// `isolated` (one launch per sample, behind a hold), `cuda_graph` (a graph of
    /// back-to-back launches per sample) or `batched_events` (the same, uncaptured).
    pub method: String,
    pub launches_per_sample: u32,
    /// `flush` (L2 flushed before each sample) or `warm`.
    pub l2: String,
    /// `isolated`: the median reading of an empty timed region, subtracted from every
    /// sample.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "float::opt_f4"
    )]
    pub timer_overhead_us: Option<f64>,
}

/// One (variant or baseline, shape, recipe, seed) measurement: what `repro exec` prints as
/// one JSON line and what `artifacts/bench/*.json` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "BenchResultOnDisk")]
pub struct BenchResult {
    pub shape: String,
    /// The shape's dimensions, by the workload's names (`{"rows": 4096, "hidden": 4096}`).
    pub dims: BTreeMap<String, i64>,
    pub seed: u64,
    /// The input recipe (`gaussian`, `tiny`, ...; records written before recipes existed
    /// are `gaussian`).
    pub inputs: String,
    pub warmup: u32,
    pub iters: u32,
    /// `ok`, `failed` (fault, timeout, launch error) or `skipped`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub device_index: Option<u32>,
    pub device_name: Option<String>,
    /// The host that ran the measurement (the executor's node; absent in records written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub timing_mode: Option<TimingMode>,
    #[serde(serialize_with = "float::opt_f4")]
    pub p50_us: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub p90_us: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub p99_us: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub mean_us: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub std_us: Option<f64>,
    #[serde(serialize_with = "float::opt_f4")]
    pub min_us: Option<f64>,
    /// Half-width of the 95% confidence interval of the median, µs.
    #[serde(serialize_with = "float::opt_f4")]
    pub ci95_us: Option<f64>,
    /// Coefficient of variation (std / mean).
    #[serde(serialize_with = "float::opt_f4")]
    pub cv: Option<f64>,
    pub samples: Option<u32>,
    /// The errors of the output (of a workload with several, the worst of each over them;
    /// `outputs` has each one's).
    #[serde(serialize_with = "float::opt_figure")]
    pub max_abs_err: Option<f64>,
    #[serde(serialize_with = "float::opt_figure")]
    pub mean_abs_err: Option<f64>,
    #[serde(serialize_with = "float::opt_figure")]
    pub pct_bad: Option<f64>,
    #[serde(serialize_with = "float::opt_figure")]
    pub rel_l2_err: Option<f64>,
    /// The largest |err| over the standard deviation of the reference where the element
    /// lies (`workload::compare`); absent in records written before it was measured.
    #[serde(serialize_with = "float::opt_figure")]
    pub max_err_over_ref_std: Option<f64>,
    pub nan_count: Option<u64>,
    pub inf_count: Option<u64>,
    pub correctness_pass: Option<bool>,
    /// Per output, for a workload with more than one.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, OutputAccuracy>,
    /// `speedup_vs_<baseline>` = baseline p50 / this p50; `None` (n/a) when the baseline is missing.
    #[serde(flatten)]
    pub speedups: BTreeMap<String, Option<f64>>,
}

/// The errors of one output of a run (`BenchResult::outputs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputAccuracy {
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub max_abs_err: f64,
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub mean_abs_err: f64,
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub pct_bad: f64,
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub rel_l2_err: f64,
    #[serde(
        serialize_with = "float::figure",
        deserialize_with = "float::read_figure"
    )]
    pub max_err_over_ref_std: f64,
    pub nan_count: u64,
    pub inf_count: u64,
    pub correctness_pass: bool,
}

/// A bench result as read: with `dims`, or with the attention workload's `B H S D` fields
/// written before workloads were declared (read into `dims`), so `repro diff` still reads
/// older commits' results.
#[derive(Deserialize)]
#[allow(non_snake_case)]
struct BenchResultOnDisk {
    shape: String,
    #[serde(default)]
    dims: BTreeMap<String, i64>,
    #[serde(default)]
    B: Option<i64>,
    #[serde(default)]
    H: Option<i64>,
    #[serde(default)]
    S: Option<i64>,
    #[serde(default)]
    D: Option<i64>,
    seed: u64,
    #[serde(default = "gaussian")]
    inputs: String,
    warmup: u32,
    iters: u32,
    status: String,
    #[serde(default)]
    error: Option<String>,
    device_index: Option<u32>,
    device_name: Option<String>,
    #[serde(default)]
    node: Option<String>,
    timing_mode: Option<TimingMode>,
    p50_us: Option<f64>,
    p90_us: Option<f64>,
    p99_us: Option<f64>,
    mean_us: Option<f64>,
    std_us: Option<f64>,
    min_us: Option<f64>,
    ci95_us: Option<f64>,
    cv: Option<f64>,
    samples: Option<u32>,
    #[serde(default, deserialize_with = "float::read_opt_figure")]
    max_abs_err: Option<f64>,
    #[serde(default, deserialize_with = "float::read_opt_figure")]
    mean_abs_err: Option<f64>,
    #[serde(default, deserialize_with = "float::read_opt_figure")]
    pct_bad: Option<f64>,
    #[serde(default, deserialize_with = "float::read_opt_figure")]
    rel_l2_err: Option<f64>,
    #[serde(default, deserialize_with = "float::read_opt_figure")]
    max_err_over_ref_std: Option<f64>,
    nan_count: Option<u64>,
    inf_count: Option<u64>,
    correctness_pass: Option<bool>,
    #[serde(default)]
    outputs: BTreeMap<String, OutputAccuracy>,
    #[serde(flatten)]
    speedups: BTreeMap<String, Option<f64>>,
}

impl From<BenchResultOnDisk> for BenchResult {
    fn from(d: BenchResultOnDisk) -> Self {
        let mut dims = d.dims;
        for (name, v) in [("B", d.B), ("H", d.H), ("S", d.S), ("D", d.D)] {
            if let Some(v) = v {
                dims.insert(name.to_string(), v);
            }
        }
        BenchResult {
            shape: d.shape,
            dims,
            seed: d.seed,
            inputs: d.inputs,
            warmup: d.warmup,
            iters: d.iters,
            status: d.status,
            error: d.error,
            device_index: d.device_index,
            device_name: d.device_name,
            node: d.node,
            timing_mode: d.timing_mode,
            p50_us: d.p50_us,
            p90_us: d.p90_us,
            p99_us: d.p99_us,
            mean_us: d.mean_us,
            std_us: d.std_us,
            min_us: d.min_us,
            ci95_us: d.ci95_us,
            cv: d.cv,
            samples: d.samples,
            max_abs_err: d.max_abs_err,
            mean_abs_err: d.mean_abs_err,
            pct_bad: d.pct_bad,
            rel_l2_err: d.rel_l2_err,
            max_err_over_ref_std: d.max_err_over_ref_std,
            nan_count: d.nan_count,
            inf_count: d.inf_count,
            correctness_pass: d.correctness_pass,
            outputs: d.outputs,
            speedups: d.speedups,
        }
    }
}

fn gaussian() -> String {
    "gaussian".into()
}

impl BenchResult {
    /// A record with the identity fields filled and every measurement empty.
    pub fn blank(
        shape: &str,
        dims: BTreeMap<String, i64>,
        seed: u64,
        (warmup, iters): (u32, u32),
        status: &str,
    ) -> BenchResult {
        BenchResult {
            shape: shape.to_string(),
            dims,
            seed,
            inputs: gaussian(),
            warmup,
            iters,
            status: status.to_string(),
            error: None,
            device_index: None,
            device_name: None,
            node: None,
            timing_mode: None,
            p50_us: None,
            p90_us: None,
            p99_us: None,
            mean_us: None,
            std_us: None,
            min_us: None,
            ci95_us: None,
            cv: None,
            samples: None,
            max_abs_err: None,
            mean_abs_err: None,
            pct_bad: None,
            rel_l2_err: None,
            max_err_over_ref_std: None,
            nan_count: None,
            inf_count: None,
            correctness_pass: None,
            outputs: BTreeMap::new(),
            speedups: BTreeMap::new(),
        }
    }

    /// What one run is called in gates and reports: `mission/seed0`, or `mission/sink/seed0`
    /// for a recipe other than gaussian.
    pub fn run_subject(&self) -> String {
        if self.inputs == gaussian() {
            format!("{}/seed{}", self.shape, self.seed)
        } else {
            format!("{}/{}/seed{}", self.shape, self.inputs, self.seed)
        }
    }
}

/// Where a variant's bench records (or a target's profile) come from: the run that
/// measured them and what they depend on. A later run copies them instead of measuring
/// again while `key` is unchanged (docs/guide/results.md, "Reused results").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// When the run that measured them started (RFC 3339, UTC).
    pub run: String,
    /// The commit checked out for that run (`<sha>`, `<sha>+dirty` with uncommitted
    /// changes), when the project is in git.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// What the results depend on: the digest of the cubin loaded (`cubin_sha256`), of the
    /// workload (`workload_sha256`) and of the harness options (`harness_sha256`), the GPU
    /// model (`gpu`) and its driver (`driver`); for a profile also `ncu`.
    pub key: BTreeMap<String, String>,
    /// Copied from that earlier run's record by this one, not measured again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// `artifacts/bench/<variant>.json` and `artifacts/bench/baselines/<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchFile {
    pub name: String,
    /// `variant` or `baseline`.
    pub kind: String,
    /// The workload it ran (absent in files written before workloads were declared, and
    /// in a baseline that does not say: then it is compared with the pipeline's only, or
    /// built-in, workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// `ok`, `failed` or `skipped`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default)]
    pub defines: BTreeMap<String, String>,
    /// The nvcc that built the measured cubin (its build record's `nvcc_version`), so a
    /// result built by another toolchain says so. Absent for baselines and unmeasured files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvcc_version: Option<String>,
    /// The precision class whose correctness thresholds judged it (absent: the
    /// workload's thresholds are one number each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// The architecture of the cubin that was measured (`sm_90a`: the declared one the
    /// GPU runs). Absent for baselines and in records written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// What the CUDA driver reports for the loaded entry, checked against ptxas's figures
    /// in the build record of `arch`. Absent for baselines and unmeasured files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverCheck>,
    pub results: Vec<BenchResult>,
    pub gates: Vec<GateResult>,
    /// The run that measured `results` and their reuse key (absent for baselines, skipped
    /// and unbuilt variants, and files written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// The driver's view of a measured variant's entry (`cuFuncGetAttribute` on the loaded
/// cubin) beside ptxas's, as the bench stage found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverCheck {
    /// `ok`, `mismatch: …` (the figures that differ), or `skipped: <why>`.
    pub check: String,
    /// Registers per thread as the driver reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    /// Static shared memory as the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_smem_bytes: Option<u64>,
}

// ---------------------------------------------------------------- tune

/// One row of `artifacts/tune/tune_log.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneTrial {
    pub trial: u32,
    pub generation: u32,
    pub timestamp: String,
    /// The configuration as compact JSON with sorted keys.
    pub config: String,
    /// `ok`, `compile_error`, `ptxas_gate`, `incorrect`, `failed`, `invalid`.
    pub status: String,
    pub registers: Option<u32>,
    pub spill_bytes: Option<u64>,
    pub max_abs_err: Option<f64>,
    /// The worst `max_err_over_ref_std` over the trial's correctness runs.
    #[serde(default)]
    pub max_err_over_ref_std: Option<f64>,
    pub p50_us: Option<f64>,
    pub correctness_pass: Option<bool>,
    pub note: String,
    /// Trial numbers of its parents joined by `+` (empty for a random sample).
    #[serde(default)]
    pub parents: String,
    /// First 16 hex digits of the SHA-256 of the proposed source it compiled (empty: the
    /// kernel's own).
    #[serde(default)]
    pub source: String,
    /// First 16 hex digits of the SHA-256 of the patch a proposer sent to make it (empty
    /// when none did).
    #[serde(default)]
    pub patch: String,
}

/// One member of the elite in `artifacts/tune/topk.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EliteEntry {
    pub rank: u32,
    pub trial: u32,
    pub config: BTreeMap<String, i64>,
    /// Trial numbers of the parents (empty for the initial population).
    pub parents: Vec<u32>,
    #[serde(serialize_with = "float::f4")]
    pub p50_us: f64,
    /// The nvcc that built this configuration's cubin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvcc_version: Option<String>,
    /// First 16 hex digits of the SHA-256 of its proposed source; absent: the kernel's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `artifacts/tune/proposals/<source>.patch`: its source's diff against the kernel's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Its ancestors through first parents, oldest first, itself last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lineage: Vec<LineageStep>,
    pub bench: Vec<BenchResult>,
}

/// One trial of an elite member's lineage in `artifacts/tune/topk.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineageStep {
    pub trial: u32,
    pub generation: u32,
    pub parents: Vec<u32>,
    pub config: BTreeMap<String, i64>,
    /// As `EliteEntry::source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// First 16 hex digits of the SHA-256 of the patch a proposer sent to make it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The proposer's note on the change (empty for define-space trials).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    pub status: String,
    #[serde(serialize_with = "float::opt_f4")]
    pub p50_us: Option<f64>,
}

// ---------------------------------------------------------------- ncu

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
    pub status: String,
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

/// Write a record as pretty JSON with a trailing newline (the one JSON style of artifacts).
pub fn to_json_pretty<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("artifact records always serialize");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of the attention workload as written before workloads were declared: its
    /// `B H S D` fields read into `dims`, and it is written back in the current form.
    #[test]
    fn a_bench_result_with_b_h_s_d_reads_into_dims() {
        let old = r#"{"shape":"mission","B":2,"H":8,"S":512,"D":64,"seed":1,"warmup":20,
            "iters":100,"status":"ok","device_index":0,"device_name":"NVIDIA H100 80GB HBM3",
            "timing_mode":null,"p50_us":24.0,"p90_us":null,"p99_us":null,"mean_us":null,
            "std_us":null,"min_us":null,"ci95_us":null,"cv":null,"samples":100,
            "max_abs_err":0.0002,"mean_abs_err":null,"pct_bad":null,"rel_l2_err":null,
            "nan_count":0,"inf_count":0,"correctness_pass":true,"speedup_vs_torch":1.5}"#;
        let r: BenchResult = serde_json::from_str(old).unwrap();
        let want: BTreeMap<String, i64> = [("B", 2), ("H", 8), ("S", 512), ("D", 64)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(r.dims, want);
        // Absent before recipes and the spread metric existed.
        assert_eq!(
            (r.inputs.as_str(), r.max_err_over_ref_std),
            ("gaussian", None)
        );
        assert_eq!(r.speedups["speedup_vs_torch"], Some(1.5));
        assert!(!r
            .speedups
            .keys()
            .any(|k| ["B", "H", "S", "D"].contains(&k.as_str())));

        let written = serde_json::to_value(&r).unwrap();
        assert_eq!(written["dims"]["S"], 512);
        assert!(written.get("B").is_none(), "{written}");
        let again: BenchResult = serde_json::from_value(written).unwrap();
        assert_eq!(again, r);
    }
}
