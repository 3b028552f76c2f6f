//! The one rule that judges a measured figure against its limit. The `repro exec` child
//! (an output's errors against its gates, `workload::compare`), every gate a stage records
//! (`GateResult::at_most`, `GateResult::at_least`: bench, build, profile) and the report's
//! account of a failed record all call it, so none of them can pass what another fails.
//!
//! A figure that is NaN or infinite fails whatever its limit, and says so: IEEE comparisons
//! would let NaN pass `value > limit` and fail `value <= limit`, so the answer would depend
//! on which way a caller wrote the test.

/// The side of its limit a figure must stay on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    AtMost,
    AtLeast,
}

impl Bound {
    /// As records write it: `<=` or `>=`.
    pub fn op(self) -> &'static str {
        match self {
            Bound::AtMost => "<=",
            Bound::AtLeast => ">=",
        }
    }
}

/// A limit a figure is judged by.
///
/// An infinite value is an open side (at most +inf passes every finite figure). A NaN value
/// passes nothing: the pipeline's checks refuse one where a workload declares its gates (at
/// load), so one that still reaches a verdict fails every figure rather than letting any
/// through, and its reason shows the NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub bound: Bound,
    pub value: f64,
}

impl Limit {
    pub fn at_most(value: f64) -> Limit {
        Limit {
            bound: Bound::AtMost,
            value,
        }
    }

    pub fn at_least(value: f64) -> Limit {
        Limit {
            bound: Bound::AtLeast,
            value,
        }
    }

    /// `measured` against this limit; exactly at the limit passes.
    pub fn judge(self, measured: f64) -> Verdict {
        if !measured.is_finite() {
            return Verdict::NotFinite(measured);
        }
        let within = match self.bound {
            Bound::AtMost => measured <= self.value,
            Bound::AtLeast => measured >= self.value,
        };
        if within {
            Verdict::Pass
        } else {
            Verdict::Beyond {
                measured,
                limit: self,
            }
        }
    }
}

/// How a figure came out against its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    Pass,
    /// A finite figure on the wrong side of its limit.
    Beyond {
        measured: f64,
        limit: Limit,
    },
    /// NaN or infinite: no limit passes it.
    NotFinite(f64),
}

impl Verdict {
    pub fn pass(self) -> bool {
        self == Verdict::Pass
    }

    /// Why the figure `name` failed, as the user reads it: `max_abs_err 0.070000 > 0.06`,
    /// `rel_l2_err is NaN: not a finite number, so it passes no limit`; `None` when it
    /// passed.
    pub fn failure(self, name: &str) -> Option<String> {
        match self {
            Verdict::Pass => None,
            Verdict::Beyond { measured, limit } => {
                let violated = match limit.bound {
                    Bound::AtMost => '>',
                    Bound::AtLeast => '<',
                };
                Some(format!("{name} {measured:.6} {violated} {}", limit.value))
            }
            Verdict::NotFinite(measured) => Some(format!(
                "{name} is {measured}: not a finite number, so it passes no limit"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_exactly_at_its_limit_passes_and_just_beyond_it_fails() {
        assert_eq!(Limit::at_most(0.06).judge(0.06), Verdict::Pass);
        assert_eq!(Limit::at_least(1.1).judge(1.1), Verdict::Pass);
        assert_eq!(
            Limit::at_most(0.06)
                .judge(0.07)
                .failure("max_abs_err")
                .unwrap(),
            "max_abs_err 0.070000 > 0.06"
        );
        assert_eq!(
            Limit::at_least(1.1).judge(1.0).failure("speedup").unwrap(),
            "speedup 1.000000 < 1.1"
        );
    }

    #[test]
    fn nan_and_infinities_fail_every_limit_and_say_why() {
        for limit in [
            Limit::at_most(0.06),
            Limit::at_most(f64::INFINITY),
            Limit::at_least(0.0),
            Limit::at_least(f64::NEG_INFINITY),
        ] {
            for (x, shown) in [
                (f64::NAN, "NaN"),
                (f64::INFINITY, "inf"),
                (f64::NEG_INFINITY, "-inf"),
            ] {
                let verdict = limit.judge(x);
                assert!(!verdict.pass(), "{x} against {limit:?}");
                assert_eq!(
                    verdict.failure("rel_l2_err").unwrap(),
                    format!("rel_l2_err is {shown}: not a finite number, so it passes no limit")
                );
            }
        }
    }

    #[test]
    fn an_open_limit_passes_finite_figures_and_a_nan_limit_none() {
        assert!(Limit::at_most(f64::INFINITY).judge(1e300).pass());
        assert!(Limit::at_least(f64::NEG_INFINITY).judge(-1e300).pass());
        let nan = Limit::at_most(f64::NAN).judge(0.0);
        assert_eq!(
            nan.failure("max_abs_err").unwrap(),
            "max_abs_err 0.000000 > NaN"
        );
        assert!(!Limit::at_least(f64::NAN).judge(0.0).pass());
    }
}
