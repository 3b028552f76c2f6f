//! Error statistics of one output against the reference (`crate::workload::compare`
//! judges them against the output's gates).
//!
//! Besides the absolute errors, two normalized ones (`docs/guide/correctness.md` says why
//! these and how their thresholds were derived): `rel_l2_err = ‖out − ref‖₂ / ‖ref‖₂` over
//! the whole output, and `max_err_over_ref_std`, the largest |out − ref| over the spread of
//! the reference where the element lies: the standard deviation of its group (the output's
//! trailing `spread_dims` dimensions: for attention one (batch, head)), or of its channel
//! within that group (over the rows) where that is wider. Per group because each may have
//! its own scale (FP8 scales per head): one global spread would let a bug in a small-scale
//! group hide behind a large-scale one. Per channel where wider because a kernel's error in
//! a channel scales with that channel's spread: an outlier channel may err more in absolute
//! terms.

use rayon::prelude::*;

/// Errors of an output against its reference, elementwise `|out - ref|`.
#[derive(Debug, Clone, PartialEq)]
pub struct Accuracy {
    /// Over the finite outputs; NaN where a reference value is not finite (its error cannot
    /// be measured).
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
    /// Compare `out` with `reference` (same length, `[groups, rows, channels]` row-major with
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
            "the output is not a whole number of groups of {rows}×{channels} elements"
        );
        let mut total = Tally::default();
        for (o_head, r_head) in out.chunks(head_len).zip(reference.chunks(head_len)) {
            let spreads = Spreads::of(r_head, channels).per_channel();
            let pieces: Vec<Tally> = pieces(o_head.len())
                .map(|range| {
                    let mut t = Tally::default();
                    let mut c = range.start % channels;
                    for (&o, &r) in o_head[range.clone()].iter().zip(&r_head[range]) {
                        t.add(o, r, spreads[c], threshold);
                        c = if c + 1 == channels { 0 } else { c + 1 };
                    }
                    t
                })
                .collect();
            pieces.into_iter().for_each(|t| total.merge(t));
        }
        total.accuracy(out.len())
    }
}

/// Elements per piece of a pass run in parallel. Pieces are cut at fixed places and their
/// sums added in order, so every figure is the same whatever the number of threads.
const PIECE: usize = 1 << 15;

/// `0..len` cut into [`PIECE`]-long ranges, one per parallel task, in order.
fn pieces(len: usize) -> impl IndexedParallelIterator<Item = std::ops::Range<usize>> {
    pieces_of(len, PIECE)
}

/// `0..len` cut into `piece`-long ranges, in order.
fn pieces_of(
    len: usize,
    piece: usize,
) -> impl IndexedParallelIterator<Item = std::ops::Range<usize>> {
    (0..len.div_ceil(piece))
        .into_par_iter()
        .map(move |k| k * piece..((k + 1) * piece).min(len))
}

/// The running sums behind [`Accuracy`], of one piece or of everything so far.
#[derive(Default)]
struct Tally {
    max: f64,
    sum: f64,
    diff2: f64,
    ref2: f64,
    worst: f64,
    finite: u64,
    bad: u64,
    nan: u64,
    inf: u64,
}

impl Tally {
    fn add(&mut self, o: f64, r: f64, spread: f64, threshold: f64) {
        if o.is_nan() || o.is_infinite() {
            if o.is_nan() {
                self.nan += 1;
            } else {
                self.inf += 1;
            }
            self.bad += 1;
            return;
        }
        let err = (o - r).abs();
        self.max = larger(self.max, err);
        self.worst = larger(self.worst, err / spread);
        self.sum += err;
        self.diff2 += err * err;
        self.ref2 += r * r;
        self.finite += 1;
        if err > threshold {
            self.bad += 1;
        }
    }

