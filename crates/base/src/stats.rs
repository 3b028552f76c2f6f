//! Summary statistics of timing samples. Pure functions; the baseline scripts
//! (`kernels/baselines/`) implement the same definitions.
//!
//! - Percentiles use linear interpolation between closest ranks (Hyndman & Fan type 7,
//!   numpy's default): for sorted `x[0..n]`, `p` maps to rank `h = (n-1)·p` and the value
//!   `x[⌊h⌋] + (h-⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋])`.
//! - `std` is the sample standard deviation (n-1 denominator); `cv = std / mean`.
//! - The 95% CI of the median is distribution-free, from order statistics: the ranks
//!   `j = ⌊n/2 - 1.96·√n/2⌋` and `k = ⌈n/2 + 1.96·√n/2⌉` (1-based, clamped to `1..=n`)
//!   of the binomial(n, ½) normal approximation; `ci95_half_width = (x_k - x_j) / 2`.
//!
//! [`ratio`] compares two kernels: the ratio of their medians with a bootstrap interval.

pub mod ratio;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// Lower and upper bound of the 95% confidence interval of the median.
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub cv: f64,
}

impl Summary {
    /// Half the width of the median's 95% CI.
    pub fn ci95_half_width(&self) -> f64 {
        (self.ci95_high - self.ci95_low) / 2.0
    }
}

/// Summarize `samples`; `None` when there are none or any is not finite.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut x = samples.to_vec();
    x.sort_by(f64::total_cmp);
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n as f64;
    let std = if n > 1 {
        (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let (lo, hi) = median_ci_ranks(n);
    Some(Summary {
        n,
        p50: percentile_sorted(&x, 0.50),
        p90: percentile_sorted(&x, 0.90),
        p99: percentile_sorted(&x, 0.99),
        mean,
        std,
        min: x[0],
        max: x[n - 1],
        ci95_low: x[lo - 1],
        ci95_high: x[hi - 1],
        cv: if mean > 0.0 { std / mean } else { 0.0 },
    })
}

/// Type-7 percentile of sorted, non-empty data; `p` in `[0, 1]`.
pub fn percentile_sorted(x: &[f64], p: f64) -> f64 {
    let h = (x.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let i = h.floor() as usize;
    let frac = h - i as f64;
    match x.get(i + 1) {
        Some(next) => x[i] + frac * (next - x[i]),
        None => x[i],
    }
}

/// 1-based ranks bounding the median's 95% CI for `n` samples.
pub fn median_ci_ranks(n: usize) -> (usize, usize) {
    let half = n as f64 / 2.0;
    let spread = 1.96 * (n as f64).sqrt() / 2.0;
    let j = ((half - spread).floor() as i64).clamp(1, n as i64) as usize;
    let k = ((half + spread).ceil() as i64).clamp(1, n as i64) as usize;
    (j, k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 40 per-launch times (µs) shaped like a µs-scale kernel's: steady, with two outliers.
    const RECORDED: [f64; 40] = [
        12.41, 12.38, 12.44, 12.40, 12.39, 12.47, 12.36, 12.42, 12.40, 12.43, 12.38, 12.41, 12.90,
        12.39, 12.40, 12.42, 12.37, 12.41, 12.44, 12.40, 12.39, 12.38, 12.41, 12.45, 12.40, 12.42,
        12.39, 12.41, 12.40, 12.43, 12.38, 12.40, 13.85, 12.41, 12.39, 12.42, 12.40, 12.38, 12.41,
        12.40,
    ];

    #[test]
    fn percentiles_follow_type_7() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile_sorted(&x, 0.5), 3.0);
        assert_eq!(percentile_sorted(&x, 0.9), 4.6);
        assert!((percentile_sorted(&x, 0.99) - 4.96).abs() < 1e-12);
        assert_eq!(percentile_sorted(&x, 0.0), 1.0);
        assert_eq!(percentile_sorted(&x, 1.0), 5.0);
        assert_eq!(percentile_sorted(&[7.0], 0.9), 7.0);
        assert_eq!(percentile_sorted(&[1.0, 2.0], 0.5), 1.5);
    }

    #[test]
    fn summary_of_recorded_samples() {
        let s = summarize(&RECORDED).unwrap();
        assert_eq!(s.n, 40);
        assert!((s.p50 - 12.40).abs() < 1e-9, "{}", s.p50);
        assert_eq!(s.min, 12.36);
        assert_eq!(s.max, 13.85);
        // Two outliers pull the mean above the median and make the tail long.
        assert!(s.mean > s.p50);
        assert!(s.p99 > 13.0 && s.p90 < 12.5, "p90 {} p99 {}", s.p90, s.p99);
        assert!(s.ci95_low <= s.p50 && s.p50 <= s.ci95_high);
        assert!(s.ci95_half_width() < 0.02, "{}", s.ci95_half_width());
        assert!((s.cv - s.std / s.mean).abs() < 1e-15);
        assert!(s.cv > 0.01 && s.cv < 0.03, "{}", s.cv);
    }

    #[test]
    fn sample_std_uses_n_minus_1() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.mean, 5.0);
        assert!((s.std - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn median_ci_ranks_match_the_binomial_table() {
        // Normal approximation to binomial(n, 1/2): n = 100 → ranks 40 and 60.
        assert_eq!(median_ci_ranks(100), (40, 60));
        assert_eq!(median_ci_ranks(10), (1, 9));
        assert_eq!(median_ci_ranks(1), (1, 1));
        let (j, k) = median_ci_ranks(1000);
        assert_eq!((j, k), (469, 531));
    }

    #[test]
    fn empty_or_non_finite_has_no_summary() {
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
        let one = summarize(&[3.0]).unwrap();
        assert_eq!((one.p50, one.std, one.cv), (3.0, 0.0, 0.0));
    }
}
