//! The verdict of one (variant, shape) row of `repro diff`, and the noise it is judged by.
//!
//! Each side's measure is the median p50 over seeds. Its noise is the largest of: the widest
//! ci95 half-width of its seeds, half the range of its per-seed p50s, and a floor
//! ([`NOISE_FLOOR_REL`] of the p50, at least [`NOISE_FLOOR_US`]). The floor is the
//! run-to-run drift that no single run's samples show: seeds that agree (a range of 0) and
//! a tight ci95 say nothing about the next run on another hour (benches/results/diff_noise.md
//! measures it on two H100 runs of identical cubins).

use serde::Serialize;

/// Changes smaller than this fraction of the before p50 are SAME, whatever the noise.
pub const MIN_REL_CHANGE: f64 = 0.02;
/// Each side's noise is at least this fraction of its p50: the run-to-run drift.
pub const NOISE_FLOOR_REL: f64 = 0.02;
/// … and at least three ticks of the 32 ns timer the harness reads (µs).
pub const NOISE_FLOOR_US: f64 = 0.096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Unclear,
    Lost,
    #[serde(rename = "OTHER GPU")]
    OtherGpu,
    /// The after side's record was kept from another build of its variant: not a
    /// measurement of the code being compared.
    #[serde(rename = "NOT MEASURED")]
    NotMeasured,
    /// Only the after side has the variant.
    New,
    /// Only the before side has the variant (it is no longer in the results).
    Removed,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "FASTER",
            Verdict::Slower => "SLOWER",
            Verdict::Same => "SAME",
            Verdict::Unclear => "UNCLEAR",
            Verdict::Lost => "LOST",
            Verdict::OtherGpu => "OTHER GPU",
            Verdict::NotMeasured => "NOT MEASURED",
            Verdict::New => "NEW",
            Verdict::Removed => "REMOVED",
        }
    }
}

/// A side's p50 and its noise (µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measure {
    pub p50_us: f64,
    pub noise_us: Option<f64>,
}

/// Decide the verdict of two measures by the noise rule (see the module doc).
pub fn verdict(before: Option<Measure>, after: Option<Measure>) -> Verdict {
    let (Some(b), Some(a)) = (before, after) else {
        return Verdict::Unclear;
    };
    if !(b.p50_us > 0.0 && a.p50_us.is_finite()) {
        return Verdict::Unclear;
    }
    let delta = a.p50_us - b.p50_us;
    if (delta / b.p50_us).abs() < MIN_REL_CHANGE {
        return Verdict::Same;
    }
    let (Some(nb), Some(na)) = (b.noise_us, a.noise_us) else {
        return Verdict::Unclear;
    };
    if delta.abs() <= (nb * nb + na * na).sqrt() {
        Verdict::Unclear
    } else if delta < 0.0 {
        Verdict::Faster
    } else {
        Verdict::Slower
    }
}

/// One side's measure for `shape`: median p50 over seeds, noise as in the module doc.
pub fn measure(results: &[repro_schema::BenchResult], shape: &str) -> Option<Measure> {
    let p50 = crate::context::shape_p50(results, shape)?;
    let ok: Vec<_> = results
        .iter()
        .filter(|r| r.shape == shape && r.status.is_ok())
        .collect();
    let ci = ok.iter().filter_map(|r| r.ci95_us).fold(0.0, f64::max);
    let seeds: Vec<f64> = ok.iter().filter_map(|r| r.p50_us).collect();
    let lo = seeds.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = seeds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let half_range = if seeds.len() > 1 {
        (hi - lo) / 2.0
    } else {
        0.0
    };
    let floor = (p50 * NOISE_FLOOR_REL).max(NOISE_FLOOR_US);
    Some(Measure {
        p50_us: p50,
        noise_us: Some(ci.max(half_range).max(floor)),
    })
}

/// What a row compares, beyond its two measures.
pub struct Sides {
    /// Whether each side has a results file for the variant.
    pub present: (bool, bool),
    /// The GPU model each side measured the shape on.
    pub gpus: (Option<String>, Option<String>),
    /// Both sides measured the same program the same way: the same cubin, workload,
    /// harness options, GPU model and driver (their records' keys are equal).
    pub same_build: bool,
    /// The after side's record is not of the build in place (kept from another build).
    pub not_measured: bool,
}

