//! Outputs against the reference, output by output: the error statistics of
//! `crate::workload::accuracy` (absolute errors, `rel_l2_err`, and the error over the reference's
//! spread) and the verdict of the output's gates ([`repro_schema::verdict`]), naming every
//! threshold exceeded and every figure that is not finite.

use super::inputs::Case;
use super::spec::{Declaration, Figure, OutputGates, Role};
use crate::workload::accuracy::Accuracy;
use repro_schema::verdict::Limit;

/// One output of one run, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputCheck {
    pub output: String,
    pub accuracy: Accuracy,
    /// `rel_l2_err 0.003100 > 0.002`, `mean_abs_err is NaN: …`, ...; empty when the output
    /// passes.
    pub failed: Vec<String>,
}

impl OutputCheck {
    pub fn pass(&self) -> bool {
        self.failed.is_empty()
    }
}

/// Judge every output of `case`: `outputs` and `references` hold each output's values in
/// ABI order (decoded to f64); `class` is the kernel's precision class (`None`: per-class
/// thresholds do not apply to it).
pub fn check_case(
    decl: &Declaration,
    case: &Case,
    outputs: &[Vec<f64>],
    references: &[Vec<f64>],
    class: Option<&str>,
) -> Vec<OutputCheck> {
    let absolute = decl
        .recipes
        .get(&case.recipe)
        .is_none_or(|r| r.absolute_gates);
    decl.args
        .iter()
        .zip(&case.args)
        .filter(|(a, _)| a.role == Role::Output)
        .zip(outputs.iter().zip(references))
        .map(|((arg, data), (out, reference))| {
            let gates = &decl.gates[&arg.name];
            check_output(
                &arg.name,
                out,
                reference,
                data.extents(),
                gates,
                class,
                absolute,
            )
        })
        .collect()
}

/// Judge one output of `extents` against its reference. `absolute`: whether the absolute
/// thresholds apply (the recipe's `absolute_gates`). NaN or Inf never passes.
pub fn check_output(
    name: &str,
    out: &[f64],
    reference: &[f64],
    extents: &[usize],
    gates: &OutputGates,
    class: Option<&str>,
    absolute: bool,
) -> OutputCheck {
    let spread = gates
        .spread_dims
        .unwrap_or(extents.len())
        .clamp(1, extents.len());
    let group: usize = extents[extents.len() - spread..].iter().product();
    let channels = extents[extents.len() - 1];
    let bad_above = gates.max_abs_err.unwrap_or(f64::INFINITY);
    let accuracy = Accuracy::measure(out, reference, bad_above, (group / channels, channels));
    judge(name, accuracy, gates, class, absolute)
}

