//! The files the bench stage reads and writes: its `BenchFile`s, the baselines it compares
//! with, and lines in its log.

use super::BASELINE_DIR;
use anyhow::Context as _;
use repro_schema::to_json_pretty;
use repro_schema::BenchFile;
use repro_schema::RunStatus;
use std::path::Path;

pub(super) fn write(dir: &Path, file: &BenchFile) -> anyhow::Result<()> {
    let path = dir.join(format!("{}.json", file.name));
    std::fs::write(&path, to_json_pretty(file))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A baseline to compare with: one that ran, timed by the variants' `method` (a speedup
/// across methods would compare different things). `Err`: why not.
pub(super) fn read_baseline(root: &Path, name: &str, method: &str) -> Result<BenchFile, String> {
    let path = root.join(BASELINE_DIR).join(format!("{name}.json"));
    let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let file: BenchFile = serde_json::from_slice(&text)
        .map_err(|e| format!("{} is not a bench file: {e}", path.display()))?;
    if file.status == RunStatus::Skipped {
        return Err(format!(
            "it was skipped ({})",
            file.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    let family = |m: &str| if m == "isolated" { "isolated" } else { "graph" };
    match file.results.iter().find_map(|r| r.timing_mode.as_ref()) {
        Some(t) if family(&t.method) != method => Err(format!(
            "it was timed by the {} method and the variants by the {method} method; \
             give both the same `--method`",
            family(&t.method)
        )),
        _ => Ok(file),
    }
}

pub(super) fn append_to_log(log: &Path, line: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open the stage log {}", log.display()))?;
    writeln!(f, "{line}").with_context(|| format!("cannot write {}", log.display()))
}
