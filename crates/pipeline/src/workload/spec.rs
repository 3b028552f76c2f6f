//! The typed shape of a workload declared under `workloads:` in pipeline.yaml: its
//! dimensions and shapes, its kernel arguments in ABI order, how inputs are drawn, the
//! launch geometry, the reference and the gates per output. `docs/guide/workloads.md`
//! describes every key; [`super::validate`] checks what the types cannot.

mod gates;
mod launch;
mod reference;
mod values;

pub use gates::{Figure, OutputGates, Threshold};
pub use launch::Launch;
pub use reference::{RefArg, Reference};
pub use values::{Generator, Init, Normal, Quantize, RecipeSpec, ScalarValue, Uniform};

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
    /// The dimensions of shape `shape`, name → value, as the workload's expressions bind
    /// them (`None`: no such shape).
    pub fn shape_dims(&self, shape: &str) -> Option<BTreeMap<String, i64>> {
        let dims = self.shapes.get(shape)?;
        Some(dims.iter().map(|(k, v)| (k.clone(), *v)).collect())
    }

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

#[cfg(test)]
mod tests;
