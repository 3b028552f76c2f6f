//! Is each stage up to date, and if not, what exactly changed: the comparison of a
//! stage's current [`Inputs`] and outputs with what `artifacts/repro.lock` recorded.

mod change;
mod kept;
mod read;
mod render;
mod upstream;

pub use change::{source_changes, Change};
pub use kept::kept_from;
pub use render::{render_json, render_text, run_in_progress};
pub use upstream::{recorded_upstream, upstream_fingerprints, RecordedUpstream};

use super::fingerprint::Inputs;
use super::lockfile::{LockEntry, LockFile, ReadLock};
use super::run_record::{Record, RecordsFile};
use super::statcache::StatCache;
use change::{compare_unlisted_local_deps, input_changes, output_changes, outputs_on_disk};
use read::StageFiles;
use repro_pipeline::{kind::Overrides, LoadError, Project};
use std::collections::BTreeMap;
use std::path::Path;

/// A stage's state.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    UpToDate,
    Stale(Vec<Change>),
    NeverRun,
    /// Its last run failed (the message); it has not succeeded since on these inputs.
    Failed(String),
    /// Its inputs changed, but on these inputs it cannot run on this machine (the reason:
    /// no GPU, no ncu, no torch), so the outputs of its last run — measured elsewhere —
    /// were kept. They are not up to date: the changes say against what.
    Kept {
        reason: String,
        changes: Vec<Change>,
        /// Those of `changes` that are not this machine's alone ([`source_changes`]):
        /// empty when the kept results are current for these sources.
        sources: Vec<Change>,
    },
}

impl State {
    /// Stage `i` kept the results of its recorded run `entry` despite `changes`, because it
    /// cannot run here (`reason`).
    pub fn kept(
        project: &Project,
        i: usize,
        entry: Option<&LockEntry>,
        reason: String,
        changes: Vec<Change>,
    ) -> State {
        let sources = source_changes(project, i, entry, &changes)
            .into_iter()
            .cloned()
            .collect();
        State::Kept {
            reason,
            changes,
            sources,
        }
    }

    /// Kept results that are current: only the machine differs.
    pub fn kept_current(&self) -> bool {
        matches!(self, State::Kept { sources, .. } if sources.is_empty())
    }

    pub fn label(&self) -> &'static str {
        match self {
            State::UpToDate => "up-to-date",
            State::Stale(_) => "stale",
            State::NeverRun => "never-run",
            State::Failed(_) => "failed",
            State::Kept { .. } => "kept",
        }
    }
}

/// Everything known about one stage before running it.
#[derive(Debug, Clone)]
pub struct StageStatus {
    pub index: usize,
    pub inputs: Inputs,
    pub fingerprint: String,
    pub state: State,
    /// From the lock: the stage ran on these inputs but a gate failed.
    pub gate_failed: Option<String>,
    /// From the lock: the stage's last run was skipped, and why.
    pub skipped: Option<String>,
}

impl StageStatus {
    /// Its fingerprint now, and whether the outputs in place are kept earlier results.
    pub fn current(&self) -> (&str, bool) {
        (&self.fingerprint, matches!(self.state, State::Kept { .. }))
    }
}

/// Decide the state of stage `index`, given the current fingerprints of what it needs.
pub fn evaluate_one(
    project: &Project,
    index: usize,
    upstream: BTreeMap<String, String>,
    ctx: &mut EvalCtx,
) -> anyhow::Result<StageStatus> {
    let files = StageFiles::read(project, index, ctx.lock, &mut ctx.cache);
    decide(project, index, upstream, files, ctx)
}

/// [`evaluate_one`], with what it reads of the stage's files already read.
fn decide(
    project: &Project,
    index: usize,
    upstream: BTreeMap<String, String>,
    files: StageFiles,
    ctx: &mut EvalCtx,
) -> anyhow::Result<StageStatus> {
    let stage = &project.stages[index];
    let inputs =
        files
            .declared
            .complete(project, stage, upstream, ctx.overrides, &mut ctx.cache)?;
    let fp = inputs.fingerprint();
    let entry = ctx.lock.stages.get(&stage.name);
    let record = ctx.records.get(&stage.name);
    let (mut gate_failed, mut skipped) = (None, None);
    let state = match entry {
        Some(e) => {
            let on_disk = files
                .outputs
                .unwrap_or_else(|| outputs_on_disk(project, stage, &mut ctx.cache));
            let changed = if e.fingerprint == fp {
                // Only outputs can differ.
                output_changes(e, &on_disk)
            } else {
                let mut c = input_changes(&e.inputs, &inputs);
                compare_unlisted_local_deps(&project.root, &mut c, &mut ctx.cache);
                c.extend(output_changes(e, &on_disk));
                if c.is_empty() {
                    c.push(Change {
                        what: "command",
                        name: String::new(),
                        from: Some(e.fingerprint.clone()),
                        to: Some(fp.clone()),
                    });
                }
                c
            };
            if changed.is_empty() {
                gate_failed = e.gate_failed.clone();
                skipped = e.skipped.clone();
                State::UpToDate
            } else {
                match failed_or(record, &fp, State::Stale(changed)) {
                    State::Kept {
                        reason, changes, ..
                    } => State::kept(project, index, Some(e), reason, changes),
                    other => other,
                }
            }
        }
        None => failed_or(record, &fp, State::NeverRun),
    };
    Ok(StageStatus {
        index,
        inputs,
        fingerprint: fp,
        state,
        gate_failed,
        skipped,
    })
}

