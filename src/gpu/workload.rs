//! The `sdpa_fp8` workload: deterministic inputs from (shape, seed), and a CPU fp64
//! reference. No GPU needed.
//!
//! Layout (every tensor row-major `[B, H, S, D]`, little-endian): `q` fp16; `k`, `v` FP8
//! E4M3 codes with one fp32 scale per (batch, head), `k_scale`/`v_scale` of length `B·H`;
//! the kernel writes `O` fp16 `[B, H, S, D]`. Attention is non-causal with
//! `softmax_scale = 1/√D`.
//!
//! Inputs come from one ChaCha20 stream seeded with the seed, drawn in the order Q, K, V
//! (each standard normal), then reshaped by the input recipe ([`super::recipes`]), so the
//! same (shape, recipe, seed) gives the same bytes everywhere. K and V are quantized per (batch, head) with `scale = amax / 448` and stored as
//! `encode(x / scale)`; the *dequantized* values `decode(code) · scale` are what every
//! reference and baseline computes on.

use super::e4m3;
use crate::pipeline::{Recipe, Shape};
use anyhow::Context as _;
use half::f16;
use serde::Serialize;
use std::path::Path;

/// One (shape, seed)'s inputs.
pub struct Inputs {
    pub shape: Shape,
    pub recipe: Recipe,
    pub q: Vec<f16>,
    pub k: Vec<u8>,
    pub v: Vec<u8>,
    pub k_scale: Vec<f32>,
    pub v_scale: Vec<f32>,
}

/// A tensor quantized to E4M3 with one scale per (batch, head).
struct Quantized {
    codes: Vec<u8>,
    scales: Vec<f32>,
}

impl Shape {
    /// Elements of one `[B, H, S, D]` tensor.
    pub fn numel(&self) -> usize {
        self.B as usize * self.H as usize * self.S as usize * self.D as usize
    }
    /// Number of (batch, head) pairs.
    pub fn heads(&self) -> usize {
        self.B as usize * self.H as usize
    }
    pub fn softmax_scale(&self) -> f32 {
        1.0 / (self.D as f32).sqrt()
    }
}

impl Inputs {
    pub fn generate(shape: Shape, recipe: Recipe, seed: u64) -> Inputs {
        let drawn = super::recipes::draw(shape, recipe, seed);
        let q = drawn.q.into_iter().map(f16::from_f32).collect();
        let k = quantize(&drawn.k, shape.heads());
        let v = quantize(&drawn.v, shape.heads());
        Inputs {
            shape,
            recipe,
            q,
            k: k.codes,
            v: v.codes,
            k_scale: k.scales,
            v_scale: v.scales,
        }
    }

    /// K dequantized (`decode(code) · scale`), fp32.
    pub fn k_dequantized(&self) -> Vec<f32> {
        dequantize(&self.k, &self.k_scale)
    }

    /// V dequantized, fp32.
    pub fn v_dequantized(&self) -> Vec<f32> {
        dequantize(&self.v, &self.v_scale)
    }
}

fn quantize(x: &[f32], heads: usize) -> Quantized {
    let per_head = x.len() / heads;
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(heads);
    for head in x.chunks(per_head) {
        let amax = head.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = if amax > 0.0 { amax / e4m3::MAX } else { 1.0 };
        codes.extend(head.iter().map(|&v| e4m3::encode(v / scale)));
        scales.push(scale);
    }
    Quantized { codes, scales }
}

fn dequantize(codes: &[u8], scales: &[f32]) -> Vec<f32> {
    let per_head = codes.len() / scales.len();
    codes
        .chunks(per_head)
        .zip(scales)
        .flat_map(|(head, &s)| head.iter().map(move |&c| e4m3::decode(c) * s))
        .collect()
}

