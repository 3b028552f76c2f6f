//! Speedups against the control and the baselines, and the correctness and performance
//! gates the bench stage records.

use repro_pipeline::workload::spec::Figure;
use repro_pipeline::workload::spec::OutputGates;
use repro_pipeline::workload::Declaration;
use repro_pipeline::Pipeline;
use repro_schema::BenchFile;
use repro_schema::BenchResult;
use repro_schema::GateResult;
use repro_schema::OutputAccuracy;
use repro_schema::RunStatus;
use std::collections::BTreeMap;

/// Set `key` = other p50 / this p50 on every record with a matching (shape, seed) in
/// `other`; `None` (n/a) where either side is missing or did not run.
pub(super) fn attach_speedup(
    results: &mut [BenchResult],
    key: &str,
    other: Option<&[BenchResult]>,
) {
    for r in results.iter_mut() {
        let theirs = other.and_then(|o| {
            o.iter()
                .find(|b| {
                    b.shape == r.shape
                        && b.inputs == r.inputs
                        && b.seed == r.seed
                        && b.status.is_ok()
                })
                .and_then(|b| b.p50_us)
        });
        let speedup = match (theirs, r.p50_us) {
            (Some(t), Some(mine)) if r.status.is_ok() && mine > 0.0 => Some(t / mine),
            _ => None,
        };
        r.speedups.insert(key.to_string(), speedup);
    }
}

/// Correctness gates per (shape, recipe, seed) and output: the absolute ones where the
/// run's recipe keeps them (`absolute_gates`), the normalized ones on every run at the
/// thresholds of the variant's precision class `class`, each only where the output declares
/// it. A run that did not complete fails `correctness.completed`; an output the kernel
/// never wrote fails `correctness.written`.
pub fn correctness_gates(
    results: &[BenchResult],
    decl: &Declaration,
    class: Option<&str>,
) -> Vec<GateResult> {
    let mut gates = Vec::new();
    for r in results {
        let subject = r.run_subject();
        let (Some(max), Some(mean), Some(bad), RunStatus::Ok) =
            (r.max_abs_err, r.mean_abs_err, r.pct_bad, &r.status)
        else {
            gates.push(GateResult::at_least(
                "correctness.completed",
                &subject,
                0.0,
                1.0,
            ));
            continue;
        };
        if r.correctness_pass == Some(false) && r.error.is_some() {
            let mut g = GateResult::at_least("correctness.written", &subject, 0.0, 1.0);
            g.detail = r.error.clone();
            gates.push(g);
        }
        let absolute = decl
            .recipes
            .get(&r.inputs)
            .is_none_or(|recipe| recipe.absolute_gates);
        if r.outputs.is_empty() {
            // One output: the record's figures are its own.
            let Some(og) = decl.outputs().next().and_then(|o| decl.gates.get(&o.name)) else {
                continue;
            };
            let figures = Figures {
                max_abs_err: max,
                mean_abs_err: mean,
                pct_bad: bad,
                // Records from before the normalized errors existed carry none: not gated.
                rel_l2_err: r.rel_l2_err,
                max_err_over_ref_std: r.max_err_over_ref_std,
                nonfinite: r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0),
            };
            output_gates(&mut gates, &subject, &figures, og, class, absolute);
        } else {
            for (name, a) in &r.outputs {
                let Some(og) = decl.gates.get(name) else {
                    continue;
                };
                let figures = Figures::of(a);
                let subject = format!("{subject} {name}");
                output_gates(&mut gates, &subject, &figures, og, class, absolute);
            }
        }
    }
    gates
}

/// One output's figures, as gated.
struct Figures {
    max_abs_err: f64,
    mean_abs_err: f64,
    pct_bad: f64,
    rel_l2_err: Option<f64>,
    max_err_over_ref_std: Option<f64>,
    nonfinite: u64,
}

impl Figures {
    fn of(a: &OutputAccuracy) -> Figures {
        Figures {
            max_abs_err: a.max_abs_err,
            mean_abs_err: a.mean_abs_err,
            pct_bad: a.pct_bad,
            rel_l2_err: Some(a.rel_l2_err),
            max_err_over_ref_std: Some(a.max_err_over_ref_std),
            nonfinite: a.nan_count + a.inf_count,
        }
    }
}

