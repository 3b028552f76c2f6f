//! Correctness of one output against the reference: error statistics and the verdict.
//!
//! Besides the absolute errors, two normalized ones (`docs/guide/correctness.md` says why
//! these and how their thresholds were derived): `rel_l2_err = ‖out − ref‖₂ / ‖ref‖₂` over
//! the whole output, and `max_err_over_ref_std`, the largest |out − ref| over the spread of
//! the reference where the element lies: the standard deviation of its (batch, head), or of
//! its channel within that head (over the rows) where that is wider. Per head because every
//! head has its own FP8 scales: one global spread would let a bug in a small-scale head hide
//! behind a large-scale one. Per channel where wider because a kernel's error in a channel
//! scales with that channel's spread: an outlier channel may err more in absolute terms.

use crate::pipeline::{CorrectnessGates, Precision};

/// Errors of an output against its reference, elementwise `|out - ref|`.
#[derive(Debug, Clone, PartialEq)]
pub struct Accuracy {
    /// Over the finite outputs.
    pub max_abs_err: f64,
    pub mean_abs_err: f64,
    /// Percent of elements with `|err| > threshold` (non-finite outputs count as bad).
    pub pct_bad: f64,
    /// `‖out - ref‖₂ / ‖ref‖₂` over the finite outputs.
    pub rel_l2_err: f64,
    /// The largest `|err| / spread` over the finite outputs (see the module doc).
    pub max_err_over_ref_std: f64,
    pub nan_count: u64,
    pub inf_count: u64,
}

impl Accuracy {
    /// Compare `out` with `reference` (same length, `[heads, rows, channels]` row-major with
    /// `(rows, channels)` = `(S, D)`); `threshold` is the gate's `max_abs_err`.
    pub fn measure(
        out: &[f64],
        reference: &[f64],
        threshold: f64,
        (rows, channels): (usize, usize),
    ) -> Accuracy {
        let head_len = rows * channels;
        assert_eq!(
            out.len(),
            reference.len(),
            "output and reference differ in length"
        );
        assert!(
            head_len > 0 && out.len().is_multiple_of(head_len),
            "the output is not a whole number of heads of {rows}×{channels} elements"
        );
        let (mut max, mut sum, mut bad, mut nan, mut inf) = (0f64, 0f64, 0u64, 0u64, 0u64);
        let (mut diff2, mut ref2, mut finite) = (0f64, 0f64, 0u64);
        let mut worst = 0f64;
        for (o_head, r_head) in out.chunks(head_len).zip(reference.chunks(head_len)) {
            let spreads = Spreads::of(r_head, channels);
            for (i, (&o, &r)) in o_head.iter().zip(r_head).enumerate() {
                if o.is_nan() {
                    nan += 1;
                    bad += 1;
                    continue;
                }
                if o.is_infinite() {
                    inf += 1;
                    bad += 1;
                    continue;
                }
                let err = (o - r).abs();
                max = max.max(err);
                worst = worst.max(err / spreads.at(i % channels));
                sum += err;
                diff2 += err * err;
                ref2 += r * r;
                finite += 1;
                if err > threshold {
                    bad += 1;
                }
            }
        }
        let n = out.len().max(1) as f64;
        Accuracy {
            max_abs_err: max,
            mean_abs_err: if finite > 0 { sum / finite as f64 } else { 0.0 },
            pct_bad: 100.0 * bad as f64 / n,
            rel_l2_err: if ref2 > 0.0 {
                (diff2 / ref2).sqrt()
            } else {
                diff2.sqrt()
            },
            max_err_over_ref_std: worst,
            nan_count: nan,
            inf_count: inf,
        }
    }

    /// Does this pass the gates for a kernel of precision class `precision`? The absolute
    /// gates (`max_abs_err`, `mean_abs_err`, `max_pct_bad`) are in the output's units, set
    /// for the `gaussian` recipe: `absolute` says whether they apply (recipes that rescale
    /// the data are judged by the normalized gates alone). NaN or Inf never passes.
    pub fn passes(&self, gates: &CorrectnessGates, precision: Precision, absolute: bool) -> bool {
        let within_absolute = self.max_abs_err <= gates.max_abs_err
            && self.mean_abs_err <= gates.mean_abs_err
            && self.pct_bad <= gates.max_pct_bad;
        self.nan_count == 0
            && self.inf_count == 0
            && (within_absolute || !absolute)
            && self.max_err_over_ref_std <= gates.max_err_over_ref_std.get(precision)
            && self.rel_l2_err <= gates.max_rel_l2_err.get(precision)
    }
}

