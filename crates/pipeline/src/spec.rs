//! The typed shape of `pipeline.yaml`. Parsing, locations and validation live in the
//! sibling modules; these are the plain data every stage reads.

use crate::builtin_kind::BuiltinKind;
use indexmap::IndexMap;
pub use repro_executor::ExecutorSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A whole `pipeline.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The built-in workload (`workload: {op: ...}`, `crate::workload::builtin`).
    #[serde(default)]
    pub workload: Option<crate::workload::builtin::Workload>,
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
    /// Stages in declaration order; each loaded stage shares its spec
    /// ([`crate::load::Stage::spec`]).
    pub stages: IndexMap<String, Arc<StageSpec>>,
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelSpec {
    /// CUDA source, relative to the project root.
    pub source: String,
    /// The `extern "C"` entry point.
    pub entry: String,
    /// Extra nvcc flags.
    #[serde(default)]
    pub flags: Vec<String>,
    /// The precision class of every variant of this kernel: which of a workload's
    /// per-class thresholds judge it (default: the workload's `precision`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// This kernel's own PTXAS limits, field by field over `gates.ptxas`
    /// ([`Pipeline::ptxas_gates_for`]): a warp-specialized kernel that is meant to take 168
    /// registers and 100 KB of shared memory says so here, and the others keep the
    /// pipeline's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptxas: Option<PtxasGates>,
    /// The value the source gives each define a variant may leave unset (its `#ifndef`
    /// default), for the `tails` expressions of a variant that does not set it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub defaults: BTreeMap<String, i64>,
    /// The code paths only some shapes reach (a partial tile, a scalar tail), by name
    /// (`crate::workload::tails`): `repro build --list` says which declared shapes reach
    /// each, per variant, and warns of one that none reaches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tails: BTreeMap<String, TailSpec>,
}

/// When a shape reaches a tail path: an expression over the workload's dims and the
/// variant's defines (non-zero: reached), alone or with `when`, the condition on the
/// defines under which the variant has the path at all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TailSpec {
    Reached(crate::workload::spec::ExprText),
    Guarded(GuardedTail),
}

/// `{when: EXPR, reached: EXPR}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardedTail {
    pub when: crate::workload::spec::ExprText,
    pub reached: crate::workload::spec::ExprText,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub kernel: String,
    #[serde(default)]
    pub defines: Defines,
    /// Overrides the kernel's `precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
}

impl Pipeline {
    /// The precision class `variant` names: its own, else its kernel's (`None`: its
    /// workload's default, `crate::workload::Workloads::class_of`).
    pub fn precision_of(&self, variant: &str) -> Option<&str> {
        let v = self.variants.get(variant)?;
        v.precision
            .as_deref()
            .or_else(|| self.kernels.get(&v.kernel)?.precision.as_deref())
    }

