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
    /// The GPU architectures the build compiles every variant for (`arch: [sm_89,
    /// sm_90a]`; one name alone is a list of one). A pipeline with a build stage must
    /// declare at least one.
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub arch: Vec<String>,
    #[serde(default)]
    pub workload: Option<Workload>,
    /// Workloads declared in full: arguments, launch, reference, gates (`crate::workload`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub workloads: IndexMap<String, crate::workload::Declaration>,
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

/// `arch: sm_89` or `arch: [sm_89, sm_90a]`, as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a GPU architecture like sm_89, or a list of them like [sm_89, sm_90a]")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(a) = seq.next_element::<String>()? {
                out.push(a);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Visitor)
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
    /// Input recipes per shape name (`docs/guide/correctness.md`); a shape not listed gets
    /// `[gaussian]`. The first recipe of a shape is the one that is timed.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<Recipe>>,
}

impl Workload {
    /// The input recipes of `shape`, in declaration order (`[gaussian]` when not listed).
    pub fn recipes(&self, shape: &str) -> Vec<Recipe> {
        match self.inputs.get(shape) {
            Some(list) if !list.is_empty() => list.clone(),
            _ => vec![Recipe::Gaussian],
        }
    }
}

/// How one (shape, seed)'s inputs are drawn (`crate::gpu::recipes` generates them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    /// Q, K, V standard normal.
    Gaussian,
    /// A few large channels in K and V.
    Outliers,
    /// Large, widely spread logits, all far below zero.
    Sharp,
    /// Sink keys (the first and the last) that take almost all the attention of every row.
    Sink,
    /// E4M3 codes at both ends of the range (near ±448 and subnormal), per-head scales
    /// spread over orders of magnitude.
    E4m3Edge,
}

impl Recipe {
    pub const ALL: [Recipe; 5] = [
        Recipe::Gaussian,
        Recipe::Outliers,
        Recipe::Sharp,
        Recipe::Sink,
        Recipe::E4m3Edge,
    ];

    /// The name pipeline.yaml and the records use.
    pub fn name(self) -> &'static str {
        match self {
            Recipe::Gaussian => "gaussian",
            Recipe::Outliers => "outliers",
            Recipe::Sharp => "sharp",
            Recipe::Sink => "sink",
            Recipe::E4m3Edge => "e4m3-edge",
        }
    }

    pub fn parse(name: &str) -> Option<Recipe> {
        Recipe::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl std::fmt::Display for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The arithmetic a kernel's P·V uses, which sets how far from the reference it may land
/// (`docs/guide/correctness.md` derives the thresholds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// P rounded to fp16 (11-bit significand), fp32 accumulation.
    #[default]
    Fp16Pv,
    /// P quantized to FP8 E4M3 (4-bit significand), fp32 accumulation.
    Fp8Pv,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp16Pv => "fp16-pv",
            Precision::Fp8Pv => "fp8-pv",
        }
    }

    pub fn parse(name: &str) -> Option<Precision> {
        [Precision::Fp16Pv, Precision::Fp8Pv]
            .into_iter()
            .find(|p| p.name() == name)
    }
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
    /// The P·V arithmetic of every variant of this kernel (default `fp16-pv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

/// Compile-time define values: integers or strings, written as `-DNAME=VALUE`.
pub type Defines = BTreeMap<String, serde_yaml::Value>;

/// A define's YAML value as it goes after `-DNAME=`: numbers and strings as written,
/// booleans as 1/0, null as a bare `-DNAME`.
pub fn define_value(value: &serde_yaml::Value) -> Result<String, String> {
    use serde_yaml::Value;
    match value {
        Value::Number(n) => Ok(n.to_string()),
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(if *b { "1" } else { "0" }.into()),
        Value::Null => Ok(String::new()),
        _ => Err("a define's value must be a number, a string, a boolean or empty".into()),
    }
}

/// Defines as the pipeline writes them (`true` stays `true`), for records people read.
pub fn defines_as_written(d: &Defines) -> BTreeMap<String, String> {
    d.iter()
        .map(|(k, v)| {
            let s = match v {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            (k.clone(), s)
        })
        .collect()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub kernel: String,
    #[serde(default)]
    pub defines: Defines,
    /// Overrides the kernel's `precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

impl Pipeline {
    /// The precision class of `variant`: its own, else its kernel's, else `fp16-pv`.
    pub fn precision_of(&self, variant: &str) -> Precision {
        let Some(v) = self.variants.get(variant) else {
            return Precision::default();
        };
        v.precision
            .or_else(|| self.kernels.get(&v.kernel).and_then(|k| k.precision))
            .unwrap_or_default()
    }
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
    /// Per precision class: the largest `max_err_over_ref_std` (max |err| of a head over the
    /// standard deviation of that head's reference, worst head).
    #[serde(default)]
    pub max_err_over_ref_std: PerPrecision,
    /// Per precision class: the largest `rel_l2_err` (‖out − ref‖₂ / ‖ref‖₂).
    #[serde(default = "d_rel_l2")]
    pub max_rel_l2_err: PerPrecision,
}

impl Default for CorrectnessGates {
    fn default() -> Self {
        CorrectnessGates {
            max_abs_err: d_max_abs(),
            mean_abs_err: d_mean_abs(),
            max_pct_bad: d_pct_bad(),
            max_err_over_ref_std: PerPrecision::default(),
            max_rel_l2_err: d_rel_l2(),
        }
    }
}

/// One threshold per precision class (both must be given when the key is written). The
/// defaults come from the error model and the measurements in `docs/guide/correctness.md`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerPrecision {
    #[serde(rename = "fp16-pv")]
    pub fp16_pv: f64,
    #[serde(rename = "fp8-pv")]
    pub fp8_pv: f64,
}

impl PerPrecision {
    pub fn get(&self, p: Precision) -> f64 {
        match p {
            Precision::Fp16Pv => self.fp16_pv,
            Precision::Fp8Pv => self.fp8_pv,
        }
    }
}

/// `max_err_over_ref_std` defaults.
impl Default for PerPrecision {
    fn default() -> Self {
        PerPrecision {
            fp16_pv: 0.02,
            fp8_pv: 1.0,
        }
    }
}

fn d_rel_l2() -> PerPrecision {
    PerPrecision {
        fp16_pv: 0.002,
        fp8_pv: 0.1,
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
