//! Launch geometry: expressions over the dims and the variant's defines.

use super::ExprText;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

    /// The defines its expressions read, for a kernel compiled with `defines`: those of
    /// `defines` it names, and the defaults of `launch.defines` for the rest. Two programs
    /// with the same cubin and the same defines read launch the same way.
    pub fn defines_read(&self, defines: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
        let names = self.names();
        self.defines
            .iter()
            .chain(defines)
            .filter(|(name, _)| names.contains(name.as_str()))
            .map(|(name, &value)| (name.clone(), value))
            .collect()
    }
}
