//! What the engine recorded about the last run, read defensively from files only: the lock
//! (`artifacts/repro.lock`: per stage its fingerprint and output hashes) and the run state
//! (`.repro/state.json` or `.repro/state.yaml`: per stage its status, time and reason).
//!
//! Assumed shapes (YAML or JSON; unknown keys are ignored, missing ones read as absent):
//!
//! ```yaml
//! # artifacts/repro.lock
//! fingerprint: <hex>            # optional: the pipeline's fingerprint
//! stages:
//!   build:
//!     fingerprint: <hex>
//!     outputs: {artifacts/build/a.json: <sha256>}   # or [{path: ..., sha256: ...}]
//! # .repro/state.json
//! stages:
//!   build: {status: succeeded, elapsed_s: 12.5, reason: null}
//! ```
//!
//! The engine on main writes lock entries with `skipped: <reason>` / `gate_failed: <summary>`
//! (neither: passed) and failure records `.repro/state/<stage>.json` (`{fingerprint,
//! message}`); both are read. It records no stage times in files yet, so `elapsed_s` comes
//! only from a state file that has it. A lock entry may carry `status` / `elapsed_s`
//! itself; the state file wins where both do.

use anyhow::Context;
use serde_yaml::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The lock file, relative to the project root.
pub const LOCK: &str = "artifacts/repro.lock";
/// Run-state files the engine may write, in the order they are looked for.
pub const STATE_FILES: [&str; 2] = [".repro/state.json", ".repro/state.yaml"];
/// The engine's per-stage failure records.
pub const FAILURE_DIR: &str = ".repro/state";

/// One stage as the engine left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageState {
    pub fingerprint: Option<String>,
    /// `succeeded`, `passed`, `gate_failed`, `failed`, `skipped`, ... as the engine wrote it.
    pub status: Option<String>,
    pub elapsed_s: Option<f64>,
    pub reason: Option<String>,
    /// Output path (relative to the root) → recorded sha256.
    pub outputs: BTreeMap<String, String>,
}

impl StageState {
    /// The stage ended in a stage error (not a gate failure).
    pub fn failed(&self) -> bool {
        matches!(
            self.status.as_deref(),
            Some("failed" | "error" | "crashed" | "interrupted" | "timed_out")
        )
    }
}

/// The engine's record of the last run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunState {
    pub lock_found: bool,
    pub state_file: Option<String>,
    pub lock_fingerprint: Option<String>,
    pub stages: BTreeMap<String, StageState>,
}

impl RunState {
    /// Read the lock and state files under `root`. Absent files are not errors; unreadable
    /// or malformed ones are, naming the file.
    pub fn load(root: &Path) -> anyhow::Result<RunState> {
        let mut state = RunState::default();
        if let Some(lock) = read_value(&root.join(LOCK))? {
            state.lock_found = true;
            state.lock_fingerprint = str_at(&lock, &["fingerprint", "pipeline_fingerprint"]);
            for (name, entry) in stage_entries(&lock) {
                let s = state.stages.entry(name).or_default();
                s.fingerprint = str_at(entry, &["fingerprint"]);
                // The engine's lock says `skipped: <reason>` or `gate_failed: <summary>`;
                // an entry without either is a stage that passed.
                let skipped = str_at(entry, &["skipped"]);
                let gate = str_at(entry, &["gate_failed"]);
                s.status = str_at(entry, &["status"]).or_else(|| {
                    Some(match (&skipped, &gate) {
                        (Some(_), _) => "skipped".to_string(),
                        (None, Some(_)) => "gate_failed".to_string(),
                        (None, None) => "succeeded".to_string(),
                    })
                });
                s.reason = skipped.or(gate);
                s.elapsed_s = num_at(entry, &["elapsed_s", "duration_s", "seconds", "time_s"]);
                s.outputs = outputs_of(entry);
            }
        }
        // The engine's failure records: `.repro/state/<stage>.json` = {fingerprint, message}.
        if let Ok(dir) = std::fs::read_dir(root.join(FAILURE_DIR)) {
            let mut paths: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for path in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
            {
                let (Some(stem), Some(value)) = (path.file_stem(), read_value(path)?) else {
                    continue;
                };
                let s = state
                    .stages
                    .entry(stem.to_string_lossy().into_owned())
                    .or_default();
                s.status = Some("failed".into());
                s.reason = str_at(&value, &["message", "reason", "error"]);
            }
        }
        for file in STATE_FILES {
            if let Some(value) = read_value(&root.join(file))? {
                state.state_file = Some(file.to_string());
                for (name, entry) in stage_entries(&value) {
                    let s = state.stages.entry(name).or_default();
                    if let Some(status) = str_at(entry, &["status", "state"]) {
                        s.status = Some(status);
                    }
                    if let Some(t) =
                        num_at(entry, &["elapsed_s", "duration_s", "seconds", "time_s"])
                    {
                        s.elapsed_s = Some(t);
                    }
                    if let Some(r) = str_at(entry, &["reason", "error", "message"]) {
                        s.reason = Some(r);
                    }
                }
                break;
            }
        }
        Ok(state)
    }

    /// The pipeline's fingerprint: the lock's own when it records one, else the sha256 of
    /// the sorted `stage<TAB>fingerprint` lines.
    pub fn pipeline_fingerprint(&self) -> Option<String> {
        if let Some(f) = &self.lock_fingerprint {
            return Some(f.clone());
        }
        let lines: String = self
            .stages
            .iter()
            .filter_map(|(n, s)| s.fingerprint.as_ref().map(|f| format!("{n}\t{f}\n")))
            .collect();
        (!lines.is_empty()).then(|| crate::tools::hex(&Sha256::digest(lines.as_bytes())))
    }

