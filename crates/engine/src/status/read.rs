//! What evaluating a stage reads of its files before its kind and the stages it needs are
//! consulted, read for every stage of a pipeline at once, on two threads: at thousands of
//! stages, digesting deps and outputs (a `stat` each, and the digest cache) is most of an
//! evaluation, and needs nothing from any other stage.

use super::change::outputs_on_disk;
use crate::fingerprint::Declared;
use crate::lockfile::LockFile;
use crate::statcache::StatCache;
use repro_pipeline::Project;
use std::collections::BTreeMap;
use std::ops::Range;

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

/// [`StageFiles::read`] of every stage, indexed like `project.stages` (each to be taken
/// once). The second half of the stages is read on another thread, with its own copy of the
/// digest cache, which `cache` takes back after. Nothing is written while they are read, so
/// the order in which they are read changes nothing.
pub(super) fn read_all(
    project: &Project,
    lock: &LockFile,
    cache: &mut StatCache,
) -> Vec<Option<StageFiles>> {
    let n = project.stages.len();
    let read = |stages: Range<usize>, cache: &mut StatCache| -> Vec<Option<StageFiles>> {
        stages
            .map(|i| Some(StageFiles::read(project, i, lock, cache)))
            .collect()
    };
    if n < PARALLEL_FROM {
        return read(0..n, cache);
    }
    let mut fork = cache.fork();
    let (mut files, rest) = std::thread::scope(|s| {
        let rest = s.spawn(|| read(n / 2..n, &mut fork));
        (read(0..n / 2, cache), rest.join())
    });
    files.extend(rest.unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
    cache.merge(fork);
    files
}