/// The spreads one head's errors are judged against: the head's standard deviation
/// (population; its RMS when every element is equal; 1, i.e. absolute, when all are 0), and
/// each channel's over the rows.
struct Spreads {
    head: f64,
    channel: Vec<f64>,
}

impl Spreads {
    fn of(head: &[f64], channels: usize) -> Spreads {
        // Two passes (mean, then deviations): exact enough when the mean dwarfs the spread.
        let std = |values: &[f64]| {
            let n = values.len() as f64;
            let mean = values.iter().sum::<f64>() / n;
            let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
            (
                var.sqrt(),
                (values.iter().map(|v| v * v).sum::<f64>() / n).sqrt(),
            )
        };
        let (sd, rms) = std(head);
        let head_spread = if sd > 0.0 {
            sd
        } else if rms > 0.0 {
            rms
        } else {
            1.0
        };
        let channel = (0..channels)
            .map(|c| {
                let column: Vec<f64> = head.iter().skip(c).step_by(channels).copied().collect();
                std(&column).0
            })
            .collect();
        Spreads {
            head: head_spread,
            channel,
        }
    }

    fn at(&self, channel: usize) -> f64 {
        self.head.max(self.channel[channel])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_output_passes() {
        let r = [0.5, -1.0, 2.0];
        let a = Accuracy::measure(&r, &r, 0.06, (1, 3));
        assert_eq!(a.max_abs_err, 0.0);
        assert_eq!(a.pct_bad, 0.0);
        assert_eq!(a.max_err_over_ref_std, 0.0);
        assert!(a.passes(&CorrectnessGates::default(), Precision::Fp16Pv, true));
    }

    #[test]
    fn errors_are_measured() {
        let r = [1.0, 1.0, 1.0, 1.0];
        let o = [1.0, 1.1, 1.0, 0.98];
        let a = Accuracy::measure(&o, &r, 0.06, (1, 4));
        assert!((a.max_abs_err - 0.1).abs() < 1e-12);
        assert!((a.mean_abs_err - 0.03).abs() < 1e-12);
        assert_eq!(a.pct_bad, 25.0);
        assert!((a.rel_l2_err - (0.01f64 + 0.0004).sqrt() / 2.0).abs() < 1e-12);
        // A constant reference has no spread: its RMS (1) is the scale.
        assert!((a.max_err_over_ref_std - 0.1).abs() < 1e-12);
        assert!(!a.passes(&CorrectnessGates::default(), Precision::Fp16Pv, true));
    }

    #[test]
    fn absolute_gates_apply_only_where_asked() {
        // Outputs of spread 20 (an outlier-channel recipe): an error of 0.1 is 0.005 of the
        // spread, fine for fp16 P·V, but above the absolute 0.06.
        let r: Vec<f64> = (0..64)
            .map(|i| if i % 2 == 0 { 20.0 } else { -20.0 })
            .collect();
        let mut o = r.clone();
        o[3] += 0.1;
        let a = Accuracy::measure(&o, &r, 0.06, (1, 64));
        let g = CorrectnessGates::default();
        assert!(!a.passes(&g, Precision::Fp16Pv, true));
        assert!(a.passes(&g, Precision::Fp16Pv, false));
        o[5] = f64::NAN;
        let b = Accuracy::measure(&o, &r, 0.06, (1, 64));
        assert!(
            !b.passes(&g, Precision::Fp16Pv, false),
            "NaN fails regardless"
        );
    }

    #[test]
    fn the_normalized_error_is_per_head_against_that_heads_spread() {
        // Two heads of 2 rows × 2 channels. Head 0: reference ±1 (std 1), error 0.01.
        // Head 1: reference ±0.001 (std 0.001), error 0.0015 — small in absolute terms,
        // 1.5 times the head's spread.
        let r = [1.0, -1.0, 1.0, -1.0, 0.001, -0.001, 0.001, -0.001];
        let mut o = r;
        o[0] += 0.01;
        o[5] -= 0.0015;
        let a = Accuracy::measure(&o, &r, 0.06, (2, 2));
        assert!((a.max_abs_err - 0.01).abs() < 1e-12);
        assert!((a.max_err_over_ref_std - 1.5).abs() < 1e-9, "{a:?}");
        // One global std (≈0.707) would have called it 0.014 and let it pass.
        let g = CorrectnessGates::default();
        assert!(a.max_abs_err <= g.max_abs_err && a.mean_abs_err <= g.mean_abs_err);
        assert!(!a.passes(&g, Precision::Fp16Pv, true));
        assert!(!a.passes(&g, Precision::Fp8Pv, true));
        // The same head measured alone.
        let alone = Accuracy::measure(&o[4..], &r[4..], 0.06, (2, 2));
        assert!((alone.max_err_over_ref_std - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_wide_channel_is_judged_against_its_own_spread() {
        // 4 rows × 2 channels: channel 0 is ±10 (std 10), channel 1 ±0.1; head std √50.005.
        let r = [10.0, 0.1, -10.0, -0.1, 10.0, 0.1, -10.0, -0.1];
        let head = (50.005f64).sqrt();
        let mut o = r;
        o[2] += 0.5; // channel 0: against its own std, 10
        let a = Accuracy::measure(&o, &r, 0.06, (4, 2));
        assert!((a.max_err_over_ref_std - 0.05).abs() < 1e-12, "{a:?}");
        let mut o = r;
        o[3] += 0.5; // channel 1: narrower than the head, so against the head's std
        let a = Accuracy::measure(&o, &r, 0.06, (4, 2));
        assert!((a.max_err_over_ref_std - 0.5 / head).abs() < 1e-12, "{a:?}");
    }

    #[test]
    fn thresholds_follow_the_precision_class() {
        // Reference std 1; error 0.05: too much for fp16 P·V, fine for FP8 P·V.
        let r: Vec<f64> = (0..64)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let mut o = r.clone();
        o[7] += 0.05;
        let a = Accuracy::measure(&o, &r, 0.06, (1, 64));
        assert!((a.max_err_over_ref_std - 0.05).abs() < 1e-12);
        let g = CorrectnessGates::default();
        assert!(a.max_err_over_ref_std > g.max_err_over_ref_std.get(Precision::Fp16Pv));
        assert!(a.max_err_over_ref_std <= g.max_err_over_ref_std.get(Precision::Fp8Pv));
        assert!(!a.passes(&g, Precision::Fp16Pv, true));
        assert!(a.passes(&g, Precision::Fp8Pv, true));
    }

    #[test]
    fn a_zero_reference_judges_absolute_errors() {
        let a = Accuracy::measure(&[0.0, 0.25], &[0.0, 0.0], 0.06, (1, 2));
        assert_eq!(a.max_err_over_ref_std, 0.25);
    }

    #[test]
    fn nan_never_passes_even_with_loose_gates() {
        let r = [1.0, 1.0];
        let a = Accuracy::measure(&[f64::NAN, 1.0], &r, 0.06, (1, 2));
        assert_eq!(a.nan_count, 1);
        assert_eq!(a.max_abs_err, 0.0);
        let everything = crate::pipeline::PerPrecision {
            fp16_pv: 1e9,
            fp8_pv: 1e9,
        };
        let loose = CorrectnessGates {
            max_abs_err: 1e9,
            mean_abs_err: 1e9,
            max_pct_bad: 100.0,
            max_err_over_ref_std: everything,
            max_rel_l2_err: everything,
        };
        assert!(!a.passes(&loose, Precision::Fp16Pv, false));
        let b = Accuracy::measure(&[f64::INFINITY, 1.0], &r, 0.06, (1, 2));
        assert_eq!((b.inf_count, b.pct_bad), (1, 50.0));
        assert!(!b.passes(&loose, Precision::Fp8Pv, false));
    }
}
