//! What evaluating a stage reads of its files before its kind and the stages it needs are
//! consulted, read ahead on a second thread while the stages before it are evaluated: at
//! thousands of stages, digesting deps and outputs (a `stat` each, and the digest cache)
//! is half of an evaluation, and needs nothing from any other stage.

use super::change::outputs_on_disk;
use crate::fingerprint::Declared;
use crate::lockfile::LockFile;
use crate::statcache::StatCache;
use repro_pipeline::Project;
use std::collections::BTreeMap;

/// What evaluating one stage reads of its files.
pub(super) struct StageFiles {
    pub(super) declared: Declared,
    /// Its outputs on disk, when the lock records a run of it (only then are they compared).
    pub(super) outputs: Option<BTreeMap<String, String>>,
}

impl StageFiles {
    /// Those of stage `i`, whose recorded run, if any, is in `lock`.
    pub(super) fn read(
        project: &Project,
        i: usize,
        lock: &LockFile,
        cache: &mut StatCache,
    ) -> StageFiles {
        let stage = &project.stages[i];
        StageFiles {
            declared: Declared::read(project, stage, cache),
            outputs: lock
                .stages
                .contains_key(&stage.name)
                .then(|| outputs_on_disk(project, stage, cache)),
        }
    }
}

/// Below this many stages a second thread costs more than it saves.
const PARALLEL_FROM: usize = 64;

/// Stages read per message: the evaluation waits for a batch rather than for each stage.
const BATCH: usize = 32;

/// Hand each stage's [`StageFiles`] to `each`, in topological order, and then `fork` back
/// (a [`StatCache::fork`] they were read with, for the caller to merge). In a large
/// pipeline they are read ahead on another thread while `each` evaluates the stages
/// before: the reads need no other stage, and nothing is written while they are read. An
/// error from `each` ends both.
pub(super) fn read_ahead<E>(
    project: &Project,
    lock: &LockFile,
    mut fork: StatCache,
    mut each: impl FnMut(usize, StageFiles) -> Result<(), E>,
) -> (Result<(), E>, StatCache) {
    let order = project.dag.topo_order();
    if order.len() < PARALLEL_FROM {
        let result = order
            .iter()
            .try_for_each(|&i| each(i, StageFiles::read(project, i, lock, &mut fork)));
        return (result, fork);
    }
    let (tx, rx) = std::sync::mpsc::channel::<Vec<(usize, StageFiles)>>();
    std::thread::scope(|s| {
        let reader = s.spawn(move || {
            for batch in order.chunks(BATCH) {
                let read = batch
                    .iter()
                    .map(|&i| (i, StageFiles::read(project, i, lock, &mut fork)))
                    .collect();
                if tx.send(read).is_err() {
                    break; // the evaluation stopped at an error
                }
            }
            fork
        });
        let result = rx
            .iter()
            .flatten()
            .try_for_each(|(i, files)| each(i, files));
        drop(rx);
        let fork = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (result, fork)
    })
}
