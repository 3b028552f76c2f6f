//! Loading what the other stages wrote (docs/ARCHITECTURE.md, "The artifact contract") into the schema records.
//! A missing folder or file means the stage did not run (recorded as `None` / empty); a
//! file that exists but does not parse is an error naming it.

use anyhow::Context;
use repro_schema::{BenchFile, BuildRecord, EliteEntry, NcuSummary, TuneTrial};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// The tune stage's outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneData {
    pub trials: Vec<TuneTrial>,
    pub elite: Vec<EliteEntry>,
    /// The best trial's source diff (`artifacts/tune/proposals/*.patch`), by the path its
    /// elite entry names.
    pub diffs: std::collections::BTreeMap<String, String>,
}

/// Everything the report reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Artifacts {
    /// `artifacts/build/*.json`, sorted by variant; `None` when the folder is absent.
    pub builds: Option<Vec<BuildRecord>>,
    /// `artifacts/bench/*.json`, sorted by name.
    pub benches: Option<Vec<BenchFile>>,
    /// `artifacts/bench/baselines/*.json`, sorted by name.
    pub baselines: Option<Vec<BenchFile>>,
    /// The tune stage's outputs in scope: `artifacts/tune/` (a workload's section holds its
    /// own tune stage's).
    pub tune: Option<TuneData>,
    /// Every tune stage's outputs, by folder (`artifacts/tune`, `artifacts/tune-rmsnorm`).
    pub tunes: std::collections::BTreeMap<String, TuneData>,
    pub ncu: Option<NcuSummary>,
}

impl Artifacts {
    pub fn load(root: &Path) -> anyhow::Result<Artifacts> {
        let a = root.join("artifacts");
        let mut builds: Option<Vec<BuildRecord>> = read_dir_json(&a.join("build"))?;
        if let Some(b) = builds.as_mut() {
            b.sort_by(|x, y| x.variant.cmp(&y.variant));
        }
        let mut tunes = std::collections::BTreeMap::new();
        if let Ok(dirs) = std::fs::read_dir(&a) {
            for entry in dirs.filter_map(|e| e.ok()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                let tune = name == "tune" || name.starts_with("tune-");
                if tune && !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    if let Some(t) = read_tune(&entry.path())? {
                        tunes.insert(format!("artifacts/{name}"), t);
                    }
                }
            }
        }
        Ok(Artifacts {
            builds,
            benches: read_bench_dir(&a.join("bench"))?,
            baselines: read_bench_dir(&a.join("bench/baselines"))?,
            tune: tunes.get(repro_tune::options::DEFAULT_DIR).cloned(),
            tunes,
            ncu: read_json_opt(&a.join("ncu/summary.json"))?,
        })
    }
}

fn read_bench_dir(dir: &Path) -> anyhow::Result<Option<Vec<BenchFile>>> {
    let mut files: Option<Vec<BenchFile>> = read_dir_json(dir)?;
    if let Some(f) = files.as_mut() {
        f.sort_by(|x, y| x.name.cmp(&y.name));
    }
    Ok(files)
}

/// The `*.json` files directly in `dir`, parsed; `None` when `dir` does not exist.
fn read_dir_json<T: DeserializeOwned>(dir: &Path) -> anyhow::Result<Option<Vec<T>>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") && is_plain_file(&entry)? {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .iter()
        .map(|p| read_json(p))
        .collect::<anyhow::Result<Vec<T>>>()
        .map(Some)
}

/// Whether `entry` of a results folder is a regular file; a symlink is an error naming it
/// (a planted link is never followed, see [`super::tree`]).
fn is_plain_file(entry: &std::fs::DirEntry) -> anyhow::Result<bool> {
    let kind = entry
        .file_type()
        .with_context(|| format!("cannot read {}", entry.path().display()))?;
    if kind.is_symlink() {
        anyhow::bail!(
            "{} is a symlink: the results hold plain files, and repro never follows a link there\n  help: remove the link: `rm -- {}`",
            entry.path().display(),
            entry.path().display()
        );
    }
    Ok(kind.is_file())
}

pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_json(&text, &path.display().to_string())
}

/// Parse an artifact record, naming the file, line and column on failure.
pub(crate) fn parse_json<T: DeserializeOwned>(text: &str, name: &str) -> anyhow::Result<T> {
    parse_record(text, name, "rerun the stage that writes it")
}

/// Parse an artifact record; on failure, name `name`, the line and column, and `fix`.
pub(crate) fn parse_record<T: DeserializeOwned>(
    text: &str,
    name: &str,
    fix: &str,
) -> anyhow::Result<T> {
    serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{name}:{}:{}: not a valid artifact record: {e}; {fix}",
            e.line(),
            e.column()
        )
    })
}

fn read_json_opt<T: DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

fn read_tune(dir: &Path) -> anyhow::Result<Option<TuneData>> {
    let log = dir.join("tune_log.csv");
    if !log.is_file() {
        return Ok(None);
    }
    let mut trials = repro_schema::parse_tune_log(
        &std::fs::read_to_string(&log).with_context(|| format!("cannot read {}", log.display()))?,
        &log.display().to_string(),
    )?;
    trials.sort_by_key(|t| t.trial);
    let topk = dir.join("topk.json");
    let elite = if topk.is_file() {
        let v: serde_json::Value = read_json(&topk)?;
        // Either a bare list or `{"elite": [...]}`.
        let list = v.get("elite").cloned().unwrap_or(v);
        let mut elite: Vec<EliteEntry> = serde_json::from_value(list)
            .with_context(|| format!("{}: expected a list of elite entries", topk.display()))?;
        elite.sort_by_key(|e| e.rank);
        elite
    } else {
        Vec::new()
    };
    let mut diffs = std::collections::BTreeMap::new();
    for file in crate::context::diff_files(&elite) {
        // The entry names it relative to the project root; `dir` is its artifacts/tune.
        let name = Path::new(file).file_name().unwrap_or_default();
        let path = dir.join("proposals").join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (named by topk.json)", path.display()))?;
        diffs.insert(file.to_string(), text);
    }
    Ok(Some(TuneData {
        trials,
        elite,
        diffs,
    }))
}
