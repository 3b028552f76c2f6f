//! The typed shape of a workload declared under `workloads:` in pipeline.yaml: its
//! dimensions and shapes, its kernel arguments in ABI order, how inputs are drawn, the
//! launch geometry, the reference and the gates per output. `docs/guide/workloads.md`
//! describes every key; [`super::validate`] checks what the types cannot.

use super::dtype::Dtype;
use indexmap::IndexMap;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// One workload: what a kernel computes and how `repro` feeds, launches and judges it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// The `kernels:` entries whose variants run this workload.
    pub kernels: Vec<String>,
    /// The dimension names, in the order shapes list them (any identifiers).
    pub dims: Vec<String>,
    /// Shape name → a value for every dimension.
    pub shapes: IndexMap<String, IndexMap<String, i64>>,
    /// The shape headlines and performance gates use.
    pub primary: String,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// The kernel's parameters, in the order of its signature.
    pub args: Vec<Arg>,
    /// Built-in generators that draw several inputs together (`attention`).
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub generators: IndexMap<String, Generator>,
    /// Named input sets; absent: one set, `default`, of every input's own `init`.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub recipes: IndexMap<String, RecipeSpec>,
    /// Shape → the recipes it is checked with (the first is timed); a shape not listed
    /// gets the first recipe.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, Vec<String>>,
    pub launch: Launch,
    pub reference: Reference,
    /// Output name → its correctness gates.
    pub gates: IndexMap<String, OutputGates>,
    /// The variant the workload's others are compared with (its performance gate); absent:
    /// the pipeline's `control:` when that is one of its variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// The precision class of a variant whose kernel names none (`kernels.<k>.precision`):
    /// per-class thresholds use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
}

/// The recipe name of a workload without `recipes:`.
pub const DEFAULT_RECIPE: &str = "default";

impl Declaration {
    /// The recipe names, in declaration order (`[default]` when none are declared).
    pub fn recipe_names(&self) -> Vec<&str> {
        if self.recipes.is_empty() {
            vec![DEFAULT_RECIPE]
        } else {
            self.recipes.keys().map(String::as_str).collect()
        }
    }

    /// The recipes `shape` is checked with; the first is the one timed.
    pub fn recipes_of(&self, shape: &str) -> Vec<&str> {
        match self.inputs.get(shape) {
            Some(list) if !list.is_empty() => list.iter().map(String::as_str).collect(),
            _ => self.recipe_names().into_iter().take(1).collect(),
        }
    }

    /// The argument named `name`, with its index.
    pub fn arg(&self, name: &str) -> Option<(usize, &Arg)> {
        self.args.iter().enumerate().find(|(_, a)| a.name == name)
    }

    /// The outputs, in ABI order.
    pub fn outputs(&self) -> impl Iterator<Item = &Arg> + Clone {
        self.args.iter().filter(|a| a.role == Role::Output)
    }
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

/// One kernel parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    pub name: String,
    pub dtype: Dtype,
    pub role: Role,
    /// Buffers: the extent of each dimension, as expressions over the workload's dims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<ExprText>,
    /// Inputs: how values are drawn (unless a generator or a quantization fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<Init>,
    /// FP8 inputs: quantize the drawn values per block, writing the scales to another input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantize: Option<Quantize>,
    /// Scalars: the value passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<ScalarValue>,
}

impl Arg {
    /// Passed as a device pointer (inputs and outputs) rather than by value.
    pub fn is_buffer(&self) -> bool {
        self.role != Role::Scalar
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A buffer the kernel reads.
    Input,
    /// A buffer the kernel writes, compared with the reference.
    Output,
    /// A value passed by value.
    Scalar,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Output => "output",
            Role::Scalar => "scalar",
        }
    }
}

/// The text of an integer expression over dimensions (and, in launch geometry, defines),
/// in the language of tune constraints. A YAML integer is taken as its digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ExprText(pub String);

impl<'de> Deserialize<'de> for ExprText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        match Value::deserialize(d)? {
            Value::String(s) => Ok(ExprText(s)),
            Value::Number(n) if n.is_i64() || n.is_u64() => Ok(ExprText(n.to_string())),
            _ => Err(serde::de::Error::custom(
                "expected an integer or an expression over the dimensions, e.g. `rows * 2`",
            )),
        }
    }
}

impl std::fmt::Display for ExprText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How an input's values are drawn, from the (seed, argument name) stream. Written as a
/// one-key mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "InitKeys", into = "InitKeys")]
pub enum Init {
    /// `{normal: {mean: 0, std: 1}}`.
    Normal(Normal),
    /// `{uniform: {low: -1, high: 1}}`.
    Uniform(Uniform),
    /// `{constant: 1.0}`.
    Constant(f64),
}

