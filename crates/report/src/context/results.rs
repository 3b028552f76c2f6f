//! Reading the bench records: a shape's median p50, the shapes in order, whether a
//! variant is correct, and its status text.

use super::*;

/// Whether any of `files` holds a timed result (`ok`, with a p50).
pub fn any_timed<'f>(files: impl IntoIterator<Item = &'f BenchFile>) -> bool {
    files
        .into_iter()
        .flat_map(|f| &f.results)
        .any(|r| r.status.is_ok() && r.p50_us.is_some())
}

pub use crate::best::shape_p50;

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

/// The headline status of a bench file: what failed, or that all passed (a skip cites
/// its reason, `skipped` the footnote it was given).
pub(super) fn file_status(f: &BenchFile, build_failures: &[String], skipped: &str) -> String {
    match f.status {
        RunStatus::Skipped => format!("⏭ {skipped}"),
        RunStatus::Failed => format!(
            "❌ failed: {}",
            f.reason.as_deref().unwrap_or("no reason given")
        ),
        _ => {
            let mut bad: Vec<String> = build_failures.to_vec();
            if f.results.iter().any(|r| r.status == RunStatus::Failed) {
                bad.push("run failed".into());
            }
            if f.results
                .iter()
                .any(|r| r.status.is_ok() && r.correctness_pass != Some(true))
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
