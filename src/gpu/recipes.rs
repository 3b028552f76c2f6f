//! Input recipes: how one (shape, seed)'s Q, K and V are drawn before K and V are quantized
//! to E4M3 (`workload`). Every recipe starts from the same ChaCha20 stream as `gaussian`
//! (Q, K, V standard normal, in that order) and draws what it adds after that, so the same
//! (shape, recipe, seed) gives the same values everywhere. What each recipe is for, and the
//! bug it is meant to expose, is in `docs/guide/correctness.md`.

use crate::pipeline::{Recipe, Shape};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::StandardNormal;

/// Q, K and V before quantization, `[B, H, S, D]` each.
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

pub fn draw(shape: Shape, recipe: Recipe, seed: u64) -> Drawn {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = shape.numel();
    let q = normals(&mut rng, n);
    let k = normals(&mut rng, n);
    let v = normals(&mut rng, n);
    let mut x = Drawn { q, k, v };
    let heads = Heads::of(shape);
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
    (0..n)
        .map(|_| rng.sample::<f32, _>(StandardNormal))
        .collect()
}

/// The geometry recipes work in: `count` heads of `s` rows of `d` channels.
struct Heads {
    count: usize,
    s: usize,
    d: usize,
}

impl Heads {
    fn of(shape: Shape) -> Heads {
        Heads {
            count: shape.heads(),
            s: shape.S as usize,
            d: shape.D as usize,
        }
    }
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
    use crate::gpu::workload::{reference_f64, Inputs};

    const SHAPE: Shape = Shape {
        B: 1,
        H: 2,
        S: 100,
        D: 64,
    };

    fn logits(x: &Inputs, head: usize, row: usize) -> Vec<f64> {
        let (s, d) = (x.shape.S as usize, x.shape.D as usize);
        let k = x.k_dequantized();
        let q = &x.q[(head * s + row) * d..(head * s + row + 1) * d];
        (0..s)
            .map(|j| {
                let kj = &k[(head * s + j) * d..(head * s + j + 1) * d];
                let dot: f64 = q
                    .iter()
                    .zip(kj)
                    .map(|(a, b)| a.to_f64() * f64::from(*b))
                    .sum();
                dot * f64::from(x.shape.softmax_scale())
            })
            .collect()
    }

    #[test]
    fn every_recipe_is_deterministic_and_gaussian_is_the_plain_stream() {
        for r in Recipe::ALL {
            let (a, b) = (draw(SHAPE, r, 5), draw(SHAPE, r, 5));
            assert_eq!((&a.q, &a.k, &a.v), (&b.q, &b.k, &b.v), "{r}");
            assert_ne!(draw(SHAPE, r, 6).q, a.q, "{r}: the seed matters");
        }
        // gaussian is exactly the first 3·n normals of the stream, as before recipes.
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let n = SHAPE.numel();
        let g = draw(SHAPE, Recipe::Gaussian, 5);
        assert_eq!(g.q, normals(&mut rng, n));
        assert_eq!(g.k, normals(&mut rng, n));
        assert_eq!(g.v, normals(&mut rng, n));
        for r in &Recipe::ALL[1..] {
            let x = draw(SHAPE, *r, 5);
            assert!(
                x.q != g.q || x.k != g.k || x.v != g.v,
                "{r} changes nothing"
            );
        }
    }

    #[test]
    fn outliers_are_a_few_large_channels() {
        let x = draw(SHAPE, Recipe::Outliers, 0);
        let d = SHAPE.D as usize;
        let head0 = &x.v[..SHAPE.S as usize * d];
        let rms =
            |c: usize| (head0.chunks(d).map(|r| r[c] * r[c]).sum::<f32>() / SHAPE.S as f32).sqrt();
        let large = (0..d).filter(|&c| rms(c) > 8.0).count();
        assert_eq!(large, OUTLIER_CHANNELS);
    }

    #[test]
    fn sharp_logits_are_spread_and_far_below_zero() {
        let x = Inputs::generate(SHAPE, Recipe::Sharp, 0);
        let l = logits(&x, 1, 7);
        let max = l.iter().cloned().fold(f64::MIN, f64::max);
        let mean = l.iter().sum::<f64>() / l.len() as f64;
        let std = (l.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / l.len() as f64).sqrt();
        assert!(max < -10.0, "max logit {max}");
        assert!(std > 3.0, "logit std {std}");
    }

    #[test]
    fn sink_keys_take_almost_all_the_weight() {
        let x = Inputs::generate(SHAPE, Recipe::Sink, 0);
        let s = SHAPE.S as usize;
        let mut dominated = 0;
        for row in 0..s {
            let l = logits(&x, 0, row);
            let max = l.iter().cloned().fold(f64::MIN, f64::max);
            let w: Vec<f64> = l.iter().map(|v| (v - max).exp()).collect();
            let share = (w[0] + w[s - 1]) / w.iter().sum::<f64>();
            if share > 0.99 {
                dominated += 1;
            }
        }
        assert!(dominated >= s * 9 / 10, "{dominated} of {s} rows");
    }

    #[test]
    fn e4m3_edge_codes_reach_both_ends_and_scales_spread() {
        let shape = Shape {
            B: 2,
            H: 8,
            S: 64,
            D: 64,
        };
        let x = Inputs::generate(shape, Recipe::E4m3Edge, 0);
        let near_max = x.k.iter().filter(|&&c| c & 0x7F >= 0x7C).count(); // ≥ 384
        let subnormal =
            x.k.iter()
                .filter(|&&c| c & 0x78 == 0 && c & 0x07 != 0)
                .count();
        let n = x.k.len();
        assert!(near_max > n / 20, "{near_max} of {n} codes near ±448");
        assert!(subnormal > n / 20, "{subnormal} of {n} subnormal codes");
        let (lo, hi) = x
            .v_scale
            .iter()
            .fold((f32::MAX, 0f32), |(lo, hi), &s| (lo.min(s), hi.max(s)));
        assert!(hi / lo > 16.0, "v_scale spans only {lo}..{hi}");
        // Outputs stay well inside fp16.
        assert!(reference_f64(&x).iter().all(|o| o.abs() < 1e3));
    }
}
