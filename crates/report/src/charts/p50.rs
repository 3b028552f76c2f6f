//! What the p50 chart shows: one panel per shape, a bar per variant or baseline.

use crate::artifacts::Artifacts;
use crate::{context::shape_p50, context::shapes_in_order};
use repro_schema::{BenchFile, BenchResult, RunStatus};

/// What a bar stands for (its colour).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BarKind {
    Baseline,
    Variant,
    /// The fastest variant on this panel's shape among those correct on it.
    Fastest,
    Tuned,
}

/// One bar: a variant or baseline on one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub kind: BarKind,
    /// The report's ★ variant (best on the primary shape): marked on every panel.
    pub star: bool,
    /// Median over seeds of the per-seed p50.
    pub p50: Option<f64>,
    /// Whiskers: the lowest per-seed min and the highest per-seed p90.
    pub spread: Option<(f64, f64)>,
    /// Every run on this shape passed the correctness check.
    pub correct: bool,
    /// Why there is no bar: `not measured`, with `(skipped)` or `(run failed)`.
    pub missing: Option<String>,
}

/// The bars of one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapePanel {
    pub title: String,
    pub bars: Vec<Bar>,
}

impl ShapePanel {
    pub(super) fn measured(&self) -> bool {
        self.bars.iter().any(|b| b.p50.is_some())
    }
}

/// A bar from the results of one shape.
fn bar(name: &str, kind: BarKind, results: &[BenchResult], shape: &str) -> Bar {
    let here: Vec<&BenchResult> = results.iter().filter(|r| r.shape == shape).collect();
    let ok = || here.iter().filter(|r| r.status.is_ok());
    let lo = ok().filter_map(|r| r.min_us).min_by(f64::total_cmp);
    let hi = ok().filter_map(|r| r.p90_us).max_by(f64::total_cmp);
    let p50 = shape_p50(results, shape);
    let missing = p50.is_none().then(|| {
        if here.iter().any(|r| r.status == RunStatus::Failed) {
            "not measured (run failed)".to_string()
        } else if !here.is_empty() && here.iter().all(|r| r.status == RunStatus::Skipped) {
            "not measured (skipped)".to_string()
        } else {
            "not measured".to_string()
        }
    });
    Bar {
        name: name.to_string(),
        kind,
        star: false,
        p50,
        spread: lo.zip(hi),
        correct: !here.is_empty()
            && here
                .iter()
                .filter(|r| r.status != RunStatus::Skipped)
                .all(|r| r.status.is_ok() && r.correctness_pass == Some(true)),
        missing,
    }
}

/// Which variants a p50 chart marks, and how it names what it shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    pub control: Option<&'a str>,
    /// The report's ★ variant.
    pub best: Option<&'a str>,
    /// The folder of the tune whose best is shown (`tune`: its bar is `tune-top1`).
    pub tuned: &'a str,
    /// The workload's dimensions, in the order a panel's title lists them.
    pub dims: &'a [String],
}

/// One panel per shape (in the order the results list them), bars in headline order:
/// baselines, then variants (the control first), then the tune's best. On each panel the
/// fastest variant correct on that shape is [`BarKind::Fastest`]; `best` (the report's ★,
/// judged on the primary shape) is starred on every panel.
pub fn p50_panels(a: &Artifacts, marks: Marks) -> Vec<ShapePanel> {
    let Marks {
        control,
        best,
        tuned,
        dims: order,
    } = marks;
    let baselines = a.baselines.as_deref().unwrap_or_default();
    let mut variants: Vec<&BenchFile> = a.benches.as_deref().unwrap_or_default().iter().collect();
    variants.sort_by_key(|f| (Some(f.name.as_str()) != control, f.name.clone()));
    let elite = a.tune.as_ref().and_then(|t| t.elite.first());
    shapes_in_order(baselines.iter().chain(variants.iter().copied()))
        .into_iter()
        .map(|shape| {
            let mut bars: Vec<Bar> = baselines
                .iter()
                .map(|b| bar(&b.name, BarKind::Baseline, &b.results, &shape))
                .collect();
            for v in &variants {
                let mut b = bar(&v.name, BarKind::Variant, &v.results, &shape);
                b.star = Some(v.name.as_str()) == best;
                bars.push(b);
            }
            let fastest = bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.kind == BarKind::Variant && b.correct)
                .filter_map(|(i, b)| b.p50.map(|p| (i, p)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map(|(i, _)| i);
            if let Some(i) = fastest {
                bars[i].kind = BarKind::Fastest;
            }
            // The tuner times the primary shape only; elsewhere its records check correctness.
            let timed_here = |e: &&repro_schema::EliteEntry| {
                e.bench
                    .iter()
                    .any(|r| r.shape == shape && r.p50_us.is_some())
            };
            if let Some(e) = elite.filter(timed_here) {
                bars.push(bar(
                    &format!("{tuned}-top{}", e.rank),
                    BarKind::Tuned,
                    &e.bench,
                    &shape,
                ));
            }
            let dims = variants
                .iter()
                .copied()
                .chain(baselines.iter())
                .flat_map(|f| f.results.iter())
                .find(|r| r.shape == shape)
                .map(|r| format!(" ({})", dims_text(&r.dims, order)))
                .unwrap_or_default();
            ShapePanel {
                title: format!("{shape}{dims}"),
                bars,
            }
        })
        .collect()
}

/// `B=2 H=8 S=512 D=64`: the dimensions in `order` (then any others, sorted).
pub fn dims_text(dims: &std::collections::BTreeMap<String, i64>, order: &[String]) -> String {
    let named = order.iter().filter_map(|d| dims.get(d).map(|v| (d, v)));
    let rest = dims.iter().filter(|(d, _)| !order.contains(d));
    named
        .chain(rest)
        .map(|(d, v)| format!("{d}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
