//! `repro run`, `repro stage`, `repro build`, `repro tune`: choose the stages, decide
//! which are stale, run them in dependency order — up to `-j N` at once on threads — and
//! record each success in the lock as soon as it happens. A failed stage skips only what
//! needs it (`--fail-fast` stops everything); an interrupt kills running stages, restores
//! their outputs and exits 130.
//!
//! [`select`] turns the request into stage indices; [`schedule`] runs them and prints the
//! table; [`ended`] names how each stage ended.

mod ended;
mod ready;
mod schedule;
mod select;
#[cfg(test)]
mod tests;

use schedule::Run;
use select::{check_upstream, select};

use super::early::{self, Snapshot};
use super::lockfile::{LockFile, ReadLock};
use super::progress::Progress;
use super::run_record::RecordsFile;
use super::statcache::StatCache;
use super::status::{self, EvalCtx};
use super::{project_lock, run_record, staging};
use repro_executor::CancelFlag;
use repro_pipeline::{kind::Kinds, kind::Overrides, Project};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Which stages a run is about.
#[derive(Debug, Clone)]
pub enum Selection {
    /// Every stage (`repro run`).
    All,
    /// The named stages (`repro stage`).
    Named {
        names: Vec<String>,
        with_deps: bool,
        downstream: bool,
    },
    /// Every stage of a kind (`repro build`, `repro tune`), with their upstream.
    Kind(String),
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Request {
    pub selection: Selection,
    pub jobs: usize,
    pub dry_run: bool,
    pub force: bool,
    pub fail_fast: bool,
    pub wait: bool,
    pub quiet: bool,
    /// `--executor`.
    pub executor: Option<String>,
    /// How many GPUs this machine has, for a local executor's GPU slots (the engine knows
    /// no GPU: the command line passes the probe).
    pub count_gpus: repro_executor::local::GpuCount,
    /// `--force`'s remeasure, `repro tune`'s `--exhaustive` and `--budget`: they reach
    /// `RunCtx.overrides` and the fingerprints of the kinds whose results depend on them.
    pub overrides: Overrides,
}

/// How a run ended; the command layer turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every selected stage passed, was up to date, skipped or kept.
    Passed,
    /// A stage failed, a gate failed, or a stage could not run because one it needs failed.
    Failed,
    /// SIGINT/SIGTERM stopped the run; running stages' outputs were restored.
    Interrupted,
}

/// The exit status of a process stopped by a second SIGINT (the shell's 128 + 2), which
/// exits at once from the signal handler.
const SECOND_SIGNAL_EXIT: i32 = 130;

/// Install SIGINT/SIGTERM/SIGHUP handlers that set both flags (SIGHUP: the terminal
/// closed, which would otherwise end repro mid-stage, outputs half-moved). A second signal exits at once
/// with 130, so a call that blocks without looking at the flags (a read of a FIFO put
/// where a file belongs) can still be interrupted; the next run restores the outputs.
fn install_signal_handlers(
    cancel: &CancelFlag,
    interrupted: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // Registered first, so it sees the flag as the previous signal left it.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            SECOND_SIGNAL_EXIT,
            interrupted.clone(),
        )?;
        signal_hook::flag::register(sig, interrupted.clone())?;
        signal_hook::flag::register(sig, cancel.clone())?;
    }
    Ok(())
}

/// Load the pipeline at `file` with the stage `kinds` and carry out `req`.
pub fn run(file: &Path, kinds: &Kinds, req: &Request) -> anyhow::Result<RunOutcome> {
    // In a large project the lock, the run records and the digest cache are read while the
    // pipeline loads, and used if they are unchanged once the project lock is held: at
    // thousands of stages each read takes milliseconds.
    let (project, early) = std::thread::scope(|s| {
        let early = repro_pipeline::load::project_root(file)
            .ok()
            .filter(|root| early::worth_a_thread(root))
            .map(|root| {
                s.spawn(move || Early {
                    lock: LockFile::read_early(&root),
                    records: run_record::read_early(&root),
                    cache: StatCache::load_early(&root),
                })
            });
        let project = repro_pipeline::load(file, kinds);
        (project, early.and_then(|reading| reading.join().ok()))
    });
    let project = project?;
    let outcome = run_loaded(&project, req, early);
    // The command ends here: a large pipeline's tens of thousands of small allocations
    // are left to the operating system rather than freed one by one (docs/PERFORMANCE.md).
    std::mem::forget(project);
    outcome
}

/// Carry out `req` on a loaded project.
pub fn run_project(project: &Project, req: &Request) -> anyhow::Result<RunOutcome> {
    run_loaded(project, req, None)
}

/// The lock, the run records and the digest cache as read before the project lock was held.
struct Early {
    lock: Option<Snapshot<ReadLock>>,
    records: Option<Snapshot<RecordsFile>>,
    cache: Option<Snapshot<StatCache>>,
}