    fn merge(&mut self, t: Tally) {
        self.max = larger(self.max, t.max);
        self.worst = larger(self.worst, t.worst);
        self.sum += t.sum;
        self.diff2 += t.diff2;
        self.ref2 += t.ref2;
        self.finite += t.finite;
        self.bad += t.bad;
        self.nan += t.nan;
        self.inf += t.inf;
    }

    fn accuracy(self, len: usize) -> Accuracy {
        let n = len.max(1) as f64;
        Accuracy {
            max_abs_err: self.max,
            mean_abs_err: if self.finite > 0 {
                self.sum / self.finite as f64
            } else {
                0.0
            },
            pct_bad: 100.0 * self.bad as f64 / n,
            rel_l2_err: if self.ref2 > 0.0 {
                (self.diff2 / self.ref2).sqrt()
            } else {
                self.diff2.sqrt()
            },
            max_err_over_ref_std: self.worst,
            nan_count: self.nan,
            inf_count: self.inf,
        }
    }
}

/// The larger of two errors, NaN when either is: `f64::max` drops a NaN (an element whose
/// reference is not finite), and the figure would pass for one that cannot be judged.
pub fn larger(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// The spreads one group's errors are judged against: the group's standard deviation
/// (population; its RMS when every element is equal; 1, i.e. absolute, when all are 0), and
/// each channel's over the rows.
struct Spreads {
    head: f64,
    channel: Vec<f64>,
}

impl Spreads {
    fn of(head: &[f64], channels: usize) -> Spreads {
        // Two passes (mean, then deviations): exact enough when the mean dwarfs the spread.
        let n = head.len() as f64;
        let mean = sum_of(head, |v| v) / n;
        let sd = (sum_of(head, |v| (v - mean) * (v - mean)) / n).sqrt();
        let rms = (sum_of(head, |v| v * v) / n).sqrt();
        let head_spread = if sd > 0.0 {
            sd
        } else if rms > 0.0 {
            rms
        } else {
            1.0
        };
        Spreads {
            head: head_spread,
            channel: column_stds(head, channels),
        }
    }

    /// The spread each channel's errors are judged against: the wider of its own and the
    /// group's.
    fn per_channel(self) -> Vec<f64> {
        let head = self.head;
        self.channel.into_iter().map(|c| head.max(c)).collect()
    }
}

/// The sum of `f` over `values`, piece by piece in parallel, the pieces added in order.
fn sum_of(values: &[f64], f: impl Fn(f64) -> f64 + Sync) -> f64 {
    let parts: Vec<f64> = pieces(values.len())
        .map(|range| values[range].iter().map(|&v| f(v)).sum::<f64>())
        .collect();
    parts.into_iter().fold(0.0, |a, b| a + b)
}

/// Each column's population standard deviation over the rows of row-major `head`, in two
/// passes (means, then deviations), walking the rows: a column at a time strides the whole
/// group once per channel, a cache miss per element on a wide one (RMSNorm's 4,096 channels
/// by 2,048 rows). Blocks of rows are summed in parallel and added in order.
fn column_stds(head: &[f64], channels: usize) -> Vec<f64> {
    let rows = head.len() / channels;
    let mean: Vec<f64> = column_sums(head, channels, |acc, row| {
        acc.iter_mut().zip(row).for_each(|(s, v)| *s += v)
    })
    .into_iter()
    .map(|s| s / rows as f64)
    .collect();
    column_sums(head, channels, |acc, row| {
        for ((s, v), m) in acc.iter_mut().zip(row).zip(&mean) {
            *s += (v - m) * (v - m);
        }
    })
    .into_iter()
    .map(|s| (s / rows as f64).sqrt())
    .collect()
}

/// Per column, the sums `add(sums, row)` accumulates over the rows of row-major `head`:
/// blocks of rows in parallel, the blocks' sums added in order.
fn column_sums(head: &[f64], channels: usize, add: impl Fn(&mut [f64], &[f64]) + Sync) -> Vec<f64> {
    let block = (PIECE / channels).max(1) * channels;
    let parts: Vec<Vec<f64>> = pieces_of(head.len(), block)
        .map(|range| {
            let mut sums = vec![0f64; channels];
            head[range]
                .chunks(channels)
                .for_each(|row| add(&mut sums, row));
            sums
        })
        .collect();
    parts
        .into_iter()
        .fold(vec![0f64; channels], |mut total, part| {
            total.iter_mut().zip(part).for_each(|(t, p)| *t += p);
            total
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_spreads_are_each_columns_own_to_the_bit() {
        let (rows, channels) = (37, 11);
        let head: Vec<f64> = (0..rows * channels)
            .map(|i| ((i * 7919) % 1000) as f64 / 37.0 - 9.0)
            .collect();
        let column_std = |c: usize| {
            let column: Vec<f64> = head.iter().skip(c).step_by(channels).copied().collect();
            let n = column.len() as f64;
            let mean = column.iter().sum::<f64>() / n;
            (column.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt()
        };
        let stds = column_stds(&head, channels);
        for (c, s) in stds.iter().enumerate() {
            assert_eq!(s.to_bits(), column_std(c).to_bits(), "channel {c}");
        }
    }

    /// Several groups, each of several pieces, with errors and a NaN.
    fn large_case() -> (Vec<f64>, Vec<f64>) {
        let n = 3 * 5 * PIECE / 2;
        let reference: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 37.0 - 9.0)
            .collect();
        let mut out: Vec<f64> = reference
            .iter()
            .enumerate()
            .map(|(i, r)| r + ((i * 31) % 17) as f64 * 1e-4)
            .collect();
        out[PIECE + 3] = f64::NAN;
        (out, reference)
    }

    #[test]
    fn the_figures_are_the_same_on_any_number_of_threads() {
        let (out, reference) = large_case();
        let dims = (5 * PIECE / 2 / 64, 64);
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| Accuracy::measure(&out, &reference, 1.5e-3, dims))
        };
        let one = on(1);
        let bits = |a: &Accuracy| {
            [
                a.max_abs_err,
                a.mean_abs_err,
                a.pct_bad,
                a.rel_l2_err,
                a.max_err_over_ref_std,
            ]
            .map(f64::to_bits)
        };
        for threads in [2, 3, 8] {
            let many = on(threads);
            assert_eq!(bits(&one), bits(&many), "{threads} threads");
            assert_eq!(
                (one.nan_count, one.inf_count),
                (many.nan_count, many.inf_count)
            );
        }
    }

    #[test]
    fn pieces_add_up_to_the_whole() {
        let (out, reference) = large_case();
        let dims = (5 * PIECE / 2 / 64, 64);
        let a = Accuracy::measure(&out, &reference, 1.5e-3, dims);
        let finite: Vec<(f64, f64)> = out
            .iter()
            .zip(&reference)
            .filter(|(o, _)| o.is_finite())
            .map(|(o, r)| (*o, *r))
            .collect();
        let mean = finite.iter().map(|(o, r)| (o - r).abs()).sum::<f64>() / finite.len() as f64;
        let bad = out
            .iter()
            .zip(&reference)
            .filter(|(o, r)| !o.is_finite() || (*o - *r).abs() > 1.5e-3)
            .count();
        assert!((a.mean_abs_err - mean).abs() < 1e-15, "{a:?} vs {mean}");
        assert_eq!(a.pct_bad, 100.0 * bad as f64 / out.len() as f64);
        assert!((a.max_abs_err - 16e-4).abs() < 1e-12, "{a:?}");
        assert_eq!(a.nan_count, 1);
    }

    #[test]
    fn an_exact_output_has_no_error() {
        let r = [0.5, -1.0, 2.0];
        let a = Accuracy::measure(&r, &r, 0.06, (1, 3));
        assert_eq!(a.max_abs_err, 0.0);
        assert_eq!(a.pct_bad, 0.0);
        assert_eq!(a.max_err_over_ref_std, 0.0);
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
    }

    #[test]
    fn the_normalized_error_is_per_group_against_that_groups_spread() {
        // Two groups of 2 rows × 2 channels. Group 0: reference ±1 (std 1), error 0.01.
        // Group 1: reference ±0.001 (std 0.001), error 0.0015 — small in absolute terms,
        // 1.5 times the group's spread.
        let r = [1.0, -1.0, 1.0, -1.0, 0.001, -0.001, 0.001, -0.001];
        let mut o = r;
        o[0] += 0.01;
        o[5] -= 0.0015;
        let a = Accuracy::measure(&o, &r, 0.06, (2, 2));
        assert!((a.max_abs_err - 0.01).abs() < 1e-12);
        // One global std (≈0.707) would have called it 0.014.
        assert!((a.max_err_over_ref_std - 1.5).abs() < 1e-9, "{a:?}");
        // The same group measured alone.
        let alone = Accuracy::measure(&o[4..], &r[4..], 0.06, (2, 2));
        assert!((alone.max_err_over_ref_std - 1.5).abs() < 1e-9);
    }

    #[test]
    fn a_wide_channel_is_judged_against_its_own_spread() {
        // 4 rows × 2 channels: channel 0 is ±10 (std 10), channel 1 ±0.1; group std √50.005.
        let r = [10.0, 0.1, -10.0, -0.1, 10.0, 0.1, -10.0, -0.1];
        let group = (50.005f64).sqrt();
        let mut o = r;
        o[2] += 0.5; // channel 0: against its own std, 10
        let a = Accuracy::measure(&o, &r, 0.06, (4, 2));
        assert!((a.max_err_over_ref_std - 0.05).abs() < 1e-12, "{a:?}");
        let mut o = r;
        o[3] += 0.5; // channel 1: narrower than the group, so against the group's std
        let a = Accuracy::measure(&o, &r, 0.06, (4, 2));
        assert!(
            (a.max_err_over_ref_std - 0.5 / group).abs() < 1e-12,
            "{a:?}"
        );
    }

    #[test]
    fn a_zero_reference_judges_absolute_errors() {
        let a = Accuracy::measure(&[0.0, 0.25], &[0.0, 0.0], 0.06, (1, 2));
        assert_eq!(a.max_err_over_ref_std, 0.25);
    }

    #[test]
    fn a_non_finite_reference_value_makes_the_errors_non_finite() {
        let o = [1.0, 1.0];
        let nan = Accuracy::measure(&o, &[f64::NAN, 1.0], 0.06, (1, 2));
        assert!(
            nan.max_abs_err.is_nan() && nan.max_err_over_ref_std.is_nan(),
            "{nan:?}"
        );
        assert!(
            nan.mean_abs_err.is_nan() && nan.rel_l2_err.is_nan(),
            "{nan:?}"
        );
        let inf = Accuracy::measure(&o, &[1.0, f64::NEG_INFINITY], 0.06, (1, 2));
        assert_eq!(
            (inf.max_abs_err, inf.mean_abs_err),
            (f64::INFINITY, f64::INFINITY)
        );
        assert_eq!(larger(0.5, 0.25), 0.5);
        assert!(larger(f64::NAN, 0.25).is_nan() && larger(0.25, f64::NAN).is_nan());
    }

    #[test]
    fn non_finite_outputs_are_counted_bad_and_left_out_of_the_errors() {
        let r = [1.0, 1.0];
        let a = Accuracy::measure(&[f64::NAN, 1.0], &r, 0.06, (1, 2));
        assert_eq!((a.nan_count, a.max_abs_err, a.pct_bad), (1, 0.0, 50.0));
        let b = Accuracy::measure(&[f64::INFINITY, 1.0], &r, 0.06, (1, 2));
        assert_eq!((b.inf_count, b.pct_bad), (1, 50.0));
    }
}
