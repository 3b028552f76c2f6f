//! The typed shape of `pipeline.yaml`. Parsing, locations and validation live in the
//! sibling modules; these are the plain data every stage reads.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole `pipeline.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pipeline {
    pub version: u32,
    /// Fallback GPU architecture (`sm_89`) when no GPU is present to ask.
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub workload: Option<Workload>,
    #[serde(default)]
    pub kernels: BTreeMap<String, KernelSpec>,
    #[serde(default)]
    pub variants: BTreeMap<String, VariantSpec>,
    /// The variant every other is compared against.
    #[serde(default)]
    pub control: Option<String>,
    #[serde(default)]
    pub gates: Gates,
    /// Where stage processes run (`local` when absent).
    #[serde(default)]
    pub executor: Option<ExecutorSpec>,
    /// The pinned CUDA toolchain; absent: the first nvcc found (see `crate::toolchain`).
    #[serde(default)]
    pub toolchain: Option<ToolchainSpec>,
    /// Stages in declaration order.
    pub stages: IndexMap<String, StageSpec>,
}

/// `toolchain: {nvcc: 13.0.88}`: the nvcc every compile must use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolchainSpec {
    pub nvcc: crate::toolchain::NvccVersion,
}

/// The built-in workload: inputs, reference and launch geometry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Only `sdpa_fp8` today.
    pub op: String,
    pub shapes: BTreeMap<String, Shape>,
    pub primary: String,
    /// The reference kernel used to judge correctness (compiled by the build stage to
    /// `.repro/cubins/reference.cubin`).
    #[serde(default)]
    pub reference: Option<KernelSpec>,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

#[allow(non_snake_case)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub B: u32,
    pub H: u32,
    pub S: u32,
    pub D: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// CUDA source, relative to the project root.
    pub source: String,
    /// The `extern "C"` entry point.
    pub entry: String,
    /// Extra nvcc flags.
    #[serde(default)]
    pub flags: Vec<String>,
}

/// Compile-time define values: integers or strings, written as `-DNAME=VALUE`.
pub type Defines = BTreeMap<String, serde_yaml::Value>;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub kernel: String,
    #[serde(default)]
    pub defines: Defines,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    #[serde(default)]
    pub ptxas: Option<PtxasGates>,
    #[serde(default)]
    pub correctness: Option<CorrectnessGates>,
    #[serde(default)]
    pub performance: Option<PerformanceGates>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PtxasGates {
    pub max_registers: Option<u32>,
    pub max_smem_bytes: Option<u64>,
    pub max_spill_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessGates {
    #[serde(default = "d_max_abs")]
    pub max_abs_err: f64,
    #[serde(default = "d_mean_abs")]
    pub mean_abs_err: f64,
    #[serde(default = "d_pct_bad")]
    pub max_pct_bad: f64,
}

impl Default for CorrectnessGates {
    fn default() -> Self {
        CorrectnessGates {
            max_abs_err: d_max_abs(),
            mean_abs_err: d_mean_abs(),
            max_pct_bad: d_pct_bad(),
        }
    }
}

fn d_max_abs() -> f64 {
    0.06
}
fn d_mean_abs() -> f64 {
    0.02
}
fn d_pct_bad() -> f64 {
    1.0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceGates {
    /// Best variant's speedup over the control on the primary shape.
    pub min_speedup_vs_control: Option<f64>,
    /// Best variant's speedup over each named baseline on the primary shape.
    #[serde(default)]
    pub min_speedup_vs_baseline: BTreeMap<String, f64>,
}

/// Where processes run. `local` (default) or `slurm`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSpec {
    pub kind: String,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub gres: Option<String>,
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub srun_args: Vec<String>,
    /// Maximum concurrent job steps (tune trials).
    #[serde(default)]
    pub max_jobs: Option<u32>,
}

/// A `run:` command: an argv list, or one string for `sh -c` (only with `shell: true`).
/// Plain YAML scalars in the list (`[sleep, 1]`, `[true]`) are taken as the words written.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Command {
    Argv(Vec<String>),
    Line(String),
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        fn word(v: &Value) -> Option<String> {
            match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            }
        }
        let bad = || {
            <D::Error as serde::de::Error>::custom(
                "`run` must be a list of words (the program and its arguments), or one string with `shell: true`",
            )
        };
        match Value::deserialize(d)? {
            Value::Sequence(items) => items
                .iter()
                .map(word)
                .collect::<Option<Vec<_>>>()
                .map(Command::Argv)
                .ok_or_else(bad),
            other => word(&other).map(Command::Line).ok_or_else(bad),
        }
    }
}

