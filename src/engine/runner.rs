//! `repro run`, `repro stage`, `repro build`, `repro tune`: choose the stages, decide
//! which are stale, run them in dependency order — up to `-j N` at once on threads — and
//! record each success in the lock as soon as it happens. A failed stage skips only what
//! needs it (`--fail-fast` stops everything); an interrupt kills running stages, restores
//! their outputs and exits 130.

use super::lockfile::{LockEntry, LockFile};
use super::progress::{self, Line, Progress};
use super::statcache::StatCache;
use super::status::{self, EvalCtx, StageStatus, State};
use super::{project_lock, run_record, staging, RunCtx, StageOutcome};
use crate::cli::exit;
use crate::executor::CancelFlag;
use crate::pipeline::diag::{did_you_mean, quoted_list};
use crate::pipeline::Project;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

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
    /// `arch`, `exhaustive`, `budget`: reach `RunCtx.overrides` and the fingerprints of
    /// the kinds they apply to.
    pub overrides: BTreeMap<String, String>,
}

/// A request that names something that does not exist: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// How one stage ended in this run.
#[derive(Debug, Clone, PartialEq)]
enum Ended {
    UpToDate,
    WouldRun(String),
    Passed,
    GateFailed(String),
    Skipped(String),
    /// Could not run here; the earlier results (measured on the machine named) stay.
    Kept {
        reason: String,
        /// The GPU the results were measured on, when the stage records its hardware.
        measured_on: Option<String>,
    },
    Failed(String),
    NotRun(String),
    Interrupted,
}

impl Ended {
    /// Did it leave outputs that stages needing it may use?
    fn usable(&self) -> bool {
        matches!(
            self,
            Ended::UpToDate
                | Ended::WouldRun(_)
                | Ended::Passed
                | Ended::GateFailed(_)
                | Ended::Skipped(_)
                | Ended::Kept { .. }
        )
    }

    fn label(&self) -> String {
        match self {
            Ended::UpToDate => "up-to-date".into(),
            Ended::WouldRun(why) => format!("would run: {why}"),
            Ended::Passed => "passed".into(),
            Ended::GateFailed(g) => format!("gate failed: {g}"),
            Ended::Skipped(why) => format!("skipped: {why}"),
            Ended::Kept {
                reason,
                measured_on: Some(machine),
            } => format!("kept: measured on {machine}; not re-run here: {reason}"),
            Ended::Kept { reason, .. } => {
                format!("kept: earlier results; not re-run here: {reason}")
            }
            Ended::Failed(_) => "FAILED".into(),
            Ended::NotRun(why) => format!("not run: {why}"),
            Ended::Interrupted => "interrupted".into(),
        }
    }
}

/// What a worker thread sends back.
struct Finished {
    index: usize,
    result: anyhow::Result<StageOutcome>,
    elapsed: Duration,
}

/// Install SIGINT/SIGTERM handlers that set both flags. A second signal exits at once
/// with 130, so a call that blocks without looking at the flags (a read of a FIFO put
/// where a file belongs) can still be interrupted; the next run restores the outputs.
fn install_signal_handlers(
    cancel: &CancelFlag,
    interrupted: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left it.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            exit::INTERRUPTED,
            interrupted.clone(),
        )?;
        signal_hook::flag::register(sig, interrupted.clone())?;
        signal_hook::flag::register(sig, cancel.clone())?;
    }
    Ok(())
}

/// Load the pipeline at `file` and carry out `req`. Returns the exit code.
pub fn run(file: &Path, req: &Request) -> anyhow::Result<i32> {
    run_project(&crate::pipeline::load(file)?, req)
}

