//! One shape's ranking, from records alone: whether a kernel may be called for the shape
//! (its correctness there), its figure by the harness and by ncu, and the figures in order
//! with the runner-up's margin and whether their spreads overlap.

use repro_schema::{BenchResult, Figure, NcuTarget, Ranking, RunStatus};
use std::collections::BTreeMap;

/// What one kernel's records say about calling it for one shape.
#[derive(Debug, PartialEq)]
pub(super) enum Eligibility {
    /// It has no record of the shape: nothing to judge, nothing to say.
    NoRecords,
    Eligible,
    /// The first record (or missing record) that rules it out.
    Ineligible(String),
}

/// Whether `results` (one kernel's) make it callable for `shape` on `gpu`: every record of
/// the shape ran on `gpu`, is `ok` and passed correctness, and each `(recipe, seed)` of
/// `expected` has one. A record that names no GPU (a run that failed before reaching one)
/// is judged all the same.
pub(super) fn eligibility(
    results: &[BenchResult],
    shape: &str,
    expected: &[(&str, u64)],
    gpu: Option<&str>,
) -> Eligibility {
    let records: Vec<&BenchResult> = results.iter().filter(|r| r.shape == shape).collect();
    if records.is_empty() {
        return Eligibility::NoRecords;
    }
    for r in &records {
        if let Some(why) = ruled_out(r, gpu) {
            return Eligibility::Ineligible(why);
        }
    }
    let missing = expected.iter().find(|(recipe, seed)| {
        !records
            .iter()
            .any(|r| r.inputs == *recipe && r.seed == *seed)
    });
    match missing {
        Some((recipe, seed)) => {
            Eligibility::Ineligible(format!("no record of {shape}/{recipe}/seed{seed}"))
        }
        None => Eligibility::Eligible,
    }
}

/// Why one record rules its kernel out, if it does.
fn ruled_out(r: &BenchResult, gpu: Option<&str>) -> Option<String> {
    let subject = r.run_subject();
    if let (Some(on), Some(gpu)) = (r.device_name.as_deref(), gpu) {
        if on != gpu {
            return Some(format!("{subject} was measured on {on}, not {gpu}"));
        }
    }
    let error = || {
        r.error
            .as_deref()
            .map_or_else(String::new, |e| format!(": {e}"))
    };
    match &r.status {
        RunStatus::Ok if r.correctness_pass == Some(true) => None,
        RunStatus::Ok => Some(format!("correctness failed on {subject}")),
        RunStatus::Failed => Some(format!("run failed on {subject}{}", error())),
        RunStatus::Skipped => Some(format!("not run on {subject}{}", error())),
        RunStatus::Other(status) => Some(format!("status `{status}` on {subject}")),
    }
}

/// Whether `r` is a timing: `ok`, with a finite p50.
fn timed(r: &BenchResult) -> bool {
    r.status.is_ok() && r.p50_us.is_some_and(f64::is_finite)
}

/// The GPU model most timed records among `results` were measured on (of several with as
/// many, the first by name); `None` when no timed record names one.
pub(super) fn gpu_of<'r>(results: impl IntoIterator<Item = &'r BenchResult>) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results.into_iter().filter(|r| timed(r)) {
        if let Some(gpu) = r.device_name.as_deref() {
            *counts.entry(gpu).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))
        .map(|(gpu, _)| gpu.to_string())
}

/// `name`'s harness figure on `shape` from its timed records on `gpu`: the median p50 over
/// them (one per seed), spread from the lowest `p50 − ci95` to the highest `p50 + ci95`.
pub(super) fn harness_figure(
    name: &str,
    results: &[BenchResult],
    shape: &str,
    gpu: &str,
) -> Option<Figure> {
    let runs: Vec<&BenchResult> = results
        .iter()
        .filter(|r| r.shape == shape && timed(r) && r.device_name.as_deref() == Some(gpu))
        .collect();
    let us = crate::best::median_p50(runs.iter().copied())?;
    let bound = |r: &&BenchResult, side: f64| {
        let ci = r.ci95_us.filter(|c| c.is_finite()).unwrap_or(0.0);
        r.p50_us.unwrap_or(us) + side * ci
    };
    Some(Figure {
        name: name.to_string(),
        us,
        low_us: runs
            .iter()
            .map(|r| bound(r, -1.0))
            .fold(f64::INFINITY, f64::min),
        high_us: runs
            .iter()
            .map(|r| bound(r, 1.0))
            .fold(f64::NEG_INFINITY, f64::max),
        count: u32::try_from(runs.len()).unwrap_or(u32::MAX),
    })
}

