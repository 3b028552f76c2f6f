//! The last run of each stage, under `.repro/state/<stage>.json` (machine-local, never in
//! the lock): how it ended, how long it took, and why it failed. `repro status` reads it to
//! say `failed` and why; the summarize stage reads it for stage times. Stages that were up
//! to date keep the record of the run that made them so.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

fn dir(root: &Path) -> PathBuf {
    root.join(".repro/state")
}

fn file_name(stage: &str) -> String {
    super::staging::safe_name(stage) + ".json"
}

pub fn record(root: &Path, stage: &str, rec: &Record) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(rec).expect("record serializes");
    super::staging::write_atomic(&dir(root).join(file_name(stage)), text.as_bytes())
}

/// Drop a stage's record (a failure its up-to-date outputs have superseded).
pub fn forget(root: &Path, stage: &str) {
    let _ = std::fs::remove_file(dir(root).join(file_name(stage)));
}

/// Records of the given stages (those without one, or with an unreadable one, are left out:
/// the record is a convenience, never a reason to stop).
pub fn load<'a>(
    root: &Path,
    stages: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, Record> {
    let mut out = BTreeMap::new();
    if !dir(root).is_dir() {
        return out;
    }
    for stage in stages {
        if let Ok(text) = std::fs::read_to_string(dir(root).join(file_name(stage))) {
            if let Ok(rec) = serde_json::from_str(&text) {
                out.insert(stage.to_string(), rec);
            }
        }
    }
    out
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
    fn a_corrupt_record_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".repro/state")).unwrap();
        std::fs::write(dir.path().join(".repro/state/x.json"), "{not json").unwrap();
        assert!(load(dir.path(), ["x"]).is_empty());
    }
}
