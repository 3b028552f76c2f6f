//! The last run of each stage, in `.repro/state/runs.jsonl` (machine-local, never in the
//! lock): how it ended, how long it took, and why it failed. `repro status` reads it to say
//! `failed` and why; the summarize stage reads it for stage times. Stages that were up to
//! date keep the record of the run that made them so.
//!
//! One file for every stage, appended to (a line per stage that ran, the last one wins),
//! so that reading the records of N stages is one read, not N, and recording one is one
//! write; [`compact`] rewrites it with only the last line of each stage. The file of a
//! stage's record that an older version wrote (`.repro/state/<stage>.json`) is still read
//! for a stage the new file does not have.

use super::early::Snapshot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// How a stage's last run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Passed,
    GateFailed,
    Skipped,
    /// It could not run here (no GPU, no ncu, no torch), and the results of an earlier run,
    /// measured elsewhere, were kept as they were: outputs and lock entry untouched.
    Kept,
    Failed,
}

impl Outcome {
    /// The word `repro` prints for it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::GateFailed => "gate failed",
            Outcome::Skipped => "skipped",
            Outcome::Kept => "kept",
            Outcome::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The fingerprint the stage had when it ran.
    pub fingerprint: String,
    pub outcome: Outcome,
    /// Wall time of the run, seconds.
    pub elapsed_s: f64,
    /// The error, the failed gates or the reason for skipping; none when it passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Record {
    /// The failure message, when the run failed.
    pub fn failure(&self) -> Option<&str> {
        match self.outcome {
            Outcome::Failed => Some(self.message.as_deref().unwrap_or("")),
            _ => None,
        }
    }

    /// Why the stage could not re-run here, when it kept earlier results on these inputs.
    pub fn kept(&self) -> Option<&str> {
        match self.outcome {
            Outcome::Kept => Some(self.message.as_deref().unwrap_or("")),
            _ => None,
        }
    }
}

const FILE: &str = ".repro/state/runs.jsonl";

/// One line of the file: a stage's new record, or its record dropped.
#[derive(Serialize, Deserialize)]
struct Line {
    stage: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    record: Option<Record>,
}

fn append(root: &Path, line: &Line) -> std::io::Result<()> {
    let text = serde_json::to_string(line).expect("a record serializes");
    super::staging::append_line(&root.join(FILE), &text)
}

pub fn record(root: &Path, stage: &str, rec: &Record) -> std::io::Result<()> {
    append(
        root,
        &Line {
            stage: stage.to_string(),
            record: Some(rec.clone()),
        },
    )
}

/// Drop a stage's record (a failure its up-to-date outputs have superseded).
pub fn forget(root: &Path, stage: &str) {
    let _ = std::fs::remove_file(legacy_file(root, stage));
    let _ = append(
        root,
        &Line {
            stage: stage.to_string(),
            record: None,
        },
    );
}

/// Where a version before `runs.jsonl` kept a stage's record (`.repro/state/<stage>.json`).
fn legacy_file(root: &Path, stage: &str) -> std::path::PathBuf {
    root.join(".repro/state")
        .join(repro_pipeline::paths::safe_name(stage) + ".json")
}

/// Records an older version left, one file per stage: read (one listing of the folder,
/// then only the files there) for the stages `runs.jsonl` does not have.
fn read_legacy<'a>(
    root: &Path,
    stages: impl IntoIterator<Item = &'a str>,
    out: &mut BTreeMap<String, Record>,
) {
    let Ok(entries) = std::fs::read_dir(root.join(".repro/state")) else {
        return;
    };
    let present: std::collections::HashSet<std::ffi::OsString> =
        entries.flatten().map(|e| e.file_name()).collect();
    for stage in stages {
        if out.contains_key(stage) {
            continue;
        }
        let file = legacy_file(root, stage);
        if !file.file_name().is_some_and(|f| present.contains(f)) {
            continue;
        }
        if let Some(rec) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
        {
            out.insert(stage.to_string(), rec);
        }
    }
}

/// Every stage's last record, how many lines the file has, and its length in bytes.
fn read_all(root: &Path) -> (BTreeMap<String, Record>, usize, u64) {
    let mut out = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(root.join(FILE)) else {
        return (out, 0, 0);
    };
    let mut lines = 0;
    // A line cut short by a kill (or edited by hand) is skipped.
    for line in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Line>(l).ok())
    {
        lines += 1;
        match line.record {
            Some(rec) => out.insert(line.stage, rec),
            None => out.remove(&line.stage),
        };
    }
    (out, lines, text.len() as u64)
}

/// Whether a file of `lines` lines holding the records of `stages` stages is to be
/// rewritten: when it has grown past twice what it holds.
fn due(lines: usize, stages: usize) -> bool {
    lines > 2 * stages + 16
}

/// Records of the given stages (those without one are left out: the record is a
/// convenience, never a reason to stop).
pub fn load<'a>(
    root: &Path,
    stages: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, Record> {
    read(root).of(root, stages).0
}

/// The file read before the stages whose records are wanted are known (`repro status`
/// reads it while the pipeline loads).
pub fn read(root: &Path) -> RecordsFile {
    let (all, lines, len) = read_all(root);
    let loaded = Loaded {
        len,
        due: due(lines, all.len()),
    };
    RecordsFile { all, loaded }
}