/// `failed` when the last run, with these very inputs, failed, and `kept` when it could not
/// run here and kept the earlier results; after an edit the stage is plainly stale (the
/// edit may be the fix, or the tool may be installed now).
fn failed_or(record: Option<&Record>, fingerprint: &str, otherwise: State) -> State {
    let Some(r) = record.filter(|r| r.fingerprint == fingerprint) else {
        return otherwise;
    };
    if let Some(message) = r.failure() {
        return State::Failed(message.to_string());
    }
    match (r.kept(), otherwise) {
        (Some(reason), State::Stale(changes)) => State::Kept {
            reason: reason.to_string(),
            changes,
            sources: Vec::new(),
        },
        (_, otherwise) => otherwise,
    }
}

/// What evaluating stages reads: the lock, the last-run records, overrides, the digest cache.
pub struct EvalCtx<'a> {
    pub lock: &'a LockFile,
    pub records: &'a BTreeMap<String, Record>,
    pub overrides: &'a Overrides,
    pub cache: StatCache,
}

/// Every stage's status as `repro status` shows it: the lock, the last-run records and the
/// digest cache read from under `project.root` (the cache is saved for next time).
pub fn evaluate_project(project: &Project) -> anyhow::Result<Vec<StageStatus>> {
    Ok(evaluate_read(project, read_state(&project.root)?)?.0)
}

/// [`evaluate_project`] of the pipeline at `file`, loaded by `load`. The lock, the run
/// records and the digest cache need only the project's folder: in a large project they
/// are read on a second thread while the pipeline loads (at thousands of stages each is a
/// large part of `repro status`), and nothing is written unless the pipeline loads.
pub fn load_and_evaluate(
    file: &Path,
    load: impl FnOnce(&Path) -> Result<Project, LoadError>,
) -> anyhow::Result<(Project, Vec<StageStatus>)> {
    let (project, state) = std::thread::scope(|s| {
        let state = repro_pipeline::load::project_root(file)
            .ok()
            .filter(|root| crate::early::worth_a_thread(root))
            .map(|root| s.spawn(move || read_state(&root)));
        (load(file), state.map(|reading| reading.join()))
    });
    let project = project?;
    let state = match state {
        Some(Ok(state)) => state?,
        Some(Err(panic)) => std::panic::resume_unwind(panic),
        None => read_state(&project.root)?,
    };
    let (statuses, read) = evaluate_read(&project, state)?;
    // `repro status` ends after this.
    std::mem::forget(read);
    Ok((project, statuses))
}

/// What evaluating reads of a project's state before it knows the pipeline: the lock, the
/// run records and the digest cache, read without writing anything.
struct ProjectState {
    lock: ReadLock,
    records: RecordsFile,
    cache: StatCache,
}

/// The [`ProjectState`] of the project at `root`, once its state folders are checked.
fn read_state(root: &Path) -> anyhow::Result<ProjectState> {
    super::project_lock::check_state_dirs(root)?;
    Ok(ProjectState {
        lock: LockFile::read(root)?,
        records: super::run_record::read(root),
        cache: StatCache::load(root),
    })
}

/// What an evaluation read, handed back to be dropped by the caller, or left to the
/// operating system by a command about to end (at thousands of stages, freeing it piece by
/// piece takes milliseconds).
struct Read {
    _lock: LockFile,
    _records: BTreeMap<String, Record>,
    _cache: StatCache,
}

/// [`evaluate_project`] with the state already read.
fn evaluate_read(
    project: &Project,
    state: ProjectState,
) -> anyhow::Result<(Vec<StageStatus>, Read)> {
    let lock = state.lock.finish(&project.root);
    let (records, _) = state.records.of(
        &project.root,
        project.stages.iter().map(|s| s.name.as_str()),
    );
    let overrides = Overrides::default();
    let mut ctx = EvalCtx {
        lock: &lock,
        records: &records,
        overrides: &overrides,
        cache: state.cache,
    };
    let statuses = evaluate_all(project, &mut ctx)?;
    let _ = ctx.cache.save();
    let read = Read {
        _cache: ctx.cache,
        _lock: lock,
        _records: records,
    };
    Ok((statuses, read))
}

/// Every stage's status, indexed like `project.stages`.
pub fn evaluate_all(project: &Project, ctx: &mut EvalCtx) -> anyhow::Result<Vec<StageStatus>> {
    let lock = ctx.lock;
    let mut done: Vec<Option<StageStatus>> = vec![None; project.stages.len()];
    let mut recorded = RecordedUpstream::new(lock, project.stages.len());
    let (evaluated, fork) = read::read_ahead(project, lock, ctx.cache.fork(), |i, files| {
        let upstream = upstream_fingerprints(project, i, &mut recorded, |j| {
            done[j].as_ref().map(StageStatus::current)
        });
        done[i] = Some(decide(project, i, upstream, files, ctx)?);
        anyhow::Ok(())
    });
    ctx.cache.merge(fork);
    evaluated?;
    Ok(done
        .into_iter()
        .map(|s| s.expect("topological order covers every stage"))
        .collect())
}
