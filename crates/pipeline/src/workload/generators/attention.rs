//! The `attention` generator: Q, K and V of an attention workload (`[..., S, D]` each,
//! every leading index one head), drawn together by an input recipe before the workload
//! quantizes what it declares. Every recipe starts from the same ChaCha20 stream as
//! `gaussian` (Q, K, V standard normal, in that order) and draws what it adds after that,
//! so the same (extents, recipe, seed) gives the same values everywhere. What each recipe
//! is for, and the bug it is meant to expose, is in `docs/guide/correctness.md`.

use crate::workload::keystream;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// How one case's Q, K and V are drawn.
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
    /// Values whose FP8 codes sit at both ends of the range (near the largest and
    /// subnormal), per-head magnitudes spread over orders of magnitude.
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

/// Q, K and V before quantization, each `heads × s × d`.
pub struct Drawn {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// Outlier channels per head in K and in V, and how much larger they are.
const OUTLIER_CHANNELS: usize = 4;
const K_OUTLIER_GAIN: f32 = 10.0;
const V_OUTLIER_GAIN: f32 = 20.0;
/// `sharp`: Q's spread, and the shared direction that puts every logit near −32.
const SHARP_Q_GAIN: f32 = 4.0;
const SHARP_OFFSET: f32 = 16.0;
/// `sink`: the shared query component and the sink keys' length along it.
const SINK_QUERY: f32 = 4.0;
const SINK_KEY: f32 = 32.0;
/// `e4m3-edge`: per-head magnitudes 2^[-6, 4].
const EDGE_LOG2_MAG: (f32, f32) = (-6.0, 4.0);

/// Q, K and V of `heads` heads of `s` rows of `d` channels.
pub fn draw(heads: usize, s: usize, d: usize, recipe: Recipe, seed: u64) -> Drawn {
    let n = heads * s * d;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let q = normals(&mut rng, n);
    let k = normals(&mut rng, n);
    let v = normals(&mut rng, n);
    let mut x = Drawn { q, k, v };
    let heads = Heads { count: heads, s, d };
    match recipe {
        Recipe::Gaussian => {}
        Recipe::Outliers => outliers(&mut rng, &heads, &mut x),
        Recipe::Sharp => sharp(&mut rng, &heads, &mut x),
        Recipe::Sink => sink(&mut rng, &heads, &mut x),
        Recipe::E4m3Edge => e4m3_edge(&mut rng, &heads, &mut x),
    }
    x
}

fn normals(rng: &mut ChaCha20Rng, n: usize) -> Vec<f32> {
    keystream::normals(rng, n)
        .into_par_iter()
        .map(|x| x as f32)
        .collect()
}

/// The geometry recipes work in: `count` heads of `s` rows of `d` channels.
struct Heads {
    count: usize,
    s: usize,
    d: usize,
}

impl Heads {
    /// Element range of head `h`.
    fn range(&self, h: usize) -> std::ops::Range<usize> {
        h * self.s * self.d..(h + 1) * self.s * self.d
    }
}

/// A random unit vector of `d` channels.
fn unit(rng: &mut ChaCha20Rng, d: usize) -> Vec<f32> {
    let u = normals(rng, d);
    let norm = u.iter().map(|x| x * x).sum::<f32>().sqrt();
    u.into_iter().map(|x| x / norm).collect()
}

/// `count` distinct channels of `d`, by a partial Fisher–Yates shuffle.
fn channels(rng: &mut ChaCha20Rng, d: usize, count: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..d).collect();
    for i in 0..count.min(d) {
        let j = rng.random_range(i..d);
        all.swap(i, j);
    }
    all.truncate(count.min(d));
    all
}

/// A few channels of K and V, per head, `K_OUTLIER_GAIN`/`V_OUTLIER_GAIN` times larger
/// (as LLM activations have): the quantization scale follows the outliers, so the other
/// channels use few E4M3 codes, and outlier V channels dominate the output's spread.
fn outliers(rng: &mut ChaCha20Rng, heads: &Heads, x: &mut Drawn) {
    for h in 0..heads.count {
        for (tensor, gain) in [(&mut x.k, K_OUTLIER_GAIN), (&mut x.v, V_OUTLIER_GAIN)] {
            let picked = channels(rng, heads.d, OUTLIER_CHANNELS);
            for row in tensor[heads.range(h)].chunks_mut(heads.d) {
                for &c in &picked {
                    row[c] *= gain;
                }
            }
        }
    }
}

