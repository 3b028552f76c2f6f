//! Where argument values come from: `init`, quantization, scalar values, generators, recipes.

use super::ExprText;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

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
