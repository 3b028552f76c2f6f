//! What the engine recorded about the last run, read through the engine's own types: the
//! lock (`artifacts/repro.lock`: per stage its fingerprint, flags and output digests) and
//! the last-run records (`.repro/state/<stage>.json`: outcome, wall time, message).

use repro_engine::lockfile::LockFile;
use repro_engine::{run_record, run_record::Outcome};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

pub use repro_pipeline::paths::LOCK_FILE as LOCK;
use repro_pipeline::paths::RESULT_DIRS;

/// One stage as the engine left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageState {
    /// The fingerprint of its last successful run (from the lock).
    pub fingerprint: Option<String>,
    /// The last run's outcome (`passed`, `gate failed`, `skipped` or `failed`), else what
    /// the lock says of the last successful one.
    pub status: Option<Outcome>,
    /// Wall time of its last run.
    pub elapsed_s: Option<f64>,
    /// The error, the failed gates or why it was skipped.
    pub reason: Option<String>,
    /// Output path (relative to the root) → recorded sha256.
    pub outputs: BTreeMap<String, String>,
    /// The machine its recorded results were made on, as its lock entry names it (GPU
    /// model, arch, driver), for stages that record one.
    pub hardware: Option<String>,
    /// The tool versions its lock entry records (`nvcc`, `ncu`, `python`, `torch`, …).
    pub tools: BTreeMap<String, String>,
}

impl StageState {
    /// The last run ended in a stage error (not a gate failure).
    pub fn failed(&self) -> bool {
        self.status == Some(Outcome::Failed)
    }

    pub fn skipped(&self) -> bool {
        self.status == Some(Outcome::Skipped)
    }
}

/// The engine's record of the last run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunState {
    pub lock_found: bool,
    pub stages: BTreeMap<String, StageState>,
}

