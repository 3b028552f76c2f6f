//! The reference the outputs are compared with: a kernel or a command.

use super::{Arg, Launch};
use crate::workload::dtype::Dtype;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

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
