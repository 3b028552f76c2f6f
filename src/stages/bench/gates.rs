//! Speedups against the control and the baselines, and the correctness and performance
//! gates the bench stage records.

use crate::pipeline::{Pipeline, Precision, Recipe};
use crate::schema::{BenchFile, BenchResult, GateResult};
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
                        && b.status == "ok"
                })
                .and_then(|b| b.p50_us)
        });
        let speedup = match (theirs, r.p50_us) {
            (Some(t), Some(mine)) if r.status == "ok" && mine > 0.0 => Some(t / mine),
            _ => None,
        };
        r.speedups.insert(key.to_string(), speedup);
    }
}

/// Correctness gates per (shape, recipe, seed): the absolute ones on gaussian runs, the
/// normalized ones on every run at the thresholds of the variant's precision class. A run
/// that did not complete fails `correctness.completed`.
pub fn correctness_gates(
    results: &[BenchResult],
    g: &crate::pipeline::CorrectnessGates,
    precision: Precision,
) -> Vec<GateResult> {
    let mut gates = Vec::new();
    for r in results {
        let subject = r.run_subject();
        let measured = (r.max_abs_err, r.mean_abs_err, r.pct_bad, r.status.as_str());
        let (Some(max), Some(mean), Some(bad), "ok") = measured else {
            gates.push(GateResult::at_least(
                "correctness.completed",
                &subject,
                0.0,
                1.0,
            ));
            continue;
        };
        let mut at_most = |gate: &str, measured: f64, threshold: f64| {
            gates.push(GateResult::at_most(gate, &subject, measured, threshold))
        };
        let nonfinite = r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0);
        at_most("correctness.nonfinite", nonfinite as f64, 0.0);
        // The absolute gates are in the output's units, set for the gaussian recipe.
        if r.inputs == Recipe::Gaussian.name() {
            at_most("correctness.max_abs_err", max, g.max_abs_err);
            at_most("correctness.mean_abs_err", mean, g.mean_abs_err);
            at_most("correctness.max_pct_bad", bad, g.max_pct_bad);
        }
        // Records from before the normalized errors existed carry none: not gated.
        if let Some(e) = r.max_err_over_ref_std {
            let t = g.max_err_over_ref_std.get(precision);
            at_most("correctness.max_err_over_ref_std", e, t);
        }
        if let Some(e) = r.rel_l2_err {
            at_most(
                "correctness.max_rel_l2_err",
                e,
                g.max_rel_l2_err.get(precision),
            );
        }
    }
    gates
}

/// A variant's time on the primary shape: the median over seeds of its p50s (the timed
/// recipe's), `None` unless every primary record, of every recipe, ran and passed
/// correctness.
pub(super) fn primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(results.iter().filter(|r| r.shape == primary))
}

/// A baseline's time on the primary shape: as [`primary_time`], but only its timed records
/// must pass. PyTorch computes on fp16 copies of K and V, another precision than any
/// variant's; its errors on the other recipes are recorded, not held against its speed.
pub(super) fn baseline_primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(
        results
            .iter()
            .filter(|r| r.shape == primary && (r.p50_us.is_some() || r.status != "ok")),
    )
}

pub(super) fn primary_time_of<'a>(records: impl Iterator<Item = &'a BenchResult>) -> Option<f64> {
    let rs: Vec<&BenchResult> = records.collect();
    if rs.is_empty()
        || rs
            .iter()
            .any(|r| r.status != "ok" || r.correctness_pass != Some(true))
    {
        return None;
    }
    let p50s: Vec<f64> = rs.iter().filter_map(|r| r.p50_us).collect();
    crate::stats::summarize(&p50s).map(|s| s.p50)
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
            GateResult::at_least(
                "performance.min_speedup_vs_control",
                &subject,
                measured,
                min,
            ),
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
