//! What a stage sees of the stages it needs: their recorded outputs, or their fingerprints.

use crate::{lockfile::LockEntry, lockfile::LockFile};
use repro_pipeline::Project;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Needed stage name → what stage `i` depends on of it. When the lock holds the outputs
/// that are in place for that stage (a run with its current fingerprint, or earlier results
/// it kept because it cannot run here), that is the digest of those outputs alone: a rerun
/// that writes byte-identical results (a comment-only kernel edit gives the same cubins)
/// leaves what needs it up to date, and one that writes new results (new timings) makes it
/// stale — early cutoff, as DVC and Bazel do. Kinds that record provenance (the summary's
/// manifest names the sources' commit) opt out: they also see the upstream's fingerprint.
/// When the lock holds no such run, the stage is about to run, and its fingerprint stands
/// in for outputs not yet written.
///
/// `current(j)` gives stage `j`'s fingerprint now and whether it kept earlier results.
pub fn upstream_fingerprints(
    project: &Project,
    i: usize,
    lock: &LockFile,
    recorded: &mut RecordedUpstream,
    current: impl Fn(usize) -> Option<(String, bool)>,
) -> BTreeMap<String, String> {
    let early_cutoff = project.stages[i].kind.early_cutoff();
    project
        .dag
        .needs(i)
        .iter()
        .map(|&j| {
            let name = &project.stages[j].name;
            let (fingerprint, kept) = current(j).unwrap_or_default();
            let value = match lock.stages.get(name) {
                Some(run) if run.fingerprint == fingerprint => recorded.get(j, run, early_cutoff),
                // Kept results are the recorded run's, in place and unchanged: what needs
                // them sees that run, so a machine that cannot re-measure reruns nothing
                // downstream (the report says where each result was measured, from the lock).
                Some(run) if kept => recorded.get(j, run, early_cutoff),
                _ => fingerprint,
            };
            (name.clone(), value)
        })
        .collect()
}

/// [`recorded_upstream`] of each stage, computed once however many stages need it, for
/// one lock as it stands (a new one after a stage records a run).
#[derive(Default)]
pub struct RecordedUpstream(std::collections::HashMap<(usize, bool), String>);

impl RecordedUpstream {
    fn get(&mut self, stage: usize, run: &LockEntry, early_cutoff: bool) -> String {
        self.0
            .entry((stage, early_cutoff))
            .or_insert_with(|| recorded_upstream(run, early_cutoff))
            .clone()
    }
}

/// What a stage that needs the recorded run `run` sees of it: the digest of its outputs,
/// and of its fingerprint too for kinds without early cutoff.
pub fn recorded_upstream(run: &LockEntry, early_cutoff: bool) -> String {
    let mut h = Sha256::new();
    if early_cutoff {
        h.update(b"outputs");
    } else {
        h.update(run.fingerprint.as_bytes());
    }
    for (path, digest) in &run.outputs {
        h.update(format!("\n{path}\t{digest}").as_bytes());
    }
    repro_base::tools::hex(&h.finalize())
}
