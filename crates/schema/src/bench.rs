//! The bench stage's records: `artifacts/bench/*.json`, one measurement per (shape, recipe, seed).

use super::{float, GateResult, Measured, RunStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    pub status: RunStatus,
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
    status: RunStatus,
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
        status: RunStatus,
    ) -> BenchResult {
        BenchResult {
            shape: shape.to_string(),
            dims,
            seed,
            inputs: gaussian(),
            warmup,
            iters,
            status,
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
    pub status: RunStatus,
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
