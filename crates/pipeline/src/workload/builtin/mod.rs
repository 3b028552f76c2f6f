//! The built-in workload: `workload: {op: sdpa_fp8, ...}`, the form the FP8 attention
//! pipeline was first written in. [`declaration`] reads it as a [`Declaration`], so every
//! stage runs it through the same machinery as a workload declared under `workloads:`;
//! [`problems`] checks what its types cannot.
//!
//! This module (with its tests) is the one place in `src/` that knows the SDPA operation:
//! its dimensions `B, H, S, D`, the parameters of `sdpa_fp8_fwd` and `sdpa_reference_f32`,
//! the geometry the kernels export, the precision classes `fp16-pv`/`fp8-pv` and the default
//! correctness gates of `gates.correctness`.

use super::generators::attention::Recipe;
use super::problem::Problem;
use super::spec::{Declaration, OutputGates, Threshold};
use crate::{diag::did_you_mean, diag::quoted_list};
use crate::{KernelSpec, Pipeline};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The one built-in operation.
pub const OP: &str = "sdpa_fp8";

/// The precision classes of its kernels: how P·V is computed, which sets how far from the
/// reference a kernel may land (`docs/guide/correctness.md` derives the thresholds).
/// `fp16-pv`: P rounded to fp16; `fp8-pv`: P quantized to E4M3. A kernel that names none
/// is `fp16-pv`.
pub const CLASSES: [&str; 2] = ["fp16-pv", "fp8-pv"];

/// `workload:` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// `sdpa_fp8`.
    pub op: String,
    pub shapes: BTreeMap<String, Shape>,
    pub primary: String,
    /// The reference kernel the outputs are compared with (compiled by the build stage to
    /// `.repro/cubins/reference.<arch>.cubin`).
    #[serde(default)]
    pub reference: Option<KernelSpec>,
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Input recipes per shape name; a shape not listed gets `[gaussian]`. The first
    /// recipe of a shape is the one that is timed.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<Recipe>>,
}

fn default_seeds() -> Vec<u64> {
    vec![0]
}

/// One shape of the attention workload.
#[allow(non_snake_case)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub B: u32,
    pub H: u32,
    pub S: u32,
    pub D: u32,
}

/// `gates.correctness` of the built-in workload: the gates of its output `o`. The
/// defaults come from the error model and the measurements in `docs/guide/correctness.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrectnessGates {
    #[serde(default = "d_max_abs")]
    pub max_abs_err: f64,
    #[serde(default = "d_mean_abs")]
    pub mean_abs_err: f64,
    #[serde(default = "d_pct_bad")]
    pub max_pct_bad: f64,
    /// Per precision class: the largest `max_err_over_ref_std`.
    #[serde(default = "d_over_std")]
    pub max_err_over_ref_std: PerClass,
    /// Per precision class: the largest `rel_l2_err`.
    #[serde(default = "d_rel_l2")]
    pub max_rel_l2_err: PerClass,
}

impl Default for CorrectnessGates {
    fn default() -> Self {
        CorrectnessGates {
            max_abs_err: d_max_abs(),
            mean_abs_err: d_mean_abs(),
            max_pct_bad: d_pct_bad(),
            max_err_over_ref_std: d_over_std(),
            max_rel_l2_err: d_rel_l2(),
        }
    }
}

/// One threshold per precision class (both must be given when the key is written).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerClass {
    #[serde(rename = "fp16-pv")]
    pub fp16_pv: f64,
    #[serde(rename = "fp8-pv")]
    pub fp8_pv: f64,
}

impl PerClass {
    fn threshold(self) -> Threshold {
        Threshold::PerClass(BTreeMap::from([
            (CLASSES[0].to_string(), self.fp16_pv),
            (CLASSES[1].to_string(), self.fp8_pv),
        ]))
    }
}

