//! `artifacts/repro.lock`: per stage its fingerprint, the parts of that fingerprint (so
//! `status` can explain staleness after a checkout) and the digest of every output file.
//! Sorted, canonical YAML without timestamps: the same inputs give the same bytes.

use super::fingerprint::Inputs;
use crate::pipeline::paths::LOCK_FILE;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

const HEADER: &str =
    "# Written by repro: stage fingerprints and output digests. Do not edit; commit it.\n";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    pub version: u32,
    #[serde(default)]
    pub stages: BTreeMap<String, LockEntry>,
}

impl Default for LockFile {
    fn default() -> Self {
        LockFile {
            version: 1,
            stages: BTreeMap::new(),
        }
    }
}

/// What the last successful run of one stage recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockEntry {
    pub fingerprint: String,
    /// Set when the stage ran but a gate failed (the summary of which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_failed: Option<String>,
    /// Set when the stage could not do its work for a reason the user can fix (a missing
    /// optional tool): the reason. Kinds put that tool's presence in their inputs, so
    /// installing it makes the stage stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub inputs: Inputs,
    /// Output file (relative path) → sha256.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
}

impl LockFile {
    /// The project's lock; empty when there is none yet.
    pub fn load(root: &Path) -> anyhow::Result<LockFile> {
        let path = root.join(LOCK_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockFile::default()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        serde_yaml::from_str(&text).with_context(|| {
            format!(
                "{} is not a repro lock file (help: restore it with `git checkout {LOCK_FILE}`, or delete it so every stage reruns)",
                path.display()
            )
        })
    }

    /// The canonical text of the lock.
    pub fn render(&self) -> String {
        HEADER.to_string() + &serde_yaml::to_string(self).expect("lock serializes")
    }

    /// Write the lock atomically (a crash leaves the old or the new file, never half).
    pub fn save(&self, root: &Path) -> anyhow::Result<()> {
        let path = root.join(LOCK_FILE);
        super::staging::write_atomic(&path, self.render().as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_renders_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = LockFile::default();
        for name in ["zeta", "alpha"] {
            lock.stages.insert(
                name.into(),
                LockEntry {
                    fingerprint: "ab".into(),
                    gate_failed: None,
                    skipped: None,
                    inputs: Inputs {
                        kind: "cmd".into(),
                        command: "c".into(),
                        ..Default::default()
                    },
                    outputs: [
                        ("out/b".to_string(), "2".to_string()),
                        ("out/a".to_string(), "1".to_string()),
                    ]
                    .into(),
                },
            );
        }
        lock.save(dir.path()).unwrap();
        let back = LockFile::load(dir.path()).unwrap();
        assert_eq!(back, lock);
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text, back.render());
        assert!(text.find("alpha").unwrap() < text.find("zeta").unwrap());
    }
}