/// The verdict of one row: NOT MEASURED when the after side's record is of another build,
/// NEW / REMOVED when one side has no such variant, LOST when only the old side measured
/// it, OTHER GPU when the sides ran on different GPU models, SAME when both measured the
/// very same program on the same GPU and driver (a difference is then noise), else the
/// noise rule.
pub fn row_verdict(before: Option<Measure>, after: Option<Measure>, sides: &Sides) -> Verdict {
    match (before, after) {
        _ if sides.not_measured => Verdict::NotMeasured,
        _ if !sides.present.0 => Verdict::New,
        _ if !sides.present.1 => Verdict::Removed,
        (Some(_), None) => Verdict::Lost,
        (Some(_), Some(_)) => match &sides.gpus {
            (Some(b), Some(a)) if a != b => Verdict::OtherGpu,
            _ if sides.same_build => Verdict::Same,
            _ => verdict(before, after),
        },
        _ => verdict(before, after),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p50: f64, noise: f64) -> Option<Measure> {
        Some(Measure {
            p50_us: p50,
            noise_us: Some(noise),
        })
    }

    fn sides() -> Sides {
        Sides {
            present: (true, true),
            gpus: (Some("H100".into()), Some("H100".into())),
            same_build: false,
            not_measured: false,
        }
    }

    #[test]
    fn verdicts_follow_the_documented_rule() {
        assert_eq!(verdict(m(100.0, 1.0), m(90.0, 1.0)), Verdict::Faster);
        assert_eq!(verdict(m(100.0, 1.0), m(110.0, 1.0)), Verdict::Slower);
        assert_eq!(
            verdict(m(100.0, 0.1), m(101.0, 0.1)),
            Verdict::Same,
            "1% is below the minimum"
        );
        assert_eq!(
            verdict(m(100.0, 8.0), m(110.0, 8.0)),
            Verdict::Unclear,
            "10% but inside sqrt(64+64)=11.3"
        );
        assert_eq!(verdict(None, m(100.0, 1.0)), Verdict::Unclear);
        let no_noise = Some(Measure {
            p50_us: 100.0,
            noise_us: None,
        });
        assert_eq!(verdict(no_noise, m(80.0, 1.0)), Verdict::Unclear);
    }

    #[test]
    fn seeds_that_agree_still_have_the_floor_as_noise() {
        let r = |p50: f64| -> repro_schema::BenchResult {
            serde_json::from_value(serde_json::json!({
                "shape": "s", "seed": 0, "inputs": "gaussian", "warmup": 1, "iters": 1,
                "status": "ok", "p50_us": p50, "ci95_us": 0.0,
            }))
            .unwrap()
        };
        let same_seeds = measure(&[r(10.0), r(10.0), r(10.0)], "s").unwrap();
        assert_eq!(same_seeds.noise_us, Some(10.0 * NOISE_FLOOR_REL));
        let tiny = measure(&[r(1.0)], "s").unwrap();
        assert_eq!(tiny.noise_us, Some(NOISE_FLOOR_US));
        // A 2.5% change of one seed-agreeing record against another is within the floors.
        let after = measure(&[r(10.25), r(10.25)], "s");
        assert_eq!(verdict(Some(same_seeds), after), Verdict::Unclear);
    }

    #[test]
    fn the_same_program_on_the_same_gpu_is_never_a_regression() {
        let same = Sides {
            same_build: true,
            ..sides()
        };
        assert_eq!(
            row_verdict(m(10.0, 0.1), m(11.0, 0.1), &same),
            Verdict::Same
        );
        assert_eq!(
            row_verdict(m(10.0, 0.1), m(11.0, 0.1), &sides()),
            Verdict::Slower
        );
    }

    #[test]
    fn kept_new_and_removed_rows_are_named_as_such() {
        let kept = Sides {
            not_measured: true,
            same_build: true,
            ..sides()
        };
        assert_eq!(
            row_verdict(m(10.0, 0.1), m(10.0, 0.1), &kept),
            Verdict::NotMeasured
        );
        let new = Sides {
            present: (false, true),
            ..sides()
        };
        assert_eq!(row_verdict(None, m(10.0, 0.1), &new), Verdict::New);
        let removed = Sides {
            present: (true, false),
            ..sides()
        };
        assert_eq!(row_verdict(m(10.0, 0.1), None, &removed), Verdict::Removed);
        assert_eq!(row_verdict(m(10.0, 0.1), None, &sides()), Verdict::Lost);
    }
}