/// [`read`] before the project lock is held ([`crate::early`]).
pub fn read_early(root: &Path) -> Option<Snapshot<RecordsFile>> {
    Snapshot::take(&[root.join(FILE)], || Some(read(root)))
}

/// The `early` read while the file is unchanged, else [`read`].
pub fn read_or_early(root: &Path, early: Option<Snapshot<RecordsFile>>) -> RecordsFile {
    early
        .and_then(|early| early.still(&[root.join(FILE)]))
        .unwrap_or_else(|| read(root))
}

/// Every record in the file, and how the file stood.
pub struct RecordsFile {
    all: BTreeMap<String, Record>,
    loaded: Loaded,
}

impl RecordsFile {
    /// [`load`]'s records of `stages`, and how the file stood for [`compact`].
    pub fn of<'a>(
        mut self,
        root: &Path,
        stages: impl IntoIterator<Item = &'a str>,
    ) -> (BTreeMap<String, Record>, Loaded) {
        let stages: Vec<&str> = stages.into_iter().collect();
        let mut out: BTreeMap<String, Record> = stages
            .iter()
            .filter_map(|s| self.all.remove_entry(*s))
            .collect();
        read_legacy(root, stages, &mut out);
        (out, self.loaded)
    }
}

/// The file as [`read`] found it, so that [`compact`] at the end of a run reads it again
/// only when it has to.
pub struct Loaded {
    /// Its length then, in bytes: records are only ever appended while a run holds the
    /// project lock, so the same length is the same file.
    len: u64,
    due: bool,
}

/// Rewrite the file with one line per stage when it has grown past twice that. The file
/// is read again only if it was already due when `loaded`, or records were added since.
pub fn compact(root: &Path, loaded: &Loaded) -> std::io::Result<()> {
    let len = std::fs::metadata(root.join(FILE)).map_or(0, |m| m.len());
    if !loaded.due && len == loaded.len {
        return Ok(());
    }
    let (all, lines, _) = read_all(root);
    if !due(lines, all.len()) {
        return Ok(());
    }
    let mut text = String::new();
    for (stage, record) in all {
        let line = Line {
            stage,
            record: Some(record),
        };
        text.push_str(&serde_json::to_string(&line).expect("a record serializes"));
        text.push('\n');
    }
    repro_base::fsio::write_atomic(&root.join(FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_record_of_a_stage_wins() {
        let dir = tempfile::tempdir().unwrap();
        let failed = Record {
            fingerprint: "f".into(),
            outcome: Outcome::Failed,
            elapsed_s: 1.5,
            message: Some("exit 3".into()),
        };
        record(dir.path(), "a/b", &failed).unwrap();
        let loaded = load(dir.path(), ["a/b", "c"]);
        assert_eq!(loaded.get("a/b"), Some(&failed));
        assert_eq!(loaded["a/b"].failure(), Some("exit 3"));
        assert!(!loaded.contains_key("c"));
        let passed = Record {
            outcome: Outcome::Passed,
            message: None,
            ..failed
        };
        record(dir.path(), "a/b", &passed).unwrap();
        let loaded = load(dir.path(), ["a/b"]);
        assert_eq!(loaded["a/b"].failure(), None);
        assert_eq!(loaded["a/b"].elapsed_s, 1.5);
    }

    #[test]
    fn a_torn_line_is_skipped_forget_drops_and_compact_keeps_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let rec = |fp: &str| Record {
            fingerprint: fp.into(),
            outcome: Outcome::Passed,
            elapsed_s: 0.5,
            message: None,
        };
        for k in 0..40 {
            record(root, "x", &rec(&format!("x{k}"))).unwrap();
        }
        record(root, "y", &rec("y")).unwrap();
        forget(root, "y");
        std::fs::OpenOptions::new()
            .append(true)
            .open(root.join(FILE))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"stage\":\"x\",\"rec"))
            .unwrap();
        let loaded = load(root, ["x", "y"]);
        assert_eq!(loaded.keys().collect::<Vec<_>>(), ["x"]);
        assert_eq!(loaded["x"].fingerprint, "x39");
        // Due when loaded, and unchanged since: compacted.
        let (_, unchanged) = read(root).of(root, ["x"]);
        assert!(unchanged.due);
        compact(root, &unchanged).unwrap();
        let text = std::fs::read_to_string(root.join(FILE)).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert_eq!(load(root, ["x"])["x"].fingerprint, "x39");
    }

    #[test]
    fn compact_reads_the_file_again_only_when_it_grew_or_was_due() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let rec = Record {
            fingerprint: "f".into(),
            outcome: Outcome::Passed,
            elapsed_s: 0.5,
            message: None,
        };
        record(root, "x", &rec).unwrap();
        let (_, small) = read(root).of(root, ["x"]);
        assert!(!small.due);
        // Grown past due after the load: compacted, though the load found nothing due.
        for _ in 0..20 {
            record(root, "x", &rec).unwrap();
        }
        compact(root, &small).unwrap();
        let text = std::fs::read_to_string(root.join(FILE)).unwrap();
        assert_eq!(text.lines().count(), 1);
        assert_eq!(load(root, ["x"])["x"], rec);
    }
}