/// [`Init`] as YAML writes it (serde_yaml would want a `!tag` for an enum).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct InitKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    normal: Option<Normal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    uniform: Option<Uniform>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    constant: Option<f64>,
}

impl TryFrom<InitKeys> for Init {
    type Error = &'static str;

    fn try_from(k: InitKeys) -> Result<Init, Self::Error> {
        match (k.normal, k.uniform, k.constant) {
            (Some(n), None, None) => Ok(Init::Normal(n)),
            (None, Some(u), None) => Ok(Init::Uniform(u)),
            (None, None, Some(c)) => Ok(Init::Constant(c)),
            _ => Err("an `init` is one of `{normal: {mean, std}}`, `{uniform: {low, high}}` or `{constant: x}`"),
        }
    }
}

impl From<Init> for InitKeys {
    fn from(init: Init) -> InitKeys {
        match init {
            Init::Normal(n) => InitKeys {
                normal: Some(n),
                ..InitKeys::default()
            },
            Init::Uniform(u) => InitKeys {
                uniform: Some(u),
                ..InitKeys::default()
            },
            Init::Constant(c) => InitKeys {
                constant: Some(c),
                ..InitKeys::default()
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normal {
    #[serde(default)]
    pub mean: f64,
    #[serde(default = "one")]
    pub std: f64,
    /// A fixed seed (the same values for every seed of the workload); default: the run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uniform {
    pub low: f64,
    pub high: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

fn one() -> f64 {
    1.0
}

/// Per-block quantization of an FP8 input: `scale = amax(block) / max finite`, codes
/// `encode(x / scale)`, the scales written to the input named `scales`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantize {
    /// The block's extent in the trailing dimensions (`[S, D]`: one scale per leading index).
    pub block: Vec<ExprText>,
    /// The input that receives one scale per block.
    pub scales: String,
}

/// A scalar's value: a number, an integer expression over the dims, or `{pow: [expr, p]}`
/// (`{pow: [D, -0.5]}` is 1/√D).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ScalarValue {
    /// A YAML float.
    Float(f64),
    /// A YAML integer or an expression text.
    Int(ExprText),
    Pow {
        pow: (ExprText, f64),
    },
}

impl<'de> Deserialize<'de> for ScalarValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        let bad = || {
            <D::Error as serde::de::Error>::custom(
                "a scalar's `value` is a number, an expression over the dimensions (`hidden`), or `{pow: [expr, exponent]}`",
            )
        };
        match Value::deserialize(d)? {
            Value::Number(n) if n.is_f64() => n.as_f64().map(ScalarValue::Float).ok_or_else(bad),
            Value::Number(n) => Ok(ScalarValue::Int(ExprText(n.to_string()))),
            Value::String(s) => Ok(ScalarValue::Int(ExprText(s))),
            Value::Mapping(m) if m.len() == 1 => {
                let pair = m.get("pow").and_then(Value::as_sequence).ok_or_else(bad)?;
                let [base, exponent] = pair.as_slice() else {
                    return Err(bad());
                };
                let base = ExprText::deserialize(base.clone()).map_err(|_| bad())?;
                let exponent = exponent.as_f64().ok_or_else(bad)?;
                Ok(ScalarValue::Pow {
                    pow: (base, exponent),
                })
            }
            _ => Err(bad()),
        }
    }
}

/// A built-in generator that draws several inputs from one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generator {
    /// `attention`: Q, K, V of shape `[..., S, D]` (`super::generators`).
    pub kind: String,
    /// The inputs it fills, in the generator's order.
    pub args: Vec<String>,
}

/// One named input set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeSpec {
    /// Generator name → the generator's recipe (`sharp`); unnamed: its first.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub generators: BTreeMap<String, String>,
    /// Input name → an `init` replacing its own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub init: BTreeMap<String, Init>,
    /// Whether the absolute gates (`max_abs_err`, `mean_abs_err`, `max_pct_bad`) apply:
    /// they are set in the output's units, for data of the usual scale.
    #[serde(default = "yes")]
    pub absolute_gates: bool,
}

fn yes() -> bool {
    true
}