fn d_over_std() -> PerClass {
    PerClass {
        fp16_pv: 0.02,
        fp8_pv: 1.0,
    }
}
fn d_rel_l2() -> PerClass {
    PerClass {
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

/// What every attention declaration holds whatever its shapes: `sdpa_fp8_fwd(q, k, v,
/// k_scale, v_scale, o, B, H, S, softmax_scale)`, K and V quantized to E4M3 per (batch,
/// head), the launch geometry the kernels export as globals, and the reference
/// `sdpa_reference_f32(..., o (fp32), B, H, S, D, softmax_scale)` on 128-thread blocks.
const FIXED: &str = r#"
kernels: []
dims: [B, H, S, D]
shapes: {}
primary: ""
precision: fp16-pv
args:
  - {name: q,       dtype: fp16,  role: input,  shape: [B, H, S, D]}
  - {name: k,       dtype: e4m3,  role: input,  shape: [B, H, S, D], quantize: {block: [S, D], scales: k_scale}}
  - {name: v,       dtype: e4m3,  role: input,  shape: [B, H, S, D], quantize: {block: [S, D], scales: v_scale}}
  - {name: k_scale, dtype: fp32,  role: input,  shape: [B, H]}
  - {name: v_scale, dtype: fp32,  role: input,  shape: [B, H]}
  - {name: o,       dtype: fp16,  role: output, shape: [B, H, S, D]}
  - {name: batch,   dtype: int32, role: scalar, value: B}
  - {name: heads,   dtype: int32, role: scalar, value: H}
  - {name: seq,     dtype: int32, role: scalar, value: S}
  - {name: softmax_scale, dtype: fp32, role: scalar, value: {pow: [D, -0.5]}}
generators:
  qkv: {kind: attention, args: [q, k, v]}
recipes:
  gaussian:    {}
  outliers:    {generators: {qkv: outliers},  absolute_gates: false}
  sharp:       {generators: {qkv: sharp},     absolute_gates: false}
  sink:        {generators: {qkv: sink},      absolute_gates: false}
  e4m3-edge:   {generators: {qkv: e4m3-edge}, absolute_gates: false}
launch:
  globals: [repro_block_threads, repro_rows_per_block, repro_dynamic_smem_bytes, repro_head_dim]
  grid: ["(S + repro_rows_per_block - 1) / repro_rows_per_block", H, B]
  block: [repro_block_threads]
  smem: repro_dynamic_smem_bytes
  requires: ["repro_head_dim == D"]
reference:
  entry: sdpa_reference_f32
  launch: {grid: ["(B * H * S * D + 127) / 128"], block: [128]}
  args: [q, k, v, k_scale, v_scale, o, batch, heads, seq, {name: head_dim, dtype: int32, role: scalar, value: D}, softmax_scale]
  outputs: {o: fp32}
gates: {}
"#;

/// The built-in workload of `p` as a declaration named [`OP`]; its kernels are every
/// kernel no declared workload lists.
pub fn declaration(p: &Pipeline) -> Option<(String, Declaration)> {
    let w = p.workload.as_ref()?;
    let mut d: Declaration = serde_yaml::from_str(FIXED).expect("the built-in declaration parses");
    let declared: Vec<&String> = p.workloads.values().flat_map(|d| &d.kernels).collect();
    d.kernels = p
        .kernels
        .keys()
        .filter(|k| !declared.contains(k))
        .cloned()
        .collect();
    d.shapes = w
        .shapes
        .iter()
        .map(|(name, s)| {
            let dims: IndexMap<String, i64> = [("B", s.B), ("H", s.H), ("S", s.S), ("D", s.D)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), i64::from(v)))
                .collect();
            (name.clone(), dims)
        })
        .collect();
    d.primary = w.primary.clone();
    d.seeds = w.seeds.clone();
    d.inputs = w
        .inputs
        .iter()
        .map(|(shape, list)| {
            let names = list.iter().map(|r| r.name().to_string()).collect();
            (shape.clone(), names)
        })
        .collect();
    if let Some(r) = &w.reference {
        d.reference.source = Some(r.source.clone());
        d.reference.entry = Some(r.entry.clone());
        d.reference.flags = r.flags.clone();
    }
    let g = p.gates.correctness.clone().unwrap_or_default();
    d.gates.insert(
        "o".into(),
        OutputGates {
            max_abs_err: Some(g.max_abs_err),
            mean_abs_err: Some(g.mean_abs_err),
            max_pct_bad: Some(g.max_pct_bad),
            max_rel_l2_err: Some(g.max_rel_l2_err.threshold()),
            max_err_over_ref_std: Some(g.max_err_over_ref_std.threshold()),
            spread_dims: Some(2), // per (batch, head): each has its own FP8 scales
        },
    );
    Some((w.op.clone(), d))
}

