//! What a stage sees of the stages it needs: their recorded outputs, or their fingerprints.

use crate::{lockfile::LockEntry, lockfile::LockFile};
use foldhash::HashMap;
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
/// `current(j)` gives stage `j`'s fingerprint now and whether it kept earlier results;
/// `recorded` holds the lock the runs are read from.
pub fn upstream_fingerprints<'s>(
    project: &Project,
    i: usize,
    recorded: &mut RecordedUpstream,
    current: impl Fn(usize) -> Option<(&'s str, bool)>,
) -> BTreeMap<String, String> {
    let early_cutoff = project.stages[i].kind.early_cutoff();
    project
        .dag
        .needs(i)
        .iter()
        .map(|&j| {
            let (fingerprint, kept) = current(j).unwrap_or_default();
            let value = recorded
                .seen(project, j, early_cutoff, |run| {
                    // Kept results are the recorded run's, in place and unchanged: what
                    // needs them sees that run, so a machine that cannot re-measure reruns
                    // nothing downstream (the report says where each result was measured,
                    // from the lock).
                    run.fingerprint == fingerprint || kept
                })
                .unwrap_or_else(|| fingerprint.to_string());
            (project.stages[j].name.clone(), value)
        })
        .collect()
}

/// The lock's run of each stage and [`recorded_upstream`] of it, each looked up or
/// computed once however many stages need that stage, for one lock as it stands (a new one
/// after a stage records a run).
pub struct RecordedUpstream<'l> {
    lock: &'l LockFile,
    /// Stage → its run in the lock, and what stages with and without early cutoff see of it.
    runs: HashMap<usize, (Option<&'l LockEntry>, [Option<String>; 2])>,
}

impl<'l> RecordedUpstream<'l> {
    /// For evaluations that need at most `stages` stages.
    pub fn new(lock: &'l LockFile, stages: usize) -> RecordedUpstream<'l> {
        RecordedUpstream {
            lock,
            runs: HashMap::with_capacity_and_hasher(stages, Default::default()),
        }
    }

    /// What a stage needing stage `stage` sees of its recorded run, when there is one and
    /// `in_place` says its outputs are in place.
    fn seen(
        &mut self,
        project: &Project,
        stage: usize,
        early_cutoff: bool,
        in_place: impl Fn(&LockEntry) -> bool,
    ) -> Option<String> {
        let lock = self.lock;
        let (run, seen) = self
            .runs
            .entry(stage)
            .or_insert_with(|| (lock.stages.get(&project.stages[stage].name), [None, None]));
        let run = run.filter(|run| in_place(run))?;
        Some(
            seen[usize::from(early_cutoff)]
                .get_or_insert_with(|| recorded_upstream(run, early_cutoff))
                .clone(),
        )
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
        for part in ["\n", path, "\t", digest] {
            h.update(part.as_bytes());
        }
    }
    repro_base::tools::hex(&h.finalize())
}