/// Launch geometry: expressions over the dims and the variant's defines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    /// 1 to 3 extents (x, y, z).
    pub grid: Vec<ExprText>,
    /// 1 to 3 extents (x, y, z).
    pub block: Vec<ExprText>,
    /// Dynamic shared memory per block, bytes (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smem: Option<ExprText>,
    /// Values of defines a variant leaves out (keep them equal to the kernel's own defaults).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub defines: BTreeMap<String, i64>,
    /// `extern "C" __device__ const int` globals of the kernel's cubin that the expressions
    /// may read (geometry the kernel derives from its defines): known once it is built.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub globals: Vec<String>,
    /// Conditions a (variant, shape) must meet to run (`repro_head_dim == D`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<ExprText>,
}

impl Launch {
    /// Every identifier its expressions name (dims, defines, globals): the defines among
    /// them are all a variant's launch depends on besides its cubin.
    pub fn names(&self) -> std::collections::BTreeSet<&str> {
        let texts = self.grid.iter().chain(&self.block).chain(&self.smem);
        texts
            .chain(&self.requires)
            .flat_map(|t| {
                t.0.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            })
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
            .collect()
    }
}

/// What the outputs are compared with: a kernel (`source`, `entry`, `launch`) or a command
/// (`run`) that writes the expected outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// A kernel reference's geometry (over the dims only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// A kernel reference's parameters when they differ from the workload's: names of the
    /// workload's arguments, or extra scalars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<RefArg>>,
    /// Output name → the dtype the reference writes it in (default: the output's own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, Dtype>,
    /// A command that writes the expected outputs (`super::case` has the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Vec<String>>,
}

/// One parameter of a reference kernel.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RefArg {
    /// One of the workload's arguments.
    Name(String),
    /// A scalar of the reference's own.
    Extra(Arg),
}

impl<'de> Deserialize<'de> for RefArg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        match Value::deserialize(d)? {
            Value::String(s) => Ok(RefArg::Name(s)),
            v @ Value::Mapping(_) => Arg::deserialize(v)
                .map(RefArg::Extra)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a reference argument is the name of a workload argument, or a scalar `{name, dtype, role: scalar, value}`",
            )),
        }
    }
}

/// The correctness gates of one output. Absolute thresholds are in the output's units;
/// the normalized ones are unitless (`docs/guide/correctness.md`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputGates {
    /// Largest |out − ref|; also the threshold above which an element counts as bad.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_err: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_abs_err: Option<f64>,
    /// Largest percentage of bad elements (needs `max_abs_err`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pct_bad: Option<f64>,
    /// Largest ‖out − ref‖₂ / ‖ref‖₂.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rel_l2_err: Option<Threshold>,
    /// Largest |out − ref| over the spread of the reference where the element lies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_err_over_ref_std: Option<Threshold>,
    /// The trailing dimensions one spread is taken over (`2` for `[B, H, S, D]`: per head);
    /// default: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_dims: Option<usize>,
}

/// A figure of one output that its gates judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    MaxAbsErr,
    MeanAbsErr,
    PctBad,
    MaxErrOverRefStd,
    RelL2Err,
}

impl Figure {
    /// Its name in records (`rel_l2_err`).
    pub fn name(self) -> &'static str {
        match self {
            Figure::MaxAbsErr => "max_abs_err",
            Figure::MeanAbsErr => "mean_abs_err",
            Figure::PctBad => "pct_bad",
            Figure::MaxErrOverRefStd => "max_err_over_ref_std",
            Figure::RelL2Err => "rel_l2_err",
        }
    }

    /// The name of its gate (`max_rel_l2_err`).
    pub fn gate(self) -> &'static str {
        match self {
            Figure::PctBad => "max_pct_bad",
            Figure::RelL2Err => "max_rel_l2_err",
            f => f.name(),
        }
    }
}

impl OutputGates {
    /// The thresholds a run is judged by, in order: the absolute ones when `absolute` (the
    /// recipe's `absolute_gates`), then the normalized ones at precision class `class`. A
    /// gate not declared (or with no threshold for the class) is left out.
    pub fn thresholds(&self, class: Option<&str>, absolute: bool) -> Vec<(Figure, f64)> {
        let per_class = |t: &Option<Threshold>| t.as_ref().and_then(|t| t.for_class(class));
        let absolutes = [
            (Figure::MaxAbsErr, self.max_abs_err),
            (Figure::MeanAbsErr, self.mean_abs_err),
            (Figure::PctBad, self.max_pct_bad),
        ];
        let normalized = [
            (
                Figure::MaxErrOverRefStd,
                per_class(&self.max_err_over_ref_std),
            ),
            (Figure::RelL2Err, per_class(&self.max_rel_l2_err)),
        ];
        absolutes
            .into_iter()
            .filter(|_| absolute)
            .chain(normalized)
            .filter_map(|(f, t)| Some((f, t?)))
            .collect()
    }
}

