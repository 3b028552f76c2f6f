//! Correctness of one output against the reference: error statistics and the verdict.

use crate::pipeline::CorrectnessGates;

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
    pub nan_count: u64,
    pub inf_count: u64,
}

impl Accuracy {
    /// Compare `out` with `reference` (same length); `threshold` is the gate's `max_abs_err`.
    pub fn measure(out: &[f64], reference: &[f64], threshold: f64) -> Accuracy {
        assert_eq!(
            out.len(),
            reference.len(),
            "output and reference differ in length"
        );
        let (mut max, mut sum, mut bad, mut nan, mut inf) = (0f64, 0f64, 0u64, 0u64, 0u64);
        let (mut diff2, mut ref2, mut finite) = (0f64, 0f64, 0u64);
        for (&o, &r) in out.iter().zip(reference) {
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
            sum += err;
            diff2 += err * err;
            ref2 += r * r;
            finite += 1;
            if err > threshold {
                bad += 1;
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
            nan_count: nan,
            inf_count: inf,
        }
    }

    /// Does this pass the gates? NaN or Inf never passes.
    pub fn passes(&self, gates: &CorrectnessGates) -> bool {
        self.nan_count == 0
            && self.inf_count == 0
            && self.max_abs_err <= gates.max_abs_err
            && self.mean_abs_err <= gates.mean_abs_err
            && self.pct_bad <= gates.max_pct_bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_output_passes() {
        let r = [0.5, -1.0, 2.0];
        let a = Accuracy::measure(&r, &r, 0.06);
        assert_eq!(a.max_abs_err, 0.0);
        assert_eq!(a.pct_bad, 0.0);
        assert!(a.passes(&CorrectnessGates::default()));
    }

    #[test]
    fn errors_are_measured() {
        let r = [1.0, 1.0, 1.0, 1.0];
        let o = [1.0, 1.1, 1.0, 0.98];
        let a = Accuracy::measure(&o, &r, 0.06);
        assert!((a.max_abs_err - 0.1).abs() < 1e-12);
        assert!((a.mean_abs_err - 0.03).abs() < 1e-12);
        assert_eq!(a.pct_bad, 25.0);
        assert!((a.rel_l2_err - (0.01f64 + 0.0004).sqrt() / 2.0).abs() < 1e-12);
        assert!(!a.passes(&CorrectnessGates::default()));
    }

    #[test]
    fn nan_never_passes_even_with_loose_gates() {
        let r = [1.0, 1.0];
        let a = Accuracy::measure(&[f64::NAN, 1.0], &r, 0.06);
        assert_eq!(a.nan_count, 1);
        assert_eq!(a.max_abs_err, 0.0);
        let loose = CorrectnessGates {
            max_abs_err: 1e9,
            mean_abs_err: 1e9,
            max_pct_bad: 100.0,
        };
        assert!(!a.passes(&loose));
        let b = Accuracy::measure(&[f64::INFINITY, 1.0], &r, 0.06);
        assert_eq!((b.inf_count, b.pct_bad), (1, 50.0));
        assert!(!b.passes(&loose));
    }
}