    /// Outputs whose current contents differ from the hash the lock recorded (or that are
    /// missing): the artifacts no longer are what the recorded run produced.
    pub fn changed_outputs(&self, root: &Path) -> Vec<String> {
        let mut changed = Vec::new();
        for s in self.stages.values() {
            for (path, recorded) in &s.outputs {
                let recorded = recorded.trim_start_matches("sha256:");
                match std::fs::read(root.join(path)) {
                    Ok(bytes) if crate::tools::hex(&Sha256::digest(&bytes)) == recorded => {}
                    // A folder output: the engine's hash of a folder is its own business.
                    _ if root.join(path).is_dir() => {}
                    _ => changed.push(path.clone()),
                }
            }
        }
        changed.sort();
        changed.dedup();
        changed
    }
}

fn read_value(path: &Path) -> anyhow::Result<Option<Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let value: Value = serde_yaml::from_str(&text).with_context(|| {
        format!(
            "{} is not valid YAML/JSON; rerun `repro run` to rewrite it",
            path.display()
        )
    })?;
    Ok(Some(value))
}

/// `stages:` entries, or the top-level mapping when there is no `stages` key.
fn stage_entries(v: &Value) -> Vec<(String, &Value)> {
    let map = match v.get("stages") {
        Some(Value::Mapping(m)) => m,
        _ => match v {
            Value::Mapping(m) => m,
            _ => return Vec::new(),
        },
    };
    map.iter()
        .filter(|(_, e)| e.is_mapping())
        .filter_map(|(k, e)| k.as_str().map(|k| (k.to_string(), e)))
        .collect()
}

fn str_at(v: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|k| match v.get(*k)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

fn num_at(v: &Value, keys: &[&str]) -> Option<f64> {
    keys.iter().find_map(|k| v.get(*k)?.as_f64())
}

fn outputs_of(entry: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    match entry.get("outputs") {
        Some(Value::Mapping(m)) => {
            for (k, v) in m {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_str()) {
                    out.insert(k.to_string(), v.to_string());
                } else if let (Some(k), Some(h)) = (k.as_str(), str_at(v, &["sha256", "hash"])) {
                    out.insert(k.to_string(), h);
                }
            }
        }
        Some(Value::Sequence(items)) => {
            for item in items {
                if let (Some(p), Some(h)) =
                    (str_at(item, &["path"]), str_at(item, &["sha256", "hash"]))
                {
                    out.insert(p, h);
                }
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lock_and_state_and_spots_changed_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("artifacts/build")).unwrap();
        std::fs::create_dir_all(root.join(".repro")).unwrap();
        std::fs::write(root.join("artifacts/build/a.json"), "{}\n").unwrap();
        let good = crate::tools::hex(&Sha256::digest(b"{}\n"));
        std::fs::write(
            root.join(LOCK),
            format!(
                "stages:\n  build:\n    fingerprint: f1\n    outputs:\n      artifacts/build/a.json: {good}\n  bench:\n    fingerprint: f2\n    outputs:\n    - {{path: artifacts/bench/x.json, sha256: dead}}\n"
            ),
        )
        .unwrap();
        std::fs::write(
            root.join(".repro/state.json"),
            r#"{"stages": {"bench": {"status": "failed", "elapsed_s": 3.5, "reason": "exec crashed"}}}"#,
        )
        .unwrap();
        let st = RunState::load(root).unwrap();
        assert!(st.lock_found);
        assert_eq!(st.state_file.as_deref(), Some(".repro/state.json"));
        assert!(st.stages["bench"].failed());
        assert_eq!(st.stages["bench"].elapsed_s, Some(3.5));
        assert_eq!(st.changed_outputs(root), vec!["artifacts/bench/x.json"]);
        let fp = st.pipeline_fingerprint().unwrap();
        assert_eq!(fp.len(), 64);
    }

    #[test]
    fn reads_the_engines_lock_flags_and_failure_records() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".repro/state")).unwrap();
        std::fs::create_dir_all(root.join("artifacts")).unwrap();
        std::fs::write(
            root.join(LOCK),
            "version: 1\nstages:\n  build:\n    fingerprint: a\n  ncu-profile:\n    fingerprint: b\n    skipped: ncu not found\n  bench:\n    fingerprint: c\n    gate_failed: correctness x\n",
        )
        .unwrap();
        std::fs::write(
            root.join(".repro/state/evo-tune.json"),
            r#"{"fingerprint": "d", "message": "nvcc crashed"}"#,
        )
        .unwrap();
        let st = RunState::load(root).unwrap();
        assert_eq!(st.stages["build"].status.as_deref(), Some("succeeded"));
        assert_eq!(st.stages["ncu-profile"].status.as_deref(), Some("skipped"));
        assert_eq!(
            st.stages["ncu-profile"].reason.as_deref(),
            Some("ncu not found")
        );
        assert_eq!(st.stages["bench"].status.as_deref(), Some("gate_failed"));
        assert!(st.stages["evo-tune"].failed());
        assert_eq!(
            st.stages["evo-tune"].reason.as_deref(),
            Some("nvcc crashed")
        );
    }

    #[test]
    fn malformed_lock_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("artifacts")).unwrap();
        std::fs::write(dir.path().join(LOCK), "stages: [unclosed").unwrap();
        let err = RunState::load(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("repro.lock"), "{err:#}");
    }
}
