//! Locking a stage's outputs as the engine does after a successful run: tests of what a
//! later run may take from the committed results.
// Each test binary includes this file and uses a part of it.
#![allow(dead_code)]

use repro::engine::lockfile::{LockEntry, LockFile};
use std::collections::BTreeMap;
use std::path::Path;

/// Record `outputs` (paths relative to `root`) with their digests as `stage`'s in the lock.
pub fn lock_outputs(root: &Path, stage: &str, outputs: &[String]) {
    let outputs: BTreeMap<String, String> = outputs
        .iter()
        .map(|rel| {
            let digest = repro::stages::reuse::file_digest(&root.join(rel)).unwrap();
            (rel.clone(), digest)
        })
        .collect();
    let mut lock = LockFile::load(root).unwrap();
    lock.stages.insert(
        stage.into(),
        LockEntry {
            fingerprint: "f".into(),
            gate_failed: None,
            skipped: None,
            inputs: Default::default(),
            outputs,
        },
    );
    lock.save(root).unwrap();
}
