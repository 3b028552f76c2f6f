//! The best variant of a workload's bench records, by one rule for everything that needs it
//! (the report's ★, the profile stage's baseline shapes): the variant whose file holds the
//! performance gate against the control (the bench stage judged it best), else the fastest
//! variant on the primary shape whose results are all correct; and the fastest on any shape.

use repro_schema::BenchFile;
use repro_schema::BenchResult;
use repro_schema::RunStatus;

/// The gate the bench stage records in the best variant's file.
pub const CONTROL_GATE: &str = "performance.min_speedup_vs_control";

/// The best of `files` (one workload's variants) on `primary`.
pub fn best_variant<'f>(files: &'f [BenchFile], primary: &str) -> Option<&'f str> {
    if let Some(owner) = files
        .iter()
        .find(|f| f.gates.iter().any(|g| g.gate == CONTROL_GATE))
    {
        return Some(&owner.name);
    }
    fastest_on(files, primary)
}

/// The fastest of `files` on `shape` (the median of its seeds' p50s) among the variants whose
/// results are all correct: the kernel to call there, which need not be the best on the
/// primary.
pub fn fastest_on<'f>(files: &'f [BenchFile], shape: &str) -> Option<&'f str> {
    files
        .iter()
        .filter(|f| f.status.is_ok() && variant_correct(f))
        .filter_map(|f| shape_p50(&f.results, shape).map(|p| (p, f.name.as_str())))
        .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)))
        .map(|(_, n)| n)
}

/// Median of the per-seed p50s of the `ok` results for `shape`.
pub fn shape_p50(results: &[BenchResult], shape: &str) -> Option<f64> {
    median_p50(results.iter().filter(|r| r.shape == shape))
}

/// Median of the finite p50s of the `ok` results among `results`.
pub fn median_p50<'r>(results: impl IntoIterator<Item = &'r BenchResult>) -> Option<f64> {
    let mut v: Vec<f64> = results
        .into_iter()
        .filter(|r| r.status.is_ok())
        .filter_map(|r| r.p50_us)
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Whether every result that ran is `ok` and passed the correctness gates.
pub fn variant_correct(f: &BenchFile) -> bool {
    f.results
        .iter()
        .filter(|r| r.status != RunStatus::Skipped)
        .all(|r| r.status.is_ok() && r.correctness_pass == Some(true))
}