/// A threshold: one number, or one per precision class of the kernels (`fp16-pv: 0.02`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Threshold {
    One(f64),
    PerClass(BTreeMap<String, f64>),
}

impl Threshold {
    /// The threshold for a kernel of precision class `class` (`None`: not given for it).
    pub fn for_class(&self, class: Option<&str>) -> Option<f64> {
        match self {
            Threshold::One(x) => Some(*x),
            Threshold::PerClass(map) => class.and_then(|c| map.get(c).copied()),
        }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde_yaml::Value;
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_f64()
                .map(Threshold::One)
                .ok_or_else(|| serde::de::Error::custom("not a number")),
            v @ Value::Mapping(_) => BTreeMap::<String, f64>::deserialize(v)
                .map(Threshold::PerClass)
                .map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "a threshold is a number, or a number per precision class (`{fp16-pv: 0.02, fp8-pv: 1.0}`)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_names_what_its_expressions_read() {
        let launch: Launch = serde_yaml::from_str(
            "{grid: [\"(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK\"], block: [THREADS_PER_ROW * 2], \
             smem: repro_smem, requires: [\"repro_head_dim == D\"], defines: {UNREAD: 1}}",
        )
        .unwrap();
        let names: Vec<&str> = launch.names().into_iter().collect();
        assert_eq!(
            names,
            [
                "D",
                "ROWS_PER_BLOCK",
                "THREADS_PER_ROW",
                "repro_head_dim",
                "repro_smem",
                "rows"
            ]
        );
    }

    #[test]
    fn reads_every_form_of_a_scalar_value() {
        let v = |s: &str| serde_yaml::from_str::<ScalarValue>(s);
        assert_eq!(v("1.0e-6").unwrap(), ScalarValue::Float(1e-6));
        assert_eq!(
            v("4096").unwrap(),
            ScalarValue::Int(ExprText("4096".into()))
        );
        assert_eq!(
            v("hidden * 2").unwrap(),
            ScalarValue::Int(ExprText("hidden * 2".into()))
        );
        assert_eq!(
            v("{pow: [D, -0.5]}").unwrap(),
            ScalarValue::Pow {
                pow: (ExprText("D".into()), -0.5)
            }
        );
        let err = v("[1, 2]").unwrap_err().to_string();
        assert!(err.contains("`{pow: [expr, exponent]}`"), "{err}");
        assert!(v("{pow: [D]}").is_err());
    }

    #[test]
    fn reads_thresholds_and_reference_args() {
        let t: Threshold = serde_yaml::from_str("{fp16-pv: 0.02, fp8-pv: 1.0}").unwrap();
        assert_eq!(t.for_class(Some("fp8-pv")), Some(1.0));
        assert_eq!(t.for_class(Some("other")), None);
        assert_eq!(t.for_class(None), None);
        assert_eq!(
            serde_yaml::from_str::<Threshold>("0.5").unwrap(),
            Threshold::One(0.5)
        );
        let args: Vec<RefArg> =
            serde_yaml::from_str("[q, {name: D, dtype: int32, role: scalar, value: D}]").unwrap();
        assert_eq!(args[0], RefArg::Name("q".into()));
        let RefArg::Extra(extra) = &args[1] else {
            panic!("{args:?}")
        };
        assert_eq!((extra.name.as_str(), extra.role), ("D", Role::Scalar));
        let err = serde_yaml::from_str::<Vec<RefArg>>("[{name: D, dtyp: int32}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `dtyp`"), "{err}");
    }

    #[test]
    fn inits_are_single_key_maps() {
        let i: Init = serde_yaml::from_str("{normal: {std: 2}}").unwrap();
        assert_eq!(
            i,
            Init::Normal(Normal {
                mean: 0.0,
                std: 2.0,
                seed: None
            })
        );
        let i: Init = serde_yaml::from_str("{constant: 1}").unwrap();
        assert_eq!(i, Init::Constant(1.0));
        let err = serde_yaml::from_str::<Init>("{gaussian: {}}")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "unknown field `gaussian`, expected one of `normal`, `uniform`, `constant`"
            ),
            "{err}"
        );
        let err = serde_yaml::from_str::<Init>("{constant: 1, normal: {}}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("an `init` is one of"), "{err}");
        let back = serde_yaml::to_string(&Init::Constant(2.0)).unwrap();
        assert_eq!(back, "constant: 2.0\n");
    }
}