/// Carry out `req` on a loaded project. Returns the exit code.
pub fn run_project(project: &Project, req: &Request) -> anyhow::Result<i32> {
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
    let mut lock = LockFile::load(&project.root)?;
    let records = run_record::load(
        &project.root,
        project.stages.iter().map(|s| s.name.as_str()),
    );
    let mut eval = EvalCtx {
        lock: &lock.clone(),
        records: &records,
        overrides: &req.overrides,
        cache: StatCache::load(&project.root),
    };
    let statuses = status::evaluate_all(project, &mut eval)?;
    if let Selection::Named {
        with_deps: false, ..
    } = req.selection
    {
        check_upstream(project, &statuses, &selected)?;
    }
    let mut cache = eval.cache;
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
    };
    run.schedule(&selected, &mut lock, &mut cache)?;
    if !req.dry_run {
        let _ = cache.save();
    }
    Ok(run.report(&selected))
}

/// Let each selected stage's kind fetch what its inputs depend on (a pinned toolchain). A
/// failure is shown once; the stage then fails with its own message when it runs.
fn prepare(project: &Project, selected: &[usize], progress: &Progress) {
    let mut shown = BTreeSet::new();
    for &i in selected {
        let say = |line: &str| progress.info(line);
        if let Err(e) = project.stages[i]
            .kind
            .prepare(&project.pipeline, &project.root, &say)
        {
            let message = format!("warning: {e:#}");
            if shown.insert(message.clone()) {
                progress.error(&message);
            }
        }
    }
}

/// The chosen stages and the forced ones, as indices.
fn select(
    project: &Project,
    selection: &Selection,
    force: bool,
) -> anyhow::Result<(Vec<usize>, BTreeSet<usize>)> {
    let dag = &project.dag;
    let (chosen, with_deps, downstream): (Vec<usize>, bool, bool) = match selection {
        Selection::All => ((0..dag.len()).collect(), false, false),
        Selection::Named {
            names,
            with_deps,
            downstream,
        } => {
            let mut chosen = Vec::new();
            for name in names {
                let Some(i) = dag.index(name) else {
                    let all = project.stages.iter().map(|s| s.name.as_str());
                    let help = did_you_mean(name, all.clone())
                        .unwrap_or_else(|| format!("the stages are {}", quoted_list(all)));
                    return Err(UsageError(format!(
                        "no stage named `{name}` in {}\n  help: {help}",
                        project.file.display()
                    ))
                    .into());
                };
                chosen.push(i);
            }
            (chosen, *with_deps, *downstream)
        }
        Selection::Kind(kind) => {
            let chosen: Vec<usize> = (0..dag.len())
                .filter(|&i| project.stages[i].kind.kind() == kind)
                .collect();
            if chosen.is_empty() {
                return Err(UsageError(format!(
                    "{} has no stage with `uses: {kind}`\n  help: add one, e.g. `stages: {{{kind}: {{uses: {kind}}}}}`",
                    project.file.display()
                ))
                .into());
            }
            (chosen, true, false)
        }
    };
    let mut set: BTreeSet<usize> = chosen.iter().copied().collect();
    if downstream {
        set.extend(dag.descendants(&chosen));
    }
    let forced: BTreeSet<usize> = if force { set.clone() } else { BTreeSet::new() };
    if with_deps {
        set.extend(dag.ancestors(&chosen));
    }
    let ordered = dag
        .topo_order()
        .iter()
        .copied()
        .filter(|i| set.contains(i))
        .collect();
    Ok((ordered, forced))
}

