//! Is A faster than B, by how much, and how sure is that: the ratio of the medians of two
//! kernels' timing samples, with a 95% confidence interval from a paired percentile
//! bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, ch. 13).
//!
//! - The ratio is `median(B) / median(A)`: how many times faster A ran than B (below 1:
//!   slower). Medians, as everywhere in repro: one late launch must not move the figure.
//! - The samples are taken interleaved (A, B, B, A, …; `repro compare`), so pair `i` is A's
//!   and B's `i`-th samples, taken back to back: a drift of clocks or temperature moves
//!   both. The bootstrap resamples pairs, not single samples, keeping that pairing.
//! - Each of `resamples` resamples draws `n` pairs with replacement and computes the
//!   ratio of its medians; the interval is the 2.5th and 97.5th percentiles (type 7) of
//!   those ratios. The generator is seeded, so the same samples give the same interval.

use super::percentile_sorted;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Resamples the interval is drawn from by default.
pub const RESAMPLES: usize = 2000;
/// The bootstrap's seed (any fixed value: the interval must not change between runs).
pub const SEED: u64 = 0x5EED;

/// The ratio of medians and its 95% confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// Pairs of samples.
    pub pairs: usize,
    pub median_a: f64,
    pub median_b: f64,
    /// `median_b / median_a`: times faster A is than B.
    pub ratio: f64,
    /// 95% confidence interval of `ratio`.
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub resamples: usize,
}

/// Which side is faster, as far as the interval can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    AFaster,
    BFaster,
    /// The interval contains 1.
    NoDifference,
}

impl Ratio {
    pub fn verdict(&self) -> Verdict {
        if self.ci95_low > 1.0 {
            Verdict::AFaster
        } else if self.ci95_high < 1.0 {
            Verdict::BFaster
        } else {
            Verdict::NoDifference
        }
    }

    /// hyperfine's sentence, fastest first: `A ran 1.092× faster than B (95% CI
    /// 1.088–1.097)`; with the interval inverted when B is the faster one.
    pub fn sentence(&self, a: &str, b: &str) -> String {
        let (fast, slow, r, lo, hi) = if self.ratio >= 1.0 {
            (a, b, self.ratio, self.ci95_low, self.ci95_high)
        } else {
            (
                b,
                a,
                1.0 / self.ratio,
                1.0 / self.ci95_high,
                1.0 / self.ci95_low,
            )
        };
        let line = format!("{fast} ran {r:.3}× faster than {slow} (95% CI {lo:.3}–{hi:.3})");
        match self.verdict() {
            Verdict::NoDifference => {
                format!("no measurable difference: {line}, an interval that contains 1")
            }
            _ => line,
        }
    }
}

/// The ratio of the medians of `b` and `a` (paired: `a[i]` and `b[i]` were taken together)
/// with its bootstrap interval; `None` when they are empty, of different lengths, not
/// finite, or a median is not positive.
pub fn ratio_of_medians(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> Option<Ratio> {
    let n = a.len();
    if n == 0 || b.len() != n || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (median_a, median_b) = (median(&mut a.to_vec()), median(&mut b.to_vec()));
    if median_a <= 0.0 || median_b <= 0.0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut ra, mut rb) = (vec![0.0; n], vec![0.0; n]);
    let mut ratios: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            for k in 0..n {
                let i = rng.random_range(0..n);
                ra[k] = a[i];
                rb[k] = b[i];
            }
            median(&mut rb) / median(&mut ra)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    Some(Ratio {
        pairs: n,
        median_a,
        median_b,
        ratio: median_b / median_a,
        ci95_low: percentile_sorted(&ratios, 0.025),
        ci95_high: percentile_sorted(&ratios, 0.975),
        resamples: ratios.len(),
    })
}