/// A profiled target's figure: ncu's median kernel time, spread over the profiled launches.
pub(super) fn ncu_figure(t: &NcuTarget) -> Option<Figure> {
    let us = t.kernel_time_us.filter(|x| x.is_finite())?;
    Some(Figure {
        name: t.variant.clone(),
        us,
        low_us: t.kernel_time_us_min.unwrap_or(us),
        high_us: t.kernel_time_us_max.unwrap_or(us),
        count: t.launches.unwrap_or(0),
    })
}

/// Whether the GPU an ncu profile's reuse key records (`<model> <arch>`, e.g. `NVIDIA H100
/// 80GB HBM3 sm_90`) is the model `gpu` the harness records name.
pub(super) fn names_model(key: &str, gpu: &str) -> bool {
    match key.strip_prefix(gpu) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix(' ')
            .is_some_and(|arch| arch.starts_with("sm_") && !arch.contains(' ')),
        None => false,
    }
}

/// `figures` fastest first (equal figures by name): the best, the runner-up, how much
/// slower it is and whether the two spreads overlap. `None` without a figure.
pub(super) fn rank(mut figures: Vec<Figure>) -> Option<Ranking> {
    figures.sort_by(|a, b| a.us.total_cmp(&b.us).then_with(|| a.name.cmp(&b.name)));
    let ranked = figures.len();
    let mut order = figures.into_iter();
    let best = order.next()?;
    let runner_up = order.next();
    let margin_pct = runner_up
        .as_ref()
        .filter(|_| best.us > 0.0)
        .map(|r| (r.us / best.us - 1.0) * 100.0);
    let overlap = runner_up.as_ref().is_some_and(|r| r.low_us <= best.high_us);
    Some(Ranking {
        best,
        runner_up,
        margin_pct,
        overlap,
        ranked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "NVIDIA H100 80GB HBM3";

    /// A correct, timed record of `shape`/gaussian/seed `seed` on the H100.
    fn run(shape: &str, seed: u64, p50: f64, ci95: f64) -> BenchResult {
        let mut r = BenchResult::blank(shape, BTreeMap::new(), seed, (1, 1), RunStatus::Ok);
        (r.p50_us, r.ci95_us, r.correctness_pass) = (Some(p50), Some(ci95), Some(true));
        r.device_name = Some(H100.into());
        r
    }

    /// A correct, untimed record of `shape`/`recipe`/seed `seed`.
    fn checked(shape: &str, recipe: &str, seed: u64) -> BenchResult {
        let mut r = run(shape, seed, 0.0, 0.0);
        (r.inputs, r.p50_us, r.ci95_us) = (recipe.into(), None, None);
        r
    }

    fn figure(name: &str, us: f64, low: f64, high: f64) -> Figure {
        Figure {
            name: name.into(),
            us,
            low_us: low,
            high_us: high,
            count: 3,
        }
    }

    const EXPECTED: [(&str, u64); 3] = [("gaussian", 0), ("gaussian", 1), ("sharp", 0)];

    #[test]
    fn a_kernel_correct_on_every_recipe_and_seed_of_the_shape_is_eligible() {
        let records = [
            run("long", 0, 10.0, 0.1),
            run("long", 1, 10.2, 0.1),
            checked("long", "sharp", 0),
            run("small", 0, 1.0, 0.0),
        ];
        assert_eq!(
            eligibility(&records, "long", &EXPECTED, Some(H100)),
            Eligibility::Eligible
        );
        assert_eq!(
            eligibility(&records, "mission", &EXPECTED, Some(H100)),
            Eligibility::NoRecords
        );
    }

    #[test]
    fn one_incorrect_failed_or_missing_record_of_the_shape_rules_the_kernel_out() {
        let mut records = vec![
            run("long", 0, 10.0, 0.1),
            run("long", 1, 10.2, 0.1),
            checked("long", "sharp", 0),
        ];
        // Only the untimed recipe is wrong: the timed records pass, the kernel is still out.
        records[2].correctness_pass = Some(false);
        assert_eq!(
            eligibility(&records, "long", &EXPECTED, Some(H100)),
            Eligibility::Ineligible("correctness failed on long/sharp/seed0".into())
        );
        records[2] = checked("long", "sharp", 0);
        records[1].status = RunStatus::Failed;
        records[1].error = Some("timed out".into());
        assert_eq!(
            eligibility(&records, "long", &EXPECTED, Some(H100)),
            Eligibility::Ineligible("run failed on long/seed1: timed out".into())
        );
        records.remove(1);
        assert_eq!(
            eligibility(&records, "long", &EXPECTED, Some(H100)),
            Eligibility::Ineligible("no record of long/gaussian/seed1".into())
        );
        // Still correct on another shape.
        let small = [run("small", 0, 1.0, 0.0)];
        assert_eq!(
            eligibility(&small, "small", &[("gaussian", 0)], Some(H100)),
            Eligibility::Eligible
        );
    }

    #[test]
    fn a_record_from_another_gpu_does_not_count() {
        let mut records = vec![run("long", 0, 10.0, 0.1)];
        records[0].device_name = Some("NVIDIA L4".into());
        assert_eq!(
            eligibility(&records, "long", &[("gaussian", 0)], Some(H100)),
            Eligibility::Ineligible(format!("long/seed0 was measured on NVIDIA L4, not {H100}"))
        );
        assert_eq!(harness_figure("v", &records, "long", H100), None);
        records.push(run("long", 1, 9.0, 0.1));
        records.push(run("long", 2, 9.0, 0.1));
        assert_eq!(gpu_of(&records).as_deref(), Some(H100), "the most timed");
    }

    #[test]
    fn the_harness_figure_is_the_median_over_seeds_with_the_widest_interval() {
        let records = [
            run("long", 0, 10.0, 0.1),
            run("long", 1, 10.4, 0.2),
            run("long", 2, 10.2, 0.0),
            checked("long", "sharp", 0),
        ];
        let f = harness_figure("v", &records, "long", H100).unwrap();
        assert_eq!((f.us, f.count), (10.2, 3));
        assert!(
            (f.low_us - 9.9).abs() < 1e-9 && (f.high_us - 10.6).abs() < 1e-9,
            "{f:?}"
        );
    }

    #[test]
    fn the_ranking_gives_the_margin_and_says_when_the_spreads_overlap() {
        let clear = rank(vec![
            figure("slow", 12.0, 11.9, 12.1),
            figure("fast", 10.0, 9.9, 10.1),
        ])
        .unwrap();
        assert_eq!(clear.best.name, "fast");
        assert_eq!(clear.runner_up.as_ref().unwrap().name, "slow");
        assert!((clear.margin_pct.unwrap() - 20.0).abs() < 1e-9);
        assert!(!clear.overlap);
        assert_eq!(clear.ranked, 2);

        // 1 % apart, but each one's interval reaches into the other's: a tie.
        let tie = rank(vec![
            figure("a", 10.0, 9.8, 10.2),
            figure("b", 10.1, 9.9, 10.3),
            figure("c", 30.0, 30.0, 30.0),
        ])
        .unwrap();
        assert_eq!((tie.best.name.as_str(), tie.ranked), ("a", 3));
        assert!(tie.overlap);
        assert!((tie.margin_pct.unwrap() - 1.0).abs() < 1e-9);

        // Equal figures: by name, and a tie.
        let equal = rank(vec![figure("z", 5.0, 5.0, 5.0), figure("y", 5.0, 5.0, 5.0)]).unwrap();
        assert_eq!(equal.best.name, "y");
        assert!(equal.overlap);

        let alone = rank(vec![figure("only", 5.0, 5.0, 5.0)]).unwrap();
        assert_eq!(
            (alone.runner_up, alone.margin_pct, alone.overlap),
            (None, None, false)
        );
        assert_eq!(rank(Vec::new()), None);
    }

    #[test]
    fn an_ncu_gpu_key_names_the_model_and_its_architecture_only() {
        assert!(names_model("NVIDIA H100 80GB HBM3 sm_90", H100));
        assert!(names_model(H100, H100));
        assert!(!names_model("NVIDIA H100 80GB HBM3 sm_90", "NVIDIA H100"));
        assert!(!names_model("NVIDIA L4 sm_89", H100));
    }
}
