//! Reading the bench records: a shape's median p50, the shapes in order, whether a
//! variant is correct, and its status text.

use super::*;

/// Whether any of `files` holds a timed result (`ok`, with a p50).
pub fn any_timed<'f>(files: impl IntoIterator<Item = &'f BenchFile>) -> bool {
    files
        .into_iter()
        .flat_map(|f| &f.results)
        .any(|r| r.status == "ok" && r.p50_us.is_some())
}

/// Median of the per-seed p50s of the `ok` results for `shape`.
pub fn shape_p50(results: &[BenchResult], shape: &str) -> Option<f64> {
    let mut v: Vec<f64> = results
        .iter()
        .filter(|r| r.shape == shape && r.status == "ok")
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

/// Shapes in the order they first appear in the results.
pub fn shapes_in_order<'a>(files: impl IntoIterator<Item = &'a BenchFile>) -> Vec<String> {
    let mut shapes: Vec<String> = Vec::new();
    for f in files {
        for r in &f.results {
            if !shapes.contains(&r.shape) {
                shapes.push(r.shape.clone());
            }
        }
    }
    shapes
}

pub(super) fn variant_correct(f: &BenchFile) -> bool {
    f.results
        .iter()
        .filter(|r| r.status != "skipped")
        .all(|r| r.status == "ok" && r.correctness_pass == Some(true))
}

/// The headline status of a bench file: what failed, or that all passed (a skip cites
/// its reason, `skipped` the footnote it was given).
pub(super) fn file_status(f: &BenchFile, build_failures: &[String], skipped: &str) -> String {
    match f.status.as_str() {
        "skipped" => format!("⏭ {skipped}"),
        "failed" => format!(
            "❌ failed: {}",
            f.reason.as_deref().unwrap_or("no reason given")
        ),
        _ => {
            let mut bad: Vec<String> = build_failures.to_vec();
            if f.results.iter().any(|r| r.status == "failed") {
                bad.push("run failed".into());
            }
            if f.results
                .iter()
                .any(|r| r.status == "ok" && r.correctness_pass != Some(true))
            {
                bad.push("correctness".into());
            }
            if bad.is_empty() {
                "✅ pass".into()
            } else {
                format!("❌ {}", bad.join(", "))
            }
        }
    }
}