/// Logits with a spread of about 4.5 (a few keys take each row) and all of them near −32:
/// `Q = 4·g + 16·u`, `K = g' − 16·u` for a unit `u` per head. Softmax does not care about
/// the offset; a kernel that lets a masked column in with score 0, or starts its running
/// max at 0 instead of −∞, does.
fn sharp(rng: &mut ChaCha20Rng, heads: &Heads, x: &mut Drawn) {
    for h in 0..heads.count {
        let u = unit(rng, heads.d);
        for row in x.q[heads.range(h)].chunks_mut(heads.d) {
            for (qc, uc) in row.iter_mut().zip(&u) {
                *qc = SHARP_Q_GAIN * *qc + SHARP_OFFSET * uc;
            }
        }
        for row in x.k[heads.range(h)].chunks_mut(heads.d) {
            for (kc, uc) in row.iter_mut().zip(&u) {
                *kc -= SHARP_OFFSET * uc;
            }
        }
    }
}

/// Attention sinks: every query shares a component `4·u` and the first and the last key lie
/// along it (`32·u` plus their own noise), so in almost every row those two keys take
/// nearly all the weight (logit ≈ 16 ± 4 against ≈ 0 ± 1.1). The last key sits in the
/// last, possibly partial, tile: a tail-mask bug or a skipped last tile loses the row's mass,
/// and the running max jumps at the end, so a skipped rescale shows.
fn sink(rng: &mut ChaCha20Rng, heads: &Heads, x: &mut Drawn) {
    for h in 0..heads.count {
        let u = unit(rng, heads.d);
        for row in x.q[heads.range(h)].chunks_mut(heads.d) {
            for (qc, uc) in row.iter_mut().zip(&u) {
                *qc += SINK_QUERY * uc;
            }
        }
        let head = &mut x.k[heads.range(h)];
        for j in [0, heads.s - 1] {
            for (kc, uc) in head[j * heads.d..(j + 1) * heads.d].iter_mut().zip(&u) {
                *kc += SINK_KEY * uc;
            }
        }
    }
}