/// [`run_project`] with what was read `early`, if anything was.
fn run_loaded(
    project: &Project,
    req: &Request,
    early: Option<Early>,
) -> anyhow::Result<RunOutcome> {
    let (selected, forced) = select(project, &req.selection, req.force)?;
    let progress = Progress::new(req.quiet);
    let cancel: CancelFlag = Arc::new(AtomicBool::new(false));
    let interrupted = Arc::new(AtomicBool::new(false));
    install_signal_handlers(&cancel, &interrupted)?;
    let _project_lock = if req.dry_run {
        None
    } else {
        let lock = project_lock::acquire(&project.root, req.wait, &interrupted, |holder| {
            progress.info(&format!("waiting for the project lock, held by {holder}"));
        })?;
        if let Some(old) = &lock.taken_over {
            progress.info(&format!(
                "note: took over the project lock left by a repro that is no longer running ({old})"
            ));
        }
        let dead_run = lock.taken_over.as_ref().map(|h| h.run.as_str());
        let recovery = staging::recover(
            &project.root,
            project.file.file_name().map(Path::new),
            dead_run,
        )?;
        if !recovery.killed.is_empty() {
            progress.info(&format!(
                "note: killed processes {:?} left running by that run",
                recovery.killed
            ));
        }
        for stage in recovery.restored {
            progress.info(&format!(
                "note: restored the previous outputs of stage `{stage}`, left half-written by an interrupted run"
            ));
        }
        for refused in recovery.refused {
            progress.error(&format!("warning: {refused}"));
        }
        Some(lock)
    };
    if !req.dry_run {
        prepare(project, &selected, &progress);
    }
    // The lock and the run records are read (or the early reads checked) while the digest
    // cache is (or its early read is checked), on a second thread in a large project.
    let threaded = early.is_some() || early::worth_a_thread(&project.root);
    let (early_lock, early_records, early_cache) =
        early.map_or((None, None, None), |e| (e.lock, e.records, e.cache));
    let read = || {
        let lock = LockFile::load_or_early(&project.root, early_lock);
        let records = run_record::read_or_early(&project.root, early_records).of(
            &project.root,
            project.stages.iter().map(|s| s.name.as_str()),
        );
        (lock, records)
    };
    let ((lock, (records, records_file)), cache) = if threaded {
        std::thread::scope(|s| {
            let read = s.spawn(read);
            let cache = StatCache::load_or_early(&project.root, early_cache);
            let read = read.join();
            (
                read.unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                cache,
            )
        })
    } else {
        (read(), StatCache::load(&project.root))
    };
    let mut lock = lock?;
    let mut eval = EvalCtx {
        lock: &lock,
        records: &records,
        overrides: &req.overrides,
        cache,
    };
    let statuses = status::evaluate_all(project, &mut eval)?;
    let mut cache = eval.cache;
    if let Selection::Named {
        with_deps: false, ..
    } = req.selection
    {
        check_upstream(project, &statuses, &selected)?;
    }
    let mut run = Run {
        project,
        req,
        progress: &progress,
        cancel: &cancel,
        interrupted: &interrupted,
        statuses,
        records,
        forced,
        ended: BTreeMap::new(),
        executed: BTreeSet::new(),
        times: BTreeMap::new(),
        repro_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("repro")),
        queue: ready::ReadyQueue::new(&project.dag, &selected),
    };
    let scheduled = run.schedule(&selected, &mut lock, &mut cache);
    if !req.dry_run {
        let _ = cache.save();
        let _ = run_record::compact(&project.root, &records_file);
        // Once per run: what each stage recorded in the journal goes into the lock. The
        // records of stages this pipeline file does not declare stay: another pipeline
        // file (`-f`) may share the lock.
        if LockFile::has_journal(&project.root) {
            lock.save(&project.root)?;
        }
    }
    scheduled?;
    let outcome = run.report(&selected)?;
    // As in `run`: the statuses, the lock and the digest cache are left to the operating
    // system.
    std::mem::forget(run);
    std::mem::forget(lock);
    std::mem::forget(cache);
    Ok(outcome)
}

/// Let each selected stage's kind fetch what its inputs depend on (a pinned toolchain). A
/// failure is shown once; the stage then fails with its own message when it runs.
fn prepare(project: &Project, selected: &[usize], progress: &Progress) {
    let mut shown = BTreeSet::new();
    for &i in selected {
        let say = |line: &str| progress.info(line);
        let stage = &project.stages[i];
        if let Err(e) = stage.kind.prepare(
            &stage.configured(&project.configs),
            &project.pipeline,
            &project.root,
            &say,
        ) {
            let message = format!("warning: {e:#}");
            if shown.insert(message.clone()) {
                progress.error(&message);
            }
        }
    }
}