/// `repro stage X` without `--with-deps`: every upstream outside the selection must be
/// up to date, else say which is not and stop.
fn check_upstream(
    project: &Project,
    statuses: &[StageStatus],
    selected: &[usize],
) -> anyhow::Result<()> {
    let inside: BTreeSet<usize> = selected.iter().copied().collect();
    let mut problems = Vec::new();
    for &i in selected {
        for j in project.dag.ancestors(&[i]) {
            if inside.contains(&j) {
                continue;
            }
            let why = match &statuses[j].state {
                State::UpToDate | State::Kept { .. } => continue,
                State::Stale(changes) => format!(
                    "is stale ({})",
                    changes
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                State::NeverRun => "has never run".to_string(),
                State::Failed(_) => "failed last time".to_string(),
            };
            let line = format!(
                "stage `{}` needs `{}`, which {why}",
                project.stages[i].name, project.stages[j].name
            );
            if !problems.contains(&line) {
                problems.push(line);
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = selected
        .iter()
        .map(|&i| project.stages[i].name.as_str())
        .collect();
    anyhow::bail!(
        "{}\n  help: run `repro stage {} --with-deps` to bring the upstream up to date first, or `repro run`",
        problems.join("\n"),
        names.join(" ")
    )
}

struct Run<'a> {
    project: &'a Project,
    req: &'a Request,
    progress: &'a Progress,
    cancel: &'a CancelFlag,
    interrupted: &'a Arc<AtomicBool>,
    statuses: Vec<StageStatus>,
    records: BTreeMap<String, run_record::Record>,
    forced: BTreeSet<usize>,
    ended: BTreeMap<usize, Ended>,
    /// Stages that ran (or would run), or were evaluated again, in this run: what they hand
    /// their dependants may differ from what the first evaluation assumed (a rerun that
    /// wrote byte-identical outputs), so those are evaluated again too.
    executed: BTreeSet<usize>,
    times: BTreeMap<usize, Duration>,
    repro_exe: PathBuf,
}

impl<'a> Run<'a> {
    fn schedule(
        &mut self,
        selected: &[usize],
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let project = self.project;
        let jobs = self.req.jobs.max(1);
        let mut pending: Vec<usize> = selected.to_vec();
        let chosen: BTreeSet<usize> = selected.iter().copied().collect();
        let (tx, rx) = mpsc::channel::<Finished>();
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let mut running: BTreeMap<usize, (staging::Guard, Line)> = BTreeMap::new();
            let mut stop = false;
            loop {
                // Set by SIGINT/SIGTERM or by --fail-fast.
                if self.cancel.load(Ordering::SeqCst) {
                    stop = true;
                }
                // Start (or settle without running) every stage that is ready.
                let mut k = 0;
                while !stop && k < pending.len() {
                    let i = pending[k];
                    let needs = project.dag.needs(i);
                    if let Some(&bad) = needs
                        .iter()
                        .find(|j| self.ended.get(j).is_some_and(|e| !e.usable()))
                    {
                        pending.remove(k);
                        self.ended.insert(
                            i,
                            Ended::NotRun(format!(
                                "needs `{}`, which did not succeed",
                                project.stages[bad].name
                            )),
                        );
                        continue;
                    }
                    // Pending stages are in run order and a stage never needs a later one,
                    // so removing stage k never readies an earlier one: no rescan needed.
                    let waiting = needs
                        .iter()
                        .any(|j| chosen.contains(j) && !self.ended.contains_key(j));
                    if waiting {
                        k += 1;
                        continue;
                    }
                    if needs.iter().any(|j| self.executed.contains(j)) {
                        // Its deps may be what the upstream just wrote: look again.
                        if let Err(e) = self.reevaluate(i, lock, cache) {
                            pending.remove(k);
                            self.fail(i, format!("{e:#}"));
                            continue;
                        }
                        self.executed.insert(i);
                    }
                    let status = &self.statuses[i];
                    let reason = if self.forced.contains(&i) {
                        Some("forced".to_string())
                    } else {
                        match &status.state {
                            // Kept: this machine already found it cannot run these inputs.
                            State::UpToDate | State::Kept { .. } => None,
                            State::Stale(c) => Some(
                                c.iter()
                                    .map(|c| c.to_string())
                                    .collect::<Vec<_>>()
                                    .join("; "),
                            ),
                            State::NeverRun => Some("never run".to_string()),
                            State::Failed(_) => Some("failed last time".to_string()),
                        }
                    };
                    match reason {
                        None => {
                            pending.remove(k);
                            self.settle_up_to_date(i, lock);
                        }
                        Some(why) if self.req.dry_run => {
                            pending.remove(k);
                            self.executed.insert(i);
                            self.ended.insert(i, Ended::WouldRun(why));
                        }
                        Some(_) if running.len() >= jobs => break,
                        Some(_) => {
                            pending.remove(k);
                            match self.launch(scope, i, &tx) {
                                Ok(started) => {
                                    running.insert(i, started);
                                }
                                Err(e) => self.fail(i, format!("{e:#}")),
                            }
                        }
                    }
                }
                // With nothing running, the scan above started or settled every stage it
                // could: the first pending stage in run order is always ready.
                if running.is_empty() {
                    break;
                }
                let finished = match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(f) => f,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                let (guard, line) = running
                    .remove(&finished.index)
                    .expect("a running stage finished");
                let i = finished.index;
                self.times.insert(i, finished.elapsed);
                let ended = self.finish(i, finished.result, &guard, lock, cache);
                self.record_run(i, &ended, finished.elapsed);
                // The warning above gave a skip's reason and fix; the line only marks it.
                let outcome = match &ended {
                    Ended::Skipped(_) => "skipped".to_string(),
                    other => other.label(),
                };
                line.finish(
                    &project.stages[i].name,
                    &outcome,
                    finished.elapsed,
                    self.progress.is_quiet(),
                );
                if let Ended::Failed(msg) = &ended {
                    self.progress.error(&format!(
                        "error: stage `{}` failed: {msg}",
                        project.stages[i].name
                    ));
                    if self.req.fail_fast {
                        self.cancel.store(true, Ordering::SeqCst);
                    }
                }
                self.ended.insert(i, ended);
            }
            let why = if self.interrupted.load(Ordering::SeqCst) {
                "interrupted before it started"
            } else {
                "stopped by --fail-fast"
            };
            for i in pending.drain(..) {
                self.ended
                    .entry(i)
                    .or_insert_with(|| Ended::NotRun(why.to_string()));
            }
            Ok(())
        })
    }

    fn reevaluate(
        &mut self,
        i: usize,
        lock: &LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let upstream = status::upstream_fingerprints(self.project, i, lock, |j| {
            Some(self.statuses[j].current())
        });
        let mut eval = EvalCtx {
            lock,
            records: &self.records,
            overrides: &self.req.overrides,
            cache: std::mem::take(cache),
        };
        let result = status::evaluate_one(self.project, i, upstream, &mut eval);
        *cache = eval.cache;
        self.statuses[i] = result?;
        Ok(())
    }

    fn settle_up_to_date(&mut self, i: usize, lock: &LockFile) {
        let status = &self.statuses[i];
        if let State::Kept { reason, .. } = &status.state {
            let ended = Ended::Kept {
                reason: reason.clone(),
                measured_on: measured_on(lock, &self.project.stages[i].name),
            };
            if !self.req.dry_run {
                self.progress.info(&format!(
                    "· {} {}",
                    self.project.stages[i].name,
                    ended.label()
                ));
            }
            self.ended.insert(i, ended);
            return;
        }
        let mut text = format!(
            "· {} up-to-date (fingerprint {} unchanged)",
            self.project.stages[i].name,
            &status.fingerprint[..12]
        );
        if let Some(g) = &status.gate_failed {
            text.push_str(&format!("; gate failed: {g}"));
        }
        if !self.req.dry_run {
            self.progress.info(&text);
        }
        let ended = match &status.gate_failed {
            Some(g) => Ended::GateFailed(g.clone()),
            None => Ended::UpToDate,
        };
        self.ended.insert(i, ended);
    }

    /// A stage could not even start.
    fn fail(&mut self, i: usize, msg: String) {
        self.progress.error(&format!(
            "error: stage `{}` failed: {msg}",
            self.project.stages[i].name
        ));
        let ended = Ended::Failed(msg);
        self.record_run(i, &ended, Duration::ZERO);
        self.ended.insert(i, ended);
        if self.req.fail_fast {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// Remember how a stage that ran ended, under `.repro/state/`, for `repro status` and
    /// the report's stage times. Stops and interruptions leave the previous record.
    fn record_run(&self, i: usize, ended: &Ended, elapsed: Duration) {
        let (outcome, message) = match ended {
            Ended::Passed => (run_record::Outcome::Passed, None),
            Ended::GateFailed(g) => (run_record::Outcome::GateFailed, Some(g)),
            Ended::Skipped(r) => (run_record::Outcome::Skipped, Some(r)),
            Ended::Kept { reason, .. } => (run_record::Outcome::Kept, Some(reason)),
            Ended::Failed(m) => (run_record::Outcome::Failed, Some(m)),
            Ended::UpToDate | Ended::WouldRun(_) | Ended::NotRun(_) | Ended::Interrupted => return,
        };
        let record = run_record::Record {
            fingerprint: self.statuses[i].fingerprint.clone(),
            outcome,
            elapsed_s: elapsed.as_secs_f64(),
            message: message.cloned(),
        };
        if let Err(e) =
            run_record::record(&self.project.root, &self.project.stages[i].name, &record)
        {
            self.progress.warn(&format!(
                "warning: cannot record the run under .repro/state: {e}"
            ));
        }
    }

    /// Prepare outputs and start stage `i` on a thread.
    fn launch<'s>(
        &self,
        scope: &'s std::thread::Scope<'s, 'a>,
        i: usize,
        tx: &mpsc::Sender<Finished>,
    ) -> anyhow::Result<(staging::Guard, Line)> {
        let project: &'a Project = self.project;
        let stage = &project.stages[i];
        let guard = staging::prepare(
            &project.root,
            &stage.name,
            &stage.outputs,
            stage.kind.writes_in_place(),
        )?;
        let log = project
            .root
            .join(".repro/logs")
            .join(format!("{}.log", staging::safe_name(&stage.name)));
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&log, "")?;
        let line = self.progress.start(&stage.name);
        let write_root = guard.write_root(&project.root).to_path_buf();
        let bar = line.clone();
        let tx = tx.clone();
        let cancel: &'a CancelFlag = self.cancel;
        let req: &'a Request = self.req;
        let overrides = &req.overrides;
        let cli_executor = req.executor.as_deref();
        let repro_exe = self.repro_exe.clone();
        // Children run in the project root: give them the file by an absolute path.
        let pipeline_file = project
            .root
            .join(project.file.file_name().unwrap_or("pipeline.yaml".as_ref()));
        scope.spawn(move || {
            let started = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let executor =
                    crate::executor::for_stage(&project.pipeline, &stage.spec, cli_executor)?;
                let progress = |m: &str| bar.set(m);
                let ctx = RunCtx {
                    name: &stage.name,
                    spec: &stage.spec,
                    pipeline: &project.pipeline,
                    root: &project.root,
                    staging: &write_root,
                    log: &log,
                    executor: executor.as_ref(),
                    cancel,
                    repro_exe: &repro_exe,
                    pipeline_file: &pipeline_file,
                    overrides,
                    progress: &progress,
                };
                stage.kind.run(&ctx)
            }))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(anyhow::anyhow!(
                    "the `{}` kind crashed: {what}",
                    stage.kind.kind()
                ))
            });
            let _ = tx.send(Finished {
                index: i,
                result,
                elapsed: started.elapsed(),
            });
        });
        Ok((guard, line))
    }

    /// Settle a stage that returned: move outputs in and record it, or restore.
    fn finish(
        &mut self,
        i: usize,
        result: anyhow::Result<StageOutcome>,
        guard: &staging::Guard,
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> Ended {
        let project = self.project;
        let stage = &project.stages[i];
        self.executed.insert(i);
        let rollback = |why: Ended| {
            if let Err(e) = guard.rollback(&project.root) {
                self.progress.error(&format!(
                    "error: could not restore the outputs of `{}`: {e:#}",
                    stage.name
                ));
            }
            why
        };
        if self.interrupted.load(Ordering::SeqCst) {
            return rollback(Ended::Interrupted);
        }
        let outcome = match result {
            Ok(o) => o,
            // Killed because another stage failed under --fail-fast.
            Err(_) if self.cancel.load(Ordering::SeqCst) => {
                return rollback(Ended::NotRun("stopped by --fail-fast".into()));
            }
            Err(e) => return rollback(Ended::Failed(format!("{e:#}"))),
        };
        if let StageOutcome::Skipped { reason, fix } = &outcome {
            if let Some(measured_on) = kept_results(lock, &stage.name) {
                // A stage that cannot run here never touches results measured elsewhere.
                let ended = rollback(Ended::Kept {
                    reason: reason.clone(),
                    measured_on,
                });
                self.progress.error(&format!(
                    "warning: stage `{}` {}\n  help: {fix}",
                    stage.name,
                    ended.label()
                ));
                let changes = match &self.statuses[i].state {
                    State::Stale(c) => c.clone(),
                    _ => Vec::new(),
                };
                self.statuses[i].state = State::Kept {
                    reason: reason.clone(),
                    changes,
                };
                return ended;
            }
            let written = guard.write_root(&project.root);
            if !stage.outputs.iter().any(|o| written.join(o).exists()) {
                // Nothing to keep and nothing written: the lock records the skip, with no
                // outputs, so it is not retried until an input changes.
                self.progress.error(&format!(
                    "warning: stage `{}` skipped: {reason}\n  help: {fix}",
                    stage.name
                ));
                let ended = rollback(Ended::Skipped(reason.clone()));
                if let Err(e) = self.record_success(i, &outcome, lock, cache) {
                    return Ended::Failed(format!("{e:#}"));
                }
                return ended;
            }
        }
        if let Err(e) = guard.commit(&project.root, &stage.outputs, &stage.optional_outputs) {
            return rollback(Ended::Failed(format!("{e:#}")));
        }
        // The new outputs are in place; if the lock cannot be written, the stage shows as
        // stale next time (its outputs differ from the lock) and reruns.
        if let Err(e) = self.record_success(i, &outcome, lock, cache) {
            return Ended::Failed(format!("{e:#}"));
        }
        match outcome {
            StageOutcome::Passed => Ended::Passed,
            StageOutcome::GateFailed(g) => Ended::GateFailed(g),
            StageOutcome::Skipped { reason, fix } => {
                self.progress.warn(&format!(
                    "warning: stage `{}` skipped: {reason}\n  help: {fix}",
                    stage.name
                ));
                Ended::Skipped(reason)
            }
        }
    }

    fn record_success(
        &mut self,
        i: usize,
        outcome: &StageOutcome,
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let project = self.project;
        let stage = &project.stages[i];
        let mut outputs = BTreeMap::new();
        let skipped = matches!(outcome, StageOutcome::Skipped { .. });
        for out in &stage.outputs {
            let optional = skipped || stage.optional_outputs.contains(out);
            if optional && !project.root.join(out).exists() {
                continue;
            }
            outputs.extend(cache.digest_tree(&project.root, out)?);
        }
        let status = &self.statuses[i];
        lock.stages.insert(
            stage.name.clone(),
            LockEntry {
                fingerprint: status.fingerprint.clone(),
                gate_failed: match outcome {
                    StageOutcome::GateFailed(g) => Some(g.clone()),
                    _ => None,
                },
                skipped: match outcome {
                    StageOutcome::Skipped { reason, .. } => Some(reason.clone()),
                    _ => None,
                },
                inputs: status.inputs.clone(),
                outputs,
            },
        );
        lock.stages.retain(|name, _| project.stage(name).is_some());
        lock.save(&project.root)
    }

    /// Print the plan or the final table; return the exit code.
    fn report(&self, selected: &[usize]) -> i32 {
        let project = self.project;
        let width = selected
            .iter()
            .map(|&i| project.stages[i].name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut out = String::new();
        if self.req.dry_run {
            out.push_str("plan (dry run, nothing changed):\n");
        } else {
            out.push_str(&format!(
                "{:width$}  {:10}  {}\n",
                "stage", "time", "status"
            ));
        }
        for &i in selected {
            let ended = self
                .ended
                .get(&i)
                .cloned()
                .unwrap_or(Ended::NotRun("not reached".into()));
            let name = &project.stages[i].name;
            if self.req.dry_run {
                let line = match &ended {
                    Ended::WouldRun(why) => format!("  run   {name:width$}  {why}"),
                    Ended::UpToDate => format!("  skip  {name:width$}  up-to-date"),
                    other => format!("  skip  {name:width$}  {}", other.label()),
                };
                out.push_str(&line);
                out.push('\n');
                continue;
            }
            let time = self
                .times
                .get(&i)
                .map(|t| format!("{:.1}s", t.as_secs_f64()))
                .unwrap_or_else(|| "-".into());
            let label = ended.label();
            out.push_str(&format!(
                "{name:width$}  {time:10}  {} {label}\n",
                progress::mark(&label)
            ));
        }
        print!("{out}");
        let interrupted = self.interrupted.load(Ordering::SeqCst);
        if interrupted {
            self.progress.error(
                "interrupted: running stages were stopped and their previous outputs restored",
            );
            return exit::INTERRUPTED;
        }
        let bad = self.ended.values().any(|e| {
            matches!(
                e,
                Ended::Failed(_) | Ended::GateFailed(_) | Ended::NotRun(_) | Ended::Interrupted
            )
        });
        if bad {
            exit::FAILED
        } else {
            exit::OK
        }
    }
}

/// When a stage's recorded results are measurements worth keeping (not themselves a skip):
/// the machine they were measured on, if the stage records it.
fn kept_results(lock: &LockFile, stage: &str) -> Option<Option<String>> {
    lock.stages
        .get(stage)
        .filter(|entry| entry.skipped.is_none())
        .map(|_| measured_on(lock, stage))
}

/// The GPU a stage's recorded results came from, as its lock entry names it.
fn measured_on(lock: &LockFile, stage: &str) -> Option<String> {
    lock.stages
        .get(stage)
        .and_then(|e| e.inputs.hardware.clone())
}

#[cfg(test)]
mod tests {
    //! The paths only built-in kinds take (staging, gates, skips, overrides), with a test
    //! kind standing in for them.
    use super::*;
    use crate::engine::{OptionError, Outputs, StageInputs, StageKind};
    use crate::pipeline::dag::Dag;
    use crate::pipeline::{Pipeline, Stage, StageSpec};

    #[derive(Clone, Copy)]
    enum Behave {
        Pass,
        Gate,
        Skip,
        Fail,
    }

    /// Writes `out/s.txt` (its text names the overrides it saw) to the staging folder.
    struct TestKind(Behave);

    impl StageKind for TestKind {
        fn kind(&self) -> &'static str {
            "build"
        }
        fn validate(&self, _: &str, _: &StageSpec, _: &Pipeline) -> Result<(), OptionError> {
            Ok(())
        }
        fn outputs(&self, _: &str, _: &StageSpec, _: &Pipeline) -> Outputs {
            vec!["out/s.txt".into()]
        }
        fn inputs(
            &self,
            _: &str,
            _: &StageSpec,
            _: &Pipeline,
            _: &Path,
        ) -> anyhow::Result<StageInputs> {
            Ok(StageInputs::default())
        }
        fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
            (ctx.progress)("working");
            let text = format!("overrides {:?}", ctx.overrides);
            std::fs::write(ctx.staging.join("out/s.txt"), text)?;
            match self.0 {
                Behave::Pass => Ok(StageOutcome::Passed),
                Behave::Gate => Ok(StageOutcome::GateFailed("ptxas.max_registers".into())),
                Behave::Skip => Ok(StageOutcome::Skipped {
                    reason: "ncu not found".into(),
                    fix: "install Nsight Compute".into(),
                }),
                Behave::Fail => anyhow::bail!("nvcc crashed"),
            }
        }
    }

    fn project(root: &Path, behave: Behave) -> Project {
        let pipeline: Pipeline =
            serde_yaml::from_str("version: 1\nstages:\n  s: {uses: build}\n").unwrap();
        let spec = pipeline.stages["s"].clone();
        Project {
            file: root.join("pipeline.yaml"),
            root: root.to_path_buf(),
            stages: vec![Stage {
                name: "s".into(),
                spec,
                kind: Arc::new(TestKind(behave)),
                outputs: vec!["out/s.txt".into()],
                optional_outputs: vec![],
            }],
            dag: Dag::new(vec!["s".into()], vec![vec![]]).unwrap(),
            pipeline,
        }
    }

    fn request(force: bool, overrides: &[(&str, &str)]) -> Request {
        Request {
            selection: Selection::All,
            jobs: 1,
            dry_run: false,
            force,
            fail_fast: false,
            wait: false,
            quiet: true,
            executor: None,
            overrides: overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn output(root: &Path) -> String {
        std::fs::read_to_string(root.join("out/s.txt")).unwrap()
    }

    #[test]
    fn staged_outputs_move_in_and_overrides_reach_the_kind_and_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), Behave::Pass);
        assert_eq!(
            run_project(&p, &request(false, &[("arch", "sm_90")])).unwrap(),
            exit::OK
        );
        assert_eq!(output(dir.path()), r#"overrides {"arch": "sm_90"}"#);
        assert!(!dir.path().join(".repro/staging/s").exists());
        let lock = LockFile::load(dir.path()).unwrap();
        assert_eq!(lock.stages["s"].inputs.overrides["arch"], "sm_90");
        let record = &run_record::load(dir.path(), ["s"])["s"];
        assert_eq!(record.outcome, run_record::Outcome::Passed);
        assert_eq!(record.fingerprint, lock.stages["s"].fingerprint);
        // Without the override the recorded build no longer matches: it reruns.
        assert_eq!(run_project(&p, &request(false, &[])).unwrap(), exit::OK);
        assert_eq!(output(dir.path()), "overrides {}");
    }

    #[test]
    fn a_failed_gate_is_recorded_runs_nothing_again_and_exits_1() {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), Behave::Gate);
        assert_eq!(run_project(&p, &request(false, &[])).unwrap(), exit::FAILED);
        let lock = LockFile::load(dir.path()).unwrap();
        assert_eq!(
            lock.stages["s"].gate_failed.as_deref(),
            Some("ptxas.max_registers")
        );
        let inode = |root: &Path| {
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(root.join("out/s.txt")).unwrap())
        };
        let before = inode(dir.path());
        assert_eq!(run_project(&p, &request(false, &[])).unwrap(), exit::FAILED);
        assert_eq!(
            inode(dir.path()),
            before,
            "up to date: not rerun, still reported"
        );
    }

    #[test]
    fn a_skipped_stage_is_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), Behave::Skip);
        assert_eq!(run_project(&p, &request(false, &[])).unwrap(), exit::OK);
        let lock = LockFile::load(dir.path()).unwrap();
        assert_eq!(lock.stages["s"].skipped.as_deref(), Some("ncu not found"));
    }

    #[test]
    fn a_failing_kind_leaves_the_previous_outputs_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        run_project(&project(dir.path(), Behave::Pass), &request(false, &[])).unwrap();
        let lock = std::fs::read(dir.path().join(LOCK)).unwrap();
        let failing = project(dir.path(), Behave::Fail);
        assert_eq!(
            run_project(&failing, &request(true, &[("arch", "x")])).unwrap(),
            exit::FAILED
        );
        assert_eq!(output(dir.path()), "overrides {}");
        assert_eq!(std::fs::read(dir.path().join(LOCK)).unwrap(), lock);
        assert!(!dir.path().join(".repro/staging/s").exists());
        let records = run_record::load(dir.path(), ["s"]);
        assert_eq!(records["s"].failure(), Some("nvcc crashed"));
    }

    const LOCK: &str = crate::pipeline::paths::LOCK_FILE;
}
