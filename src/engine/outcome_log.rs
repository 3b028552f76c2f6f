//! The last failed run of each stage, under `.repro/state/` (machine-local, never in the
//! lock), so `repro status` can say `failed` and why. Cleared when the stage succeeds.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The fingerprint the stage had when it failed.
    pub fingerprint: String,
    pub message: String,
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

pub fn clear(root: &Path, stage: &str) {
    let _ = std::fs::remove_file(dir(root).join(file_name(stage)));
}

/// Records of the given stages (those without one are left out).
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
    fn records_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Record {
            fingerprint: "f".into(),
            message: "exit 3".into(),
        };
        record(dir.path(), "a/b", &rec).unwrap();
        assert_eq!(load(dir.path(), ["a/b", "c"]).get("a/b"), Some(&rec));
        clear(dir.path(), "a/b");
        assert!(load(dir.path(), ["a/b"]).is_empty());
    }
}