/// Attention in fp64 on the dequantized inputs, `[B, H, S, D]`. Spread over the machine's
/// cores (one contiguous block of rows per thread).
pub fn reference_f64(inputs: &Inputs) -> Vec<f64> {
    let shape = inputs.shape;
    let (s, d) = (shape.S as usize, shape.D as usize);
    let q: Vec<f64> = inputs.q.iter().map(|x| x.to_f64()).collect();
    let k: Vec<f64> = inputs.k_dequantized().into_iter().map(f64::from).collect();
    let v: Vec<f64> = inputs.v_dequantized().into_iter().map(f64::from).collect();
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0f64; shape.numel()];
    let rows = shape.heads() * s;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(rows.max(1));
    let rows_per_thread = rows.div_ceil(threads);
    std::thread::scope(|scope| {
        for (chunk_index, chunk) in out.chunks_mut(rows_per_thread * d).enumerate() {
            let (q, k, v) = (&q, &k, &v);
            scope.spawn(move || {
                let mut scores = vec![0f64; s];
                for (local, o) in chunk.chunks_mut(d).enumerate() {
                    let row = chunk_index * rows_per_thread + local;
                    let head = row / s;
                    let qi = &q[row * d..(row + 1) * d];
                    let kh = &k[head * s * d..(head + 1) * s * d];
                    let vh = &v[head * s * d..(head + 1) * s * d];
                    let mut max = f64::NEG_INFINITY;
                    for (j, score) in scores.iter_mut().enumerate() {
                        let kj = &kh[j * d..(j + 1) * d];
                        *score = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() * scale;
                        max = max.max(*score);
                    }
                    let mut sum = 0.0;
                    for score in scores.iter_mut() {
                        *score = (*score - max).exp();
                        sum += *score;
                    }
                    for (j, &p) in scores.iter().enumerate() {
                        let vj = &vh[j * d..(j + 1) * d];
                        for (oc, vc) in o.iter_mut().zip(vj) {
                            *oc += p * vc;
                        }
                    }
                    for oc in o.iter_mut() {
                        *oc /= sum;
                    }
                }
            });
        }
    });
    out
}

/// `index.json` of a `--dump-inputs` folder: what the baseline script reads.
#[derive(Serialize)]
pub struct DumpIndex {
    pub op: &'static str,
    pub layout: &'static str,
    /// The correctness gate's `max_abs_err`, so baselines count `pct_bad` the same way.
    pub max_abs_err: f64,
    pub mean_abs_err: f64,
    pub max_pct_bad: f64,
    /// The normalized gates of the `fp16-pv` class (the baselines compute in fp16).
    pub max_err_over_ref_std: f64,
    pub max_rel_l2_err: f64,
    pub primary: Option<String>,
    pub entries: Vec<DumpEntry>,
}

#[derive(Serialize)]
#[allow(non_snake_case)]
pub struct DumpEntry {
    pub shape: String,
    pub B: u32,
    pub H: u32,
    pub S: u32,
    pub D: u32,
    pub seed: u64,
    /// The input recipe.
    pub inputs: String,
    /// Whether bench times this (shape, recipe): the shape's first recipe only.
    pub timed: bool,
    pub softmax_scale: f32,
    /// Folder (relative to the index) holding `q.f16`, `k.e4m3`, `v.e4m3`, `k_scale.f32`,
    /// `v_scale.f32` and the dequantized `k.f32`, `v.f32`.
    pub dir: String,
}