/// One stage. The common keys are here; a kind's own options stay in `options` and are
/// checked by that kind (see `stages`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageSpec {
    /// The stage kind: `cmd`, `build`, `bench`, `tune`, `profile`, `summarize`.
    pub uses: String,
    #[serde(default)]
    pub needs: Vec<String>,
    /// Input files whose contents are part of the fingerprint.
    #[serde(default)]
    pub deps: Vec<String>,
    /// Output files or folders, relative to the project root.
    #[serde(default)]
    pub outs: Vec<String>,
    #[serde(default)]
    pub params: BTreeMap<String, serde_yaml::Value>,
    /// Environment variables set for the stage's processes (and fingerprinted).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Seconds, or a duration like `90s`, `10m`, `2h`.
    #[serde(default)]
    pub timeout: Option<serde_yaml::Value>,
    #[serde(default)]
    pub run: Option<Command>,
    #[serde(default)]
    pub shell: bool,
    /// Per-stage executor override (e.g. build on CPU nodes, bench on GPU nodes).
    #[serde(default)]
    pub executor: Option<ExecutorSpec>,
    /// The kind's own keys (`warmup`, `budget`, `targets`, ...).
    #[serde(flatten)]
    pub options: serde_yaml::Mapping,
}

/// The keys every stage may have, whatever its kind.
pub const STAGE_KEYS: &[&str] = &[
    "uses", "needs", "deps", "outs", "params", "env", "timeout", "run", "shell", "executor",
];

impl StageSpec {
    /// `timeout` as a duration: seconds (`90`, `1.5`), or `90s`, `10m`, `2h`. `Err` holds
    /// the text that could not be read and why.
    pub fn timeout_duration(&self) -> Result<Option<std::time::Duration>, (String, String)> {
        let Some(value) = &self.timeout else {
            return Ok(None);
        };
        let text = match value {
            serde_yaml::Value::Number(n) => n.to_string(),
            serde_yaml::Value::String(s) => s.clone(),
            other => {
                return Err((
                    format!("{other:?}"),
                    "it is not a number or a string".into(),
                ))
            }
        };
        check_duration(&text).map(Some).map_err(|why| (text, why))
    }
}

/// The longest duration repro accepts (30 days): far above any stage, far below what the
/// clock arithmetic can hold.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// `90`, `90s`, `10m`, `2h`, `1.5h` → a duration. Zero, negative and longer than
/// [`MAX_DURATION`] are refused.
pub fn parse_duration(text: &str) -> Option<std::time::Duration> {
    check_duration(text).ok()
}

/// [`parse_duration`], with why a text is refused.
pub fn check_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit.trim() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("`{other}` is not a unit (ms, s, m, h)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{}` is not a number", number.trim()))?;
    let secs = value * scale;
    if !(secs.is_finite() && secs > 0.0) {
        return Err("it must be more than zero".into());
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "it is longer than the maximum of {} days",
            MAX_DURATION.as_secs() / 86400
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reads_durations() {
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration("0"), None);
        assert_eq!(parse_duration("-3s"), None);
        assert_eq!(parse_duration("99999999999999999999"), None);
        assert_eq!(parse_duration("9223372036854775000"), None);
        assert_eq!(parse_duration("1e400"), None);
        assert_eq!(parse_duration("30d"), None);
        assert!(check_duration("720h").is_ok());
        assert!(check_duration("721h")
            .unwrap_err()
            .contains("maximum of 30 days"));
    }
}