/// Judge the errors `accuracy` of output `name` against its `gates`, each figure by
/// [`Limit::judge`], the rule the bench stage's gates follow too.
pub fn judge(
    name: &str,
    accuracy: Accuracy,
    gates: &OutputGates,
    class: Option<&str>,
    absolute: bool,
) -> OutputCheck {
    let mut failed = Vec::new();
    let non_finite = accuracy.nan_count + accuracy.inf_count;
    if non_finite > 0 {
        failed.push(format!(
            "{} NaN and {} Inf elements",
            accuracy.nan_count, accuracy.inf_count
        ));
    }
    for (figure, limit) in gates.thresholds(class, absolute) {
        let value = match figure {
            Figure::MaxAbsErr => accuracy.max_abs_err,
            Figure::MeanAbsErr => accuracy.mean_abs_err,
            Figure::PctBad => accuracy.pct_bad,
            Figure::MaxErrOverRefStd => accuracy.max_err_over_ref_std,
            Figure::RelL2Err => accuracy.rel_l2_err,
        };
        failed.extend(Limit::at_most(limit).judge(value).failure(figure.name()));
    }
    OutputCheck {
        output: name.to_string(),
        accuracy,
        failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::exprs::Compiled;
    use crate::workload::spec::Threshold;
    use crate::{workload::testing::attention, workload::testing::rmsnorm};

    /// RMSNorm on the CPU in f64: the reference the tests compare against.
    fn rmsnorm_f64(x: &[f64], w: &[f64], hidden: usize, eps: f64) -> Vec<f64> {
        x.chunks(hidden)
            .flat_map(|row| {
                let ms = row.iter().map(|v| v * v).sum::<f64>() / hidden as f64;
                let inv = 1.0 / (ms + eps).sqrt();
                row.iter()
                    .zip(w)
                    .map(move |(v, w)| v * inv * w)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// What an fp16 kernel writes: the reference rounded to fp16, with `bug` applied.
    fn fp16_kernel(reference: &[f64], bug: impl Fn(usize, f64) -> f64) -> Vec<f64> {
        use crate::workload::dtype::Dtype;
        let exact: Vec<f64> = reference
            .iter()
            .enumerate()
            .map(|(i, &r)| bug(i, r))
            .collect();
        Dtype::Fp16.decode(&Dtype::Fp16.encode(&exact))
    }

    fn run(recipe: &str, shape: &str, bug: impl Fn(usize, f64) -> f64) -> OutputCheck {
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let case = Case::generate(&c, shape, recipe, 0).unwrap();
        let hidden = case.dims["hidden"] as usize;
        let reference = rmsnorm_f64(&case.values(&decl, 0), &case.values(&decl, 1), hidden, 1e-6);
        let out = fp16_kernel(&reference, bug);
        let mut checks = check_case(&decl, &case, &[out], &[reference], None);
        assert_eq!(checks.len(), 1);
        checks.remove(0)
    }

    #[test]
    fn an_fp16_rounding_of_the_reference_passes_every_recipe() {
        for recipe in ["gaussian", "tiny", "large", "offset"] {
            for shape in ["small", "ragged"] {
                let check = run(recipe, shape, |_, r| r);
                assert!(check.pass(), "{recipe} {shape}: {:?}", check);
                assert!(check.accuracy.max_abs_err > 0.0, "fp16 rounding shows");
            }
        }
    }

    #[test]
    fn the_gates_catch_a_dropped_tail_an_eps_bug_and_a_bias() {
        // The last 8 elements of every row never written (the sentinel is NaN).
        let tail = run("gaussian", "ragged", |i, r| {
            if i % 1000 >= 992 {
                f64::NAN
            } else {
                r
            }
        });
        assert!(!tail.pass());
        assert_eq!(tail.failed[0], "264 NaN and 0 Inf elements");
        // eps outside the square root: invisible on gaussian data, 40 % off on `tiny`.
        let eps_bug = |_: usize, r: f64| r * (1e-6f64 + 1e-6).sqrt() / (1e-3 + 1e-6);
        assert!(run("gaussian", "small", |_, r| r * (1.0 + 1e-6)).pass());
        let tiny = run("tiny", "small", eps_bug);
        assert!(!tiny.pass(), "{tiny:?}");
        assert!(
            tiny.failed.iter().any(|f| f.starts_with("rel_l2_err")),
            "{:?}",
            tiny.failed
        );
        // A 1 % error everywhere fails every threshold the output has.
        let biased = run("gaussian", "small", |_, r| r * 1.01);
        let keys: Vec<&str> = biased
            .failed
            .iter()
            .map(|f| f.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                "max_abs_err",
                "mean_abs_err",
                "max_err_over_ref_std",
                "rel_l2_err"
            ]
        );
    }

    #[test]
    fn an_error_exactly_at_its_threshold_passes() {
        let gates = OutputGates {
            max_abs_err: Some(0.5),
            ..OutputGates::default()
        };
        let reference = [1.0, 2.0];
        let judge =
            |out: [f64; 2]| check_output("y", &out, &reference, &[1, 2], &gates, None, true);
        assert!(judge([1.5, 2.0]).pass());
        assert_eq!(judge([1.625, 2.0]).failed, ["max_abs_err 0.625000 > 0.5"]);
    }

    #[test]
    fn a_non_finite_reference_value_fails_every_figure_it_touches_and_says_so() {
        let gates = OutputGates {
            max_abs_err: Some(0.06),
            mean_abs_err: Some(0.02),
            ..OutputGates::default()
        };
        let out = [1.0, 2.0, 3.0, 4.0];
        for (bad, shown) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "inf"),
        ] {
            let mut reference = out;
            reference[1] = bad;
            let c = check_output("y", &out, &reference, &[2, 2], &gates, None, true);
            let reason =
                |f: &str| format!("{f} is {shown}: not a finite number, so it passes no limit");
            assert_eq!(
                c.failed,
                [reason("max_abs_err"), reason("mean_abs_err")],
                "reference {bad}"
            );
        }
    }

    #[test]
    fn absolute_gates_follow_the_recipe_and_thresholds_the_class() {
        let decl = attention();
        let gates = &decl.gates["o"];
        let extents = [1, 2, 2, 2];
        let reference = [1.0, -1.0, 1.0, -1.0, 0.001, -0.001, 0.001, -0.001];
        let mut out = reference;
        out[0] += 0.07;
        let judge = |class: &str, absolute: bool| {
            check_output(
                "o",
                &out,
                &reference,
                &extents,
                gates,
                Some(class),
                absolute,
            )
            .failed
        };
        // Head 0 errs by 0.07 against a spread of 1: over the absolute 0.06 and the fp16-pv
        // normalized 0.02, under fp8-pv's 1.0.
        assert_eq!(judge("fp8-pv", false), Vec::<String>::new());
        assert_eq!(
            judge("fp8-pv", true),
            ["max_abs_err 0.070000 > 0.06", "pct_bad 12.500000 > 1"]
        );
        assert!(judge("fp16-pv", false)
            .iter()
            .any(|f| f.starts_with("max_err_over_ref_std")));
        // spread_dims 2 judges head 1 against its own spread: a 0.0015 error is 1.5 of it.
        let mut small_head = reference;
        small_head[5] -= 0.0015;
        let c = check_output(
            "o",
            &small_head,
            &reference,
            &extents,
            gates,
            Some("fp8-pv"),
            true,
        );
        assert!((c.accuracy.max_err_over_ref_std - 1.5).abs() < 1e-9);
        assert!(!c.pass());
        let whole = OutputGates {
            spread_dims: None,
            ..gates.clone()
        };
        let c = check_output(
            "o",
            &small_head,
            &reference,
            &extents,
            &whole,
            Some("fp8-pv"),
            true,
        );
        assert!(
            c.accuracy.max_err_over_ref_std < 0.01,
            "one spread for the whole tensor"
        );
        assert_eq!(Threshold::One(0.5).for_class(Some("any")), Some(0.5));
        // NaN fails whatever the thresholds.
        let mut nan = reference;
        nan[2] = f64::NAN;
        let c = check_output(
            "o",
            &nan,
            &reference,
            &extents,
            &OutputGates::default(),
            None,
            false,
        );
        assert_eq!(c.failed, ["1 NaN and 0 Inf elements"]);
    }
}
