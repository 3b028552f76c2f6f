//! The tune stage's records: the rows of `tune_log.csv` and the elite in `topk.json`.

use super::{float, BenchResult, TrialStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One row of `artifacts/tune/tune_log.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneTrial {
    pub trial: u32,
    pub generation: u32,
    pub timestamp: String,
    /// The configuration as compact JSON with sorted keys.
    pub config: String,
    /// `ok`, `compile_error`, `ptxas_gate`, `incorrect`, `failed`, `proposal_error`.
    pub status: TrialStatus,
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
    pub status: TrialStatus,
    #[serde(serialize_with = "float::opt_f4")]
    pub p50_us: Option<f64>,
}