/// K and V whose E4M3 codes sit at both ends of the range, with per-head magnitudes spread
/// over 2^-6..2^4 (so `k_scale`/`v_scale` differ by orders of magnitude across heads): per
/// element, 1 in 8 is `±(0.9..1)·A` (codes near ±448), 1 in 2 is `N(0,1)·A·2^-17` (E4M3
/// subnormals and zeros after scaling by `amax/448`), the rest `N(0,1)·A/4`.
fn e4m3_edge(rng: &mut ChaCha20Rng, heads: &Heads, x: &mut Drawn) {
    for h in 0..heads.count {
        for tensor in [&mut x.k, &mut x.v] {
            let log2 = rng.random_range(EDGE_LOG2_MAG.0..=EDGE_LOG2_MAG.1);
            let a = 2f32.powf(log2);
            for g in tensor[heads.range(h)].iter_mut() {
                let pick: u32 = rng.random_range(0..8);
                *g = match pick {
                    0 => a * rng.random_range(0.9f32..=1.0) * g.signum(),
                    1..=4 => *g * a * 2f32.powi(-17),
                    _ => *g * a / 4.0,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::exprs::Compiled;
    use crate::workload::testing::attention;
    use crate::{workload::inputs::ArgData, workload::inputs::Case};
    use rand_distr::StandardNormal;

    const HEADS: usize = 2;
    const S: usize = 100;
    const D: usize = 64;

    /// Row `row` of head `head`'s logits `q·k / √d`, from the values as drawn.
    fn logits(x: &Drawn, head: usize, row: usize) -> Vec<f64> {
        let q = &x.q[(head * S + row) * D..(head * S + row + 1) * D];
        (0..S)
            .map(|j| {
                let kj = &x.k[(head * S + j) * D..(head * S + j + 1) * D];
                let dot: f64 = q.iter().zip(kj).map(|(a, b)| f64::from(a * b)).sum();
                dot / (D as f64).sqrt()
            })
            .collect()
    }

    #[test]
    fn every_recipe_is_deterministic_and_gaussian_is_the_plain_stream() {
        for r in Recipe::ALL {
            let (a, b) = (draw(HEADS, S, D, r, 5), draw(HEADS, S, D, r, 5));
            assert_eq!((&a.q, &a.k, &a.v), (&b.q, &b.k, &b.v), "{r}");
            assert_ne!(draw(HEADS, S, D, r, 6).q, a.q, "{r}: the seed matters");
        }
        // gaussian is exactly the first 3·n normals of the stream, drawn one by one on one
        // core, as before recipes.
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let n = HEADS * S * D;
        let mut plain = |n| -> Vec<f32> { (0..n).map(|_| rng.sample(StandardNormal)).collect() };
        let g = draw(HEADS, S, D, Recipe::Gaussian, 5);
        assert_eq!((&g.q, &g.k, &g.v), (&plain(n), &plain(n), &plain(n)));
        for r in &Recipe::ALL[1..] {
            let x = draw(HEADS, S, D, *r, 5);
            assert!(
                x.q != g.q || x.k != g.k || x.v != g.v,
                "{r} changes nothing"
            );
        }
    }

    #[test]
    fn outliers_are_a_few_large_channels() {
        let x = draw(HEADS, S, D, Recipe::Outliers, 0);
        let head0 = &x.v[..S * D];
        let rms = |c: usize| (head0.chunks(D).map(|r| r[c] * r[c]).sum::<f32>() / S as f32).sqrt();
        let large = (0..D).filter(|&c| rms(c) > 8.0).count();
        assert_eq!(large, OUTLIER_CHANNELS);
    }

    #[test]
    fn sharp_logits_are_spread_and_far_below_zero() {
        let x = draw(HEADS, S, D, Recipe::Sharp, 0);
        let l = logits(&x, 1, 7);
        let max = l.iter().cloned().fold(f64::MIN, f64::max);
        let mean = l.iter().sum::<f64>() / l.len() as f64;
        let std = (l.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / l.len() as f64).sqrt();
        assert!(max < -10.0, "max logit {max}");
        assert!(std > 3.0, "logit std {std}");
    }

    #[test]
    fn sink_keys_take_almost_all_the_weight() {
        let x = draw(HEADS, S, D, Recipe::Sink, 0);
        let mut dominated = 0;
        for row in 0..S {
            let l = logits(&x, 0, row);
            let max = l.iter().cloned().fold(f64::MIN, f64::max);
            let w: Vec<f64> = l.iter().map(|v| (v - max).exp()).collect();
            let share = (w[0] + w[S - 1]) / w.iter().sum::<f64>();
            if share > 0.99 {
                dominated += 1;
            }
        }
        assert!(dominated >= S * 9 / 10, "{dominated} of {S} rows");
    }

    /// Attention in f64 over `heads` heads of `s × d` (q, k, v row-major): the CPU
    /// reference the tests check outputs' range with.
    fn attention_f64(q: &[f64], k: &[f64], v: &[f64], s: usize, d: usize) -> Vec<f64> {
        let scale = 1.0 / (d as f64).sqrt();
        let mut out = vec![0f64; q.len()];
        for (row, o) in out.chunks_mut(d).enumerate() {
            let head = row / s;
            let qi = &q[row * d..(row + 1) * d];
            let scores: Vec<f64> = (0..s)
                .map(|j| {
                    let kj = &k[(head * s + j) * d..(head * s + j + 1) * d];
                    qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>() * scale
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = p.iter().sum();
            for (j, pj) in p.iter().enumerate() {
                let vj = &v[(head * s + j) * d..(head * s + j + 1) * d];
                for (oc, vc) in o.iter_mut().zip(vj) {
                    *oc += pj * vc / sum;
                }
            }
        }
        out
    }

    #[test]
    fn e4m3_edge_codes_reach_both_ends_and_scales_spread() {
        let mut decl = attention();
        decl.shapes["small"] = [("B", 2), ("H", 8), ("S", 64), ("D", 64)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let c = Compiled::new("attention", &decl, &[]).unwrap();
        let x = Case::generate(&c, "small", "e4m3-edge", 0).unwrap();
        let ArgData::Input { bytes: k, .. } = &x.args[1] else {
            panic!("k is an input")
        };
        let near_max = k.iter().filter(|&&c| c & 0x7F >= 0x7C).count(); // ≥ 384
        let subnormal = k
            .iter()
            .filter(|&&c| c & 0x78 == 0 && c & 0x07 != 0)
            .count();
        let n = k.len();
        assert!(near_max > n / 20, "{near_max} of {n} codes near ±448");
        assert!(subnormal > n / 20, "{subnormal} of {n} subnormal codes");
        let v_scale = x.values(&decl, 4);
        let (lo, hi) = v_scale
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        assert!(hi / lo > 16.0, "v_scale spans only {lo}..{hi}");
        // Outputs stay well inside fp16.
        let out = attention_f64(
            &x.values(&decl, 0),
            &x.values(&decl, 1),
            &x.values(&decl, 2),
            64,
            64,
        );
        assert!(out.iter().all(|o| o.abs() < 1e3));
    }
}