/// What is wrong with the built-in workload of `p`, at its keys: an unknown `op`,
/// `inputs` naming no shape or a recipe twice, a primary shape not declared, a precision
/// class its gates do not know.
pub fn problems(p: &Pipeline) -> Vec<Problem> {
    let Some(w) = &p.workload else {
        return Vec::new();
    };
    let at = |rest: &[&str]| -> Vec<String> {
        std::iter::once("workload")
            .chain(rest.iter().copied())
            .map(String::from)
            .collect()
    };
    let mut out = Vec::new();
    if w.op != OP {
        out.push(Problem::at(
            at(&["op"]),
            format!("unknown built-in workload `{}`", w.op),
            format!("the built-in workload is `{OP}`; declare any other under `workloads:` (docs/guide/workloads.md)"),
        ));
    }
    let shapes = || w.shapes.keys().map(String::as_str);
    if !w.shapes.contains_key(&w.primary) {
        let help = did_you_mean(&w.primary, shapes())
            .unwrap_or_else(|| format!("the shapes are {}", quoted_list(shapes())));
        out.push(Problem::at(
            at(&["primary"]),
            format!(
                "the primary shape `{}` is not under workload.shapes",
                w.primary
            ),
            help,
        ));
    }
    for (shape, recipes) in &w.inputs {
        if !w.shapes.contains_key(shape) {
            let help = did_you_mean(shape, shapes())
                .unwrap_or_else(|| format!("the shapes are {}", quoted_list(shapes())));
            out.push(
                Problem::at(
                    at(&["inputs", shape]),
                    format!(
                        "`workload.inputs` names `{shape}`, which is not under workload.shapes"
                    ),
                    help,
                )
                .on_key(),
            );
        }
        for (i, recipe) in recipes.iter().enumerate() {
            if recipes[..i].contains(recipe) {
                out.push(Problem::at(
                    at(&["inputs", shape, &i.to_string()]),
                    format!("recipe `{recipe}` is listed twice for shape `{shape}`"),
                    "list each recipe once",
                ));
            }
        }
    }
    let declared: Vec<&String> = p.workloads.values().flat_map(|d| &d.kernels).collect();
    let classes = || CLASSES.iter().copied();
    let mut class = |path: Vec<String>, name: &str| {
        if !CLASSES.contains(&name) {
            let help = did_you_mean(name, classes())
                .unwrap_or_else(|| format!("the classes are {}", quoted_list(classes())));
            out.push(Problem::at(
                path,
                format!("`{name}` is not a precision class of `{OP}`"),
                help,
            ));
        }
    };
    for (k, spec) in p.kernels.iter().filter(|(k, _)| !declared.contains(k)) {
        if let Some(c) = &spec.precision {
            class(vec!["kernels".into(), k.clone(), "precision".into()], c);
        }
    }
    for (v, spec) in &p.variants {
        if let Some(c) = spec
            .precision
            .as_ref()
            .filter(|_| !declared.contains(&&spec.kernel))
        {
            class(vec!["variants".into(), v.clone(), "precision".into()], c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
