//! The FP8 attention workload for the tests of its kernels: its cases at any (B, H, S, D),
//! drawn by the shipped pipeline's declaration; the CPU fp64 reference they are checked
//! against; and one launch of an attention cubin through repro's generic launcher (GPU).
#![allow(dead_code)]

use repro::gpu::harness::{Kernel, Launch, Session};
use repro::gpu::launch::{kernel_order, launch_dims, DeviceCase};
use repro::workload::exprs::{Bindings, Compiled};
use repro::workload::inputs::Case;
use repro::workload::Declaration;
use std::path::Path;

/// The kernels' entry point.
pub const ENTRY: &str = "sdpa_fp8_fwd";

/// The dimensions of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub b: usize,
    pub h: usize,
    pub s: usize,
    pub d: usize,
}

pub fn shape(b: usize, h: usize, s: usize, d: usize) -> Shape {
    Shape { b, h, s, d }
}

impl Shape {
    pub fn numel(&self) -> usize {
        self.b * self.h * self.s * self.d
    }
}

/// One case: what the kernel is given, and the values it stands for.
pub struct Inputs {
    pub shape: Shape,
    pub case: Case,
    /// Q as fp16 values, K and V dequantized (f32 products), row-major `[B, H, S, D]`.
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    /// The scale the kernel is passed (an fp32).
    pub softmax_scale: f64,
}

/// The shipped pipeline's attention workload.
pub fn declaration() -> Declaration {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("pipeline.yaml"))
        .unwrap();
    let p: repro::pipeline::Pipeline = serde_yaml::from_str(&text).unwrap();
    p.workloads["sdpa_fp8"].clone()
}

fn dims(s: Shape) -> Bindings {
    [("B", s.b), ("H", s.h), ("S", s.s), ("D", s.d)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v as i64))
        .collect()
}

/// The case of `shape` for `recipe` and `seed`, as every stage draws it.
pub fn inputs(shape: Shape, recipe: &str, seed: u64) -> Inputs {
    let decl = declaration();
    let c = Compiled::new("sdpa_fp8", &decl, &[]).unwrap();
    let case = Case::generate_for(&c, "test", dims(shape), recipe, seed).unwrap();
    let softmax_scale = match &case.args[9] {
        repro::workload::inputs::ArgData::Scalar { bytes, .. } => {
            f64::from(f32::from_le_bytes(bytes[..4].try_into().unwrap()))
        }
        other => panic!("softmax_scale is a scalar: {other:?}"),
    };
    Inputs {
        shape,
        q: case.values(&decl, 0),
        k: case.values(&decl, 1),
        v: case.values(&decl, 2),
        softmax_scale,
        case,
    }
}

/// Non-causal attention in f64 on the values the kernel is given.
pub fn reference_f64(x: &Inputs) -> Vec<f64> {
    let Shape { s, d, .. } = x.shape;
    let mut out = vec![0f64; x.shape.numel()];
    for (row, o) in out.chunks_mut(d).enumerate() {
        let head = row / s;
        let qi = &x.q[row * d..(row + 1) * d];
        let scores: Vec<f64> = (0..s)
            .map(|j| {
                let kj = &x.k[(head * s + j) * d..(head * s + j + 1) * d];
                qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() * x.softmax_scale
            })
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores.iter().map(|v| (v - max).exp()).collect();
        let sum: f64 = p.iter().sum();
        for (j, pj) in p.iter().enumerate() {
            let vj = &x.v[(head * s + j) * d..(head * s + j + 1) * d];
            for (oc, vc) in o.iter_mut().zip(vj) {
                *oc += pj * vc / sum;
            }
        }
    }
    out
}

/// The kernel of `cubin` on `x` (its output O, as f64), launched as the declaration says.
pub fn run(session: &Session, cubin: &Path, x: &Inputs) -> Vec<f64> {
    let decl = declaration();
    let kernel = Kernel::load(cubin, ENTRY, &decl.launch.globals).unwrap();
    let c = Compiled::new("sdpa_fp8", &decl, &[]).unwrap();
    let geometry = c.launch(&x.case.dims, &kernel.globals, "the test").unwrap();
    let device = DeviceCase::upload(&decl, &x.case, |i| decl.args[i].dtype).unwrap();
    let params = device.params(&kernel_order(&decl));
    let launch = Launch {
        kernel: &kernel,
        dims: launch_dims(&geometry),
        params: &params,
    };
    let out = session.run_checked(&launch, &device).unwrap();
    repro::workload::dtype::Dtype::Fp16.decode(&out[0])
}