/// Write one (shape, seed)'s inputs as raw little-endian files into `dir`.
pub fn dump(inputs: &Inputs, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let f32_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let files: [(&str, Vec<u8>); 7] = [
        (
            "q.f16",
            inputs.q.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        ("k.e4m3", inputs.k.clone()),
        ("v.e4m3", inputs.v.clone()),
        ("k_scale.f32", f32_bytes(&inputs.k_scale)),
        ("v_scale.f32", f32_bytes(&inputs.v_scale)),
        ("k.f32", f32_bytes(&inputs.k_dequantized())),
        ("v.f32", f32_bytes(&inputs.v_dequantized())),
    ];
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Shape = Shape {
        B: 1,
        H: 2,
        S: 32,
        D: 64,
    };

    #[test]
    fn inputs_are_deterministic_per_seed() {
        let a = Inputs::generate(SMALL, Recipe::Gaussian, 7);
        let b = Inputs::generate(SMALL, Recipe::Gaussian, 7);
        let c = Inputs::generate(SMALL, Recipe::Gaussian, 8);
        assert_eq!(a.q, b.q);
        assert_eq!(a.k, b.k);
        assert_eq!(a.v_scale, b.v_scale);
        assert_ne!(a.q, c.q);
        assert_ne!(a.k, c.k);
    }

    #[test]
    fn quantization_uses_the_full_range_per_head() {
        let x = Inputs::generate(SMALL, Recipe::Gaussian, 0);
        assert_eq!(x.k_scale.len(), 2);
        for head in x.k.chunks(32 * 64) {
            // amax / scale = 448 exactly, so some code in every head is ±448.
            assert!(head.iter().any(|&c| c & 0x7F == 0x7E), "no ±448 code");
            assert!(head.iter().all(|&c| c & 0x7F != 0x7F), "NaN code");
        }
        let deq = x.k_dequantized();
        let amax = deq[..32 * 64].iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!((amax - x.k_scale[0] * 448.0).abs() <= 1e-6 * amax);
    }

    /// The same attention in fp32, to check the fp64 reference against an independent
    /// computation (fp32 accumulation error on these sizes is far below 1e-4).
    fn reference_f32(inputs: &Inputs) -> Vec<f32> {
        let shape = inputs.shape;
        let (s, d) = (shape.S as usize, shape.D as usize);
        let k = inputs.k_dequantized();
        let v = inputs.v_dequantized();
        let mut out = vec![0f32; shape.numel()];
        for row in 0..shape.heads() * s {
            let head = row / s;
            let qi: Vec<f32> = inputs.q[row * d..(row + 1) * d]
                .iter()
                .map(|x| x.to_f32())
                .collect();
            let scores: Vec<f32> = (0..s)
                .map(|j| {
                    let kj = &k[(head * s + j) * d..(head * s + j + 1) * d];
                    qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * shape.softmax_scale()
                })
                .collect();
            let max = scores.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let p: Vec<f32> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f32 = p.iter().sum();
            for (j, pj) in p.iter().enumerate() {
                for c in 0..d {
                    out[row * d + c] += pj * v[(head * s + j) * d + c] / sum;
                }
            }
        }
        out
    }

    #[test]
    fn fp64_reference_agrees_with_an_fp32_computation() {
        let x = Inputs::generate(SMALL, Recipe::Gaussian, 3);
        let r64 = reference_f64(&x);
        let r32 = reference_f32(&x);
        let max_err = r64
            .iter()
            .zip(&r32)
            .map(|(a, &b)| (a - f64::from(b)).abs())
            .fold(0f64, f64::max);
        assert!(max_err < 1e-4, "max |fp64 - fp32| = {max_err}");
        // Outputs are convex combinations of V rows: bounded by V's amax.
        let vmax = x.v_scale.iter().fold(0f32, |m, s| m.max(s * 448.0));
        assert!(r64.iter().all(|o| o.abs() <= f64::from(vmax)));
        assert!(r64.iter().any(|o| o.abs() > 1e-3), "not all zero");
    }

    #[test]
    fn uniform_scores_average_v() {
        // Q = 0 → every score is equal → each output row is the mean of V's rows.
        let mut x = Inputs::generate(SMALL, Recipe::Gaussian, 1);
        x.q.iter_mut().for_each(|q| *q = f16::ZERO);
        let v = x.v_dequantized();
        let out = reference_f64(&x);
        let (s, d) = (32, 64);
        for c in 0..d {
            let mean: f64 = (0..s).map(|j| f64::from(v[j * d + c])).sum::<f64>() / s as f64;
            assert!((out[5 * d + c] - mean).abs() < 1e-12);
        }
    }

    #[test]
    fn dump_writes_every_file_with_the_right_size() {
        let dir = tempfile::tempdir().unwrap();
        let x = Inputs::generate(SMALL, Recipe::Gaussian, 0);
        dump(&x, dir.path()).unwrap();
        let size = |n: &str| std::fs::metadata(dir.path().join(n)).unwrap().len();
        let n = SMALL.numel() as u64;
        assert_eq!(size("q.f16"), 2 * n);
        assert_eq!(size("k.e4m3"), n);
        assert_eq!(size("v.f32"), 4 * n);
        assert_eq!(size("k_scale.f32"), 8);
    }
}