/// The gates of one output's figures `a`, at the thresholds `og` declares.
fn output_gates(
    gates: &mut Vec<GateResult>,
    subject: &str,
    a: &Figures,
    og: &OutputGates,
    class: Option<&str>,
    absolute: bool,
) {
    let nonfinite = a.nonfinite as f64;
    gates.push(GateResult::at_most(
        "correctness.nonfinite",
        subject,
        nonfinite,
        0.0,
    ));
    for (figure, threshold) in og.thresholds(class, absolute) {
        let measured = match figure {
            Figure::MaxAbsErr => Some(a.max_abs_err),
            Figure::MeanAbsErr => Some(a.mean_abs_err),
            Figure::PctBad => Some(a.pct_bad),
            Figure::MaxErrOverRefStd => a.max_err_over_ref_std,
            Figure::RelL2Err => a.rel_l2_err,
        };
        if let Some(m) = measured {
            let gate = format!("correctness.{}", figure.gate());
            gates.push(GateResult::at_most(&gate, subject, m, threshold));
        }
    }
}

/// A variant's time on the primary shape: the median over seeds of its p50s (the timed
/// recipe's), `None` unless every primary record, of every recipe, ran and passed
/// correctness.
pub(super) fn primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(results.iter().filter(|r| r.shape == primary))
}

/// A baseline's time on the primary shape: as [`primary_time`], but only its timed records
/// must pass. A baseline may compute at another precision than any variant (PyTorch's
/// attention on fp16 copies of FP8 inputs); its errors on the other recipes are recorded,
/// not held against its speed.
pub(super) fn baseline_primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(
        results
            .iter()
            .filter(|r| r.shape == primary && (r.p50_us.is_some() || !r.status.is_ok())),
    )
}

pub(super) fn primary_time_of<'a>(records: impl Iterator<Item = &'a BenchResult>) -> Option<f64> {
    let rs: Vec<&BenchResult> = records.collect();
    if rs.is_empty()
        || rs
            .iter()
            .any(|r| !r.status.is_ok() || r.correctness_pass != Some(true))
    {
        return None;
    }
    let p50s: Vec<f64> = rs.iter().filter_map(|r| r.p50_us).collect();
    repro_base::stats::summarize(&p50s).map(|s| s.p50)
}

/// The performance gates, each with the variant whose file records it: the best
/// non-control variant against the control, and the best variant against each baseline
/// with a declared minimum (a skipped or missing baseline is not evaluated: n/a).
pub(super) fn performance_gates(
    by_variant: &BTreeMap<String, Vec<BenchResult>>,
    control: Option<&str>,
    primary: &str,
    p: &Pipeline,
    baselines: &[(String, Option<BenchFile>)],
) -> Vec<(String, GateResult)> {
    let Some(perf) = p.gates.performance.as_ref() else {
        return vec![];
    };
    let times: BTreeMap<&str, f64> = by_variant
        .iter()
        .filter_map(|(v, rs)| primary_time(rs, primary).map(|t| (v.as_str(), t)))
        .collect();
    let best_of = |candidates: &mut dyn Iterator<Item = (&&str, &f64)>| {
        candidates
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(v, t)| (v.to_string(), *t))
    };
    let mut gates = Vec::new();
    if let (Some(min), Some(control)) = (perf.min_speedup_vs_control, control) {
        let best = best_of(&mut times.iter().filter(|(v, _)| **v != control));
        let owner = best.as_ref().map_or(control.to_string(), |b| b.0.clone());
        let (measured, subject) = match (times.get(control), &best) {
            (Some(c), Some((v, t))) => (c / t, format!("{v} vs {control} on {primary}")),
            (None, _) => (
                0.0,
                format!("control {control} has no correct {primary} result"),
            ),
            (_, None) => (
                0.0,
                format!("no correct variant besides {control} on {primary}"),
            ),
        };
        gates.push((
            owner,
            GateResult::at_least(repro_report::best::CONTROL_GATE, &subject, measured, min),
        ));
    }
    for (name, min) in &perf.min_speedup_vs_baseline {
        let Some(Some(file)) = baselines.iter().find(|(b, _)| b == name).map(|(_, f)| f) else {
            continue;
        };
        let Some(base) = baseline_primary_time(&file.results, primary) else {
            continue;
        };
        if let Some((v, t)) = best_of(&mut times.iter()) {
            let subject = format!("{v} vs {name} on {primary}");
            gates.push((
                v,
                GateResult::at_least(
                    &format!("performance.min_speedup_vs_{name}"),
                    &subject,
                    base / t,
                    *min,
                ),
            ));
        }
    }
    gates
}