/// The median (type 7, as [`super::summarize`]'s p50) of non-empty `x`, reordering it.
fn median(x: &mut [f64]) -> f64 {
    let n = x.len();
    let (_, &mut hi, _) = x.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return hi;
    }
    let lo = x[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo + hi) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, LogNormal};

    /// `n` samples of a kernel taking `us`, with the right-skewed noise of GPU timings
    /// (log-normal, about 1% spread) and an occasional late launch.
    fn samples(us: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let noise = LogNormal::new(0.0, 0.01).unwrap();
        (0..n)
            .map(|i| {
                let late = if i % 97 == 13 { 1.5 } else { 1.0 };
                us * noise.sample(&mut rng) * late
            })
            .collect()
    }

    #[test]
    fn median_matches_the_summary_p50() {
        for x in [vec![3.0, 1.0, 2.0], vec![4.0, 1.0, 3.0, 2.0], vec![7.0]] {
            let p50 = crate::stats::summarize(&x).unwrap().p50;
            assert_eq!(median(&mut x.clone()), p50, "{x:?}");
        }
    }

    #[test]
    fn a_ten_percent_faster_kernel_is_found_with_a_tight_interval() {
        let a = samples(22.0, 500, 1);
        let b = samples(24.2, 500, 2);
        let r = ratio_of_medians(&a, &b, RESAMPLES, SEED).unwrap();
        assert!((r.ratio - 1.1).abs() < 0.005, "{r:?}");
        assert!(r.ci95_low < r.ratio && r.ratio < r.ci95_high, "{r:?}");
        assert!(r.ci95_low > 1.09 && r.ci95_high < 1.11, "{r:?}");
        assert_eq!(r.verdict(), Verdict::AFaster);
        assert!(
            r.sentence("ws-p1", "base").starts_with("ws-p1 ran 1.1")
                && r.sentence("ws-p1", "base")
                    .contains("faster than base (95% CI 1.09"),
            "{}",
            r.sentence("ws-p1", "base")
        );
        // The other way round: B is the faster one, and the sentence says so.
        let r = ratio_of_medians(&b, &a, RESAMPLES, SEED).unwrap();
        assert_eq!(r.verdict(), Verdict::BFaster);
        assert!(
            r.sentence("base", "ws-p1").starts_with("ws-p1 ran 1.1"),
            "{}",
            r.sentence("base", "ws-p1")
        );
    }

    #[test]
    fn the_same_kernel_twice_shows_no_difference() {
        let a = samples(22.0, 400, 3);
        let b = samples(22.0, 400, 4);
        let r = ratio_of_medians(&a, &b, RESAMPLES, SEED).unwrap();
        assert_eq!(r.verdict(), Verdict::NoDifference, "{r:?}");
        assert!(r.sentence("a", "b").starts_with("no measurable difference"));
    }

    #[test]
    fn pairing_cancels_a_drift_both_sides_share() {
        // Clocks ramp down by 20% over the run: each pair sees the same drift.
        let drift = |v: Vec<f64>| -> Vec<f64> {
            let n = v.len() as f64;
            v.iter()
                .enumerate()
                .map(|(i, x)| x * (1.0 + 0.2 * i as f64 / n))
                .collect()
        };
        let a = drift(samples(20.0, 400, 5));
        let b = drift(samples(21.0, 400, 6));
        let r = ratio_of_medians(&a, &b, RESAMPLES, SEED).unwrap();
        assert!((r.ratio - 1.05).abs() < 0.01, "{r:?}");
        assert_eq!(r.verdict(), Verdict::AFaster, "{r:?}");
    }

    #[test]
    fn the_interval_covers_the_true_ratio_about_95_percent_of_the_time() {
        let runs = 80;
        let covered = (0..runs)
            .filter(|&k| {
                let a = samples(10.0, 120, 100 + 2 * k);
                let b = samples(10.5, 120, 101 + 2 * k);
                let r = ratio_of_medians(&a, &b, 400, SEED).unwrap();
                r.ci95_low <= 1.05 && 1.05 <= r.ci95_high
            })
            .count();
        // Binomial(80, 0.95): fewer than 70 happens with probability below 1%.
        assert!(covered >= 70, "covered {covered} of {runs}");
    }

    #[test]
    fn the_same_samples_give_the_same_interval() {
        let (a, b) = (samples(5.0, 100, 7), samples(5.2, 100, 8));
        assert_eq!(
            ratio_of_medians(&a, &b, 500, SEED),
            ratio_of_medians(&a, &b, 500, SEED)
        );
    }

    #[test]
    fn unusable_samples_give_no_ratio() {
        assert!(ratio_of_medians(&[], &[], 10, SEED).is_none());
        assert!(ratio_of_medians(&[1.0, 2.0], &[1.0], 10, SEED).is_none());
        assert!(ratio_of_medians(&[1.0, f64::NAN], &[1.0, 1.0], 10, SEED).is_none());
        assert!(ratio_of_medians(&[0.0], &[1.0], 10, SEED).is_none());
    }
}