    /// The PTXAS gates `kernel`'s builds must pass: `gates.ptxas` with each field the
    /// kernel's own `ptxas:` names in its place (a kernel may also set a gate the pipeline
    /// lacks). A name not under `kernels:` (a workload's reference) gets `gates.ptxas`.
    /// `None`: no PTXAS gate at all.
    pub fn ptxas_gates_for(&self, kernel: &str) -> Option<PtxasGates> {
        let own = self.kernels.get(kernel).and_then(|k| k.ptxas.as_ref());
        match (&self.gates.ptxas, own) {
            (Some(base), Some(own)) => Some(base.overridden_by(own)),
            (base, own) => base.as_ref().or(own).cloned(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    #[serde(default)]
    pub ptxas: Option<PtxasGates>,
    /// The built-in workload's output gates (`crate::workload::builtin`); a declared
    /// workload has its own, per output.
    #[serde(default)]
    pub correctness: Option<crate::workload::builtin::CorrectnessGates>,
    #[serde(default)]
    pub performance: Option<PerformanceGates>,
    /// Rules on what the profile stage measured, by name (`repro_stages::profile::gates` judges them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profile: BTreeMap<String, crate::profile_rules::ProfileRule>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PtxasGates {
    pub max_registers: Option<u32>,
    pub max_smem_bytes: Option<u64>,
    pub max_spill_bytes: Option<u64>,
}

impl PtxasGates {
    /// These gates with every field `own` names in place of this one's.
    pub fn overridden_by(&self, own: &PtxasGates) -> PtxasGates {
        PtxasGates {
            max_registers: own.max_registers.or(self.max_registers),
            max_smem_bytes: own.max_smem_bytes.or(self.max_smem_bytes),
            max_spill_bytes: own.max_spill_bytes.or(self.max_spill_bytes),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerformanceGates {
    /// Per workload with a control: its best variant's speedup over the control on its
    /// primary shape.
    pub min_speedup_vs_control: Option<f64>,
    /// Per workload: its best variant's speedup over each named baseline of that workload
    /// on its primary shape.
    #[serde(default)]
    pub min_speedup_vs_baseline: BTreeMap<String, f64>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Read by [`param_value::exact_params`](super::param_value::exact_params): `.inf`,
    /// `.nan` and integers past 64 bits keep their text.
    #[serde(default, deserialize_with = "super::param_value::exact_params")]
    pub params: BTreeMap<String, serde_yaml::Value>,
    /// Environment variables set for the stage's processes (and fingerprinted).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Seconds, or a duration like `90s`, `10m`, `2h`: what it limits is the kind's to say
    /// (its `configure` refuses it where it means nothing).
    #[serde(default)]
    pub timeout: Option<Timeout>,
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

/// A stage's `timeout:`, read once: the value as written (kept for messages and the parse
/// cache) and the duration it reads as, or why it reads as none.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeout {
    written: serde_yaml::Value,
    read: Result<std::time::Duration, (String, String)>,
}

impl Timeout {
    /// The duration, or the text that could not be read and why.
    pub fn duration(&self) -> Result<std::time::Duration, (String, String)> {
        self.read.clone()
    }
}

impl From<serde_yaml::Value> for Timeout {
    fn from(written: serde_yaml::Value) -> Timeout {
        let text = match &written {
            serde_yaml::Value::Number(n) => Ok(n.to_string()),
            serde_yaml::Value::String(s) => Ok(s.clone()),
            other => Err((
                format!("{other:?}"),
                "it is not a number or a string".to_string(),
            )),
        };
        let read = text.and_then(|text| check_duration(&text).map_err(|why| (text, why)));
        Timeout { written, read }
    }
}

impl Serialize for Timeout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.written.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Timeout {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Timeout, D::Error> {
        serde_yaml::Value::deserialize(d).map(Timeout::from)
    }
}

impl StageSpec {
    /// The built-in kind `uses` names; `None` for a name the loader rejects.
    pub fn builtin(&self) -> Option<BuiltinKind> {
        BuiltinKind::named(&self.uses)
    }

    /// Whether `uses` names `kind`.
    pub fn is(&self, kind: BuiltinKind) -> bool {
        self.uses == kind.as_str()
    }

    /// `timeout` as a duration: seconds (`90`, `1.5`), or `90s`, `10m`, `2h`. `Err` holds
    /// the text that could not be read and why.
    pub fn timeout_duration(&self) -> Result<Option<std::time::Duration>, (String, String)> {
        self.timeout.as_ref().map(Timeout::duration).transpose()
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

    /// A kernel's `ptxas:` replaces the fields it names, keeps the pipeline's others, may
    /// add a gate the pipeline lacks, and stands alone without `gates.ptxas`.
    #[test]
    fn a_kernels_ptxas_overrides_the_pipelines_field_by_field() {
        let yaml = |gates: &str| -> Pipeline {
            serde_yaml::from_str(&format!(
                "version: 1\n\
                 kernels:\n  \
                 ws: {{source: ws.cu, entry: ws, ptxas: {{max_registers: 168, max_smem_bytes: 232448}}}}\n  \
                 plain: {{source: plain.cu, entry: plain}}\n\
                 {gates}stages: {{}}\n"
            ))
            .unwrap()
        };
        let gates = |r, m, s| PtxasGates {
            max_registers: r,
            max_smem_bytes: m,
            max_spill_bytes: s,
        };
        let p = yaml(
            "gates:\n  ptxas: {max_registers: 128, max_smem_bytes: 65536, max_spill_bytes: 0}\n",
        );
        assert_eq!(
            p.ptxas_gates_for("ws"),
            Some(gates(Some(168), Some(232448), Some(0))),
            "named fields replaced, the spill gate kept"
        );
        assert_eq!(
            p.ptxas_gates_for("plain"),
            Some(gates(Some(128), Some(65536), Some(0)))
        );
        assert_eq!(p.ptxas_gates_for("reference-tiny"), p.gates.ptxas);

        let p = yaml("gates:\n  ptxas: {max_spill_bytes: 0}\n");
        assert_eq!(
            p.ptxas_gates_for("ws"),
            Some(gates(Some(168), Some(232448), Some(0))),
            "a gate the pipeline lacks is added"
        );
        assert_eq!(p.ptxas_gates_for("plain"), Some(gates(None, None, Some(0))));

        let p = yaml("");
        assert_eq!(
            p.ptxas_gates_for("ws"),
            Some(gates(Some(168), Some(232448), None))
        );
        assert_eq!(p.ptxas_gates_for("plain"), None);
    }

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