impl RunState {
    /// Read the lock and the run records under `root` for the named stages. A missing lock
    /// is not an error; a malformed one is, naming the file. Lock entries of stages not
    /// named (kept for another pipeline file that shares the lock) are not this pipeline's.
    pub fn load<'a>(
        root: &Path,
        stage_names: impl IntoIterator<Item = &'a str> + Clone,
    ) -> anyhow::Result<RunState> {
        let mut state = RunState {
            lock_found: root.join(LOCK).is_file(),
            ..RunState::default()
        };
        let declared: std::collections::BTreeSet<&str> = stage_names.clone().into_iter().collect();
        let lock = LockFile::load(root)?;
        for (name, entry) in lock
            .stages
            .into_iter()
            .filter(|(name, _)| declared.contains(name.as_str()))
        {
            let (outcome, reason) = match (&entry.skipped, &entry.gate_failed) {
                (Some(r), _) => (Outcome::Skipped, Some(r.clone())),
                (None, Some(g)) => (Outcome::GateFailed, Some(g.clone())),
                (None, None) => (Outcome::Passed, None),
            };
            state.stages.insert(
                name,
                StageState {
                    fingerprint: Some(entry.fingerprint),
                    status: Some(outcome),
                    elapsed_s: None,
                    reason,
                    hardware: entry.inputs.hardware.clone(),
                    tools: entry.inputs.tools.clone(),
                    outputs: entry.outputs,
                },
            );
        }
        for (name, record) in run_record::load(root, stage_names) {
            let s = state.stages.entry(name).or_default();
            // A record of the run the lock describes, or of a later failed one.
            let current = s.fingerprint.as_deref() == Some(record.fingerprint.as_str());
            // Results kept because this machine cannot re-run the stage read as the run
            // that made them: nothing of this machine's attempt enters the report.
            if record.kept().is_some() {
                continue;
            }
            if current || record.outcome == Outcome::Failed {
                s.status = Some(record.outcome);
                s.reason = record.message;
                s.elapsed_s = Some(record.elapsed_s);
            }
        }
        Ok(state)
    }

    /// Stage times for the stages whose last run was not here: `previous` (the manifest of
    /// an earlier summary) recorded them, with the fingerprint they still have. A report
    /// re-rendered on another machine then says what the one that measured said.
    pub fn carry_times(&mut self, previous: Option<&serde_yaml::Value>) {
        let Some(stages) = previous.and_then(|m| m["stages"].as_mapping()) else {
            return;
        };
        for (name, s) in self.stages.iter_mut() {
            let Some(was) = stages.get(name.as_str()) else {
                continue;
            };
            let same = was["fingerprint"].as_str() == s.fingerprint.as_deref();
            if s.elapsed_s.is_none() && same {
                s.elapsed_s = was["elapsed_s"].as_f64();
            }
        }
    }

    /// The pipeline's fingerprint: the sha256 of the sorted `stage<TAB>fingerprint` lines.
    pub fn pipeline_fingerprint(&self) -> Option<String> {
        let lines: String = self
            .stages
            .iter()
            .filter_map(|(n, s)| s.fingerprint.as_ref().map(|f| format!("{n}\t{f}\n")))
            .collect();
        (!lines.is_empty()).then(|| repro_base::tools::hex(&Sha256::digest(lines.as_bytes())))
    }

    /// Committed outputs (under `artifacts/` and `reports/`) whose current contents differ
    /// from the digest the lock recorded, or that are missing: the results no longer are
    /// what the recorded run produced. Machine-local outputs (`.repro/cubins/`) are left
    /// out: a fresh clone has none.
    pub fn changed_outputs(&self, root: &Path) -> Vec<String> {
        let committed = |path: &str| RESULT_DIRS.iter().any(|d| Path::new(path).starts_with(d));
        let mut changed: Vec<String> = self
            .stages
            .values()
            .flat_map(|s| &s.outputs)
            .filter(|(path, _)| committed(path))
            .filter(|(path, recorded)| {
                repro_engine::statcache::hash_file(&root.join(path))
                    .ok()
                    .as_ref()
                    != Some(*recorded)
            })
            .map(|(path, _)| path.clone())
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_engine::lockfile::LockEntry;
    use repro_engine::run_record::Record;

    fn lock_entry(fingerprint: &str, outputs: &[(&str, &str)]) -> LockEntry {
        LockEntry {
            fingerprint: fingerprint.into(),
            gate_failed: None,
            skipped: None,
            inputs: Default::default(),
            outputs: outputs
                .iter()
                .map(|(p, d)| (p.to_string(), d.to_string()))
                .collect(),
        }
    }

    #[test]
    fn reads_the_lock_flags_the_run_records_and_spots_changed_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("artifacts/build")).unwrap();
        std::fs::write(root.join("artifacts/build/a.json"), "{}\n").unwrap();
        let good = repro_base::tools::hex(&Sha256::digest(b"{}\n"));
        let mut lock = LockFile::default();
        let outputs = [
            ("artifacts/build/a.json", good.as_str()),
            ("artifacts/build/gone.json", good.as_str()),
            (".repro/cubins/a.cubin", good.as_str()),
        ];
        lock.stages
            .insert("a-stage".into(), lock_entry("a", &outputs));
        let mut skipped = lock_entry("b", &[]);
        skipped.skipped = Some("ncu not found".into());
        lock.stages.insert("b-stage".into(), skipped);
        let mut gated = lock_entry("c", &[]);
        gated.gate_failed = Some("correctness x".into());
        lock.stages.insert("c-stage".into(), gated);
        lock.save(root).unwrap();
        let record = |fp: &str, outcome, message: Option<&str>| Record {
            fingerprint: fp.into(),
            outcome,
            elapsed_s: 2.5,
            message: message.map(String::from),
        };
        run_record::record(root, "a-stage", &record("a", Outcome::Passed, None)).unwrap();
        // A record of an older run of `c`, which the lock has replaced: not used.
        run_record::record(root, "c-stage", &record("old", Outcome::Passed, None)).unwrap();
        let failed = record("d", Outcome::Failed, Some("nvcc crashed"));
        run_record::record(root, "d-stage", &failed).unwrap();
        let names = ["a-stage", "b-stage", "c-stage", "d-stage"];
        let st = RunState::load(root, names).unwrap();
        assert!(st.lock_found);
        assert_eq!(st.stages["a-stage"].status, Some(Outcome::Passed));
        assert_eq!(st.stages["a-stage"].elapsed_s, Some(2.5));
        assert!(st.stages["b-stage"].skipped());
        assert_eq!(
            st.stages["b-stage"].reason.as_deref(),
            Some("ncu not found")
        );
        assert_eq!(st.stages["c-stage"].status, Some(Outcome::GateFailed));
        assert_eq!(st.stages["c-stage"].elapsed_s, None);
        assert!(st.stages["d-stage"].failed());
        assert_eq!(st.stages["d-stage"].reason.as_deref(), Some("nvcc crashed"));
        assert_eq!(st.changed_outputs(root), vec!["artifacts/build/gone.json"]);
        assert_eq!(st.pipeline_fingerprint().unwrap().len(), 64);
    }

    #[test]
    fn malformed_lock_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("artifacts")).unwrap();
        std::fs::write(dir.path().join(LOCK), "stages: [unclosed").unwrap();
        let err = RunState::load(dir.path(), ["x"]).unwrap_err();
        assert!(format!("{err:#}").contains("repro.lock"), "{err:#}");
    }
}
