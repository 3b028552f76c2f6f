//! The artifact records stages hand each other (docs/ARCHITECTURE.md, "The artifact
//! contract"), and nothing else. Field names are the contract: the report templates,
//! `repro diff` and users' scripts read them. It depends on no other repro crate, so the
//! contract is versioned apart from the code that writes it.
//!
//! Floats are rounded to a fixed number of decimals when written (see [`float`]) so
//! artifacts are stable text that diffs well; maps are `BTreeMap` so keys are sorted.

mod bench;
mod build;
mod dispatch;
mod ncu;
mod tune;

pub use bench::{BenchFile, BenchResult, DriverCheck, OutputAccuracy, TimingMode};
pub use build::{ArchBuild, BuildRecord, EntryResources};
pub use dispatch::{
    CandidateKind, DispatchFile, DispatchTable, Excluded, Figure, KernelCall, LaunchRule, Ranking,
    ShapeDispatch, TuneOrigin,
};
pub use ncu::{MetricSet, NcuKernel, NcuSummary, NcuTarget, StallReason};
pub use tune::{EliteEntry, LineageStep, TuneTrial};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod status;
pub use status::{BuildStatus, RunStatus, TrialStatus};
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

/// Write a record as pretty JSON with a trailing newline (the one JSON style of artifacts).
pub fn to_json_pretty<T: Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("artifact records always serialize");
    s.push('\n');
    s
}

/// Where baseline records are read from (the shipped `baselines` stage writes them).
pub const BASELINE_DIR: &str = "artifacts/bench/baselines";

/// `when measured at commit`, for a log or report line.
pub fn describe_run(m: &Measured) -> String {
    match &m.commit {
        Some(c) => format!("{} at {c}", m.run),
        None => m.run.clone(),
    }
}

/// Parse `tune_log.csv` (header row naming the [`TuneTrial`] fields).
pub fn parse_tune_log(text: &str, name: &str) -> anyhow::Result<Vec<TuneTrial>> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| {
            anyhow::Context::with_context(row, || format!("{name}: row {} is malformed", i + 2))
        })
        .collect()
}
