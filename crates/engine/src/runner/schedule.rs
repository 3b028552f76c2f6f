//! Running the selected stages in dependency order, up to `-j N` at once, recording each
//! success in the lock as it happens, and the table printed at the end.

use super::ended::Ended;
use super::ready::ReadyQueue;
use super::{Request, RunOutcome};
use crate::display;
use crate::statcache::StatCache;
use crate::{lockfile::LockEntry, lockfile::LockFile};
use crate::{progress, progress::Line, progress::Progress};
use crate::{run_record, staging};
use crate::{status, status::EvalCtx, status::StageStatus, status::State};
use repro_executor::CancelFlag;
use repro_pipeline::Project;
use repro_pipeline::{kind::RunCtx, kind::StageOutcome};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What a worker thread sends back.
struct Finished {
    index: usize,
    result: anyhow::Result<StageOutcome>,
    elapsed: Duration,
}

pub(super) struct Run<'a> {
    pub(super) project: &'a Project,
    pub(super) req: &'a Request,
    pub(super) progress: &'a Progress,
    pub(super) cancel: &'a CancelFlag,
    pub(super) interrupted: &'a Arc<AtomicBool>,
    pub(super) statuses: Vec<StageStatus>,
    pub(super) records: BTreeMap<String, run_record::Record>,
    pub(super) forced: BTreeSet<usize>,
    pub(super) ended: BTreeMap<usize, Ended>,
    /// Stages that ran (or would run), or were evaluated again, in this run: what they hand
    /// their dependants may differ from what the first evaluation assumed (a rerun that
    /// wrote byte-identical outputs), so those are evaluated again too.
    pub(super) executed: BTreeSet<usize>,
    pub(super) times: BTreeMap<usize, Duration>,
    pub(super) repro_exe: PathBuf,
    pub(super) queue: ReadyQueue,
}

impl<'a> Run<'a> {
    pub(super) fn schedule(
        &mut self,
        selected: &[usize],
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let project = self.project;
        let jobs = self.req.jobs.max(1);
        let (tx, rx) = mpsc::channel::<Finished>();
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let mut running: BTreeMap<usize, (staging::Guard, Line)> = BTreeMap::new();
            loop {
                // Start (or settle without running) every stage that is ready, unless
                // SIGINT/SIGTERM or --fail-fast stopped the run, or nobody reads it any more
                // (`repro run | head -1`: what runs then ends and is recorded).
                while let Some(i) = self
                    .queue
                    .pop_unless(self.cancel.load(Ordering::SeqCst) || display::output_closed())
                {
                    let needs = project.dag.needs(i);
                    if let Some(&bad) = needs
                        .iter()
                        .find(|j| self.ended.get(j).is_some_and(|e| !e.usable()))
                    {
                        self.end(
                            i,
                            Ended::NotRun(format!(
                                "needs `{}`, which did not succeed",
                                project.stages[bad].name
                            )),
                        );
                        continue;
                    }
                    if needs.iter().any(|j| self.executed.contains(j)) {
                        // Its deps may be what the upstream just wrote: look again.
                        if let Err(e) = self.reevaluate(i, lock, cache) {
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
                        None => self.settle_up_to_date(i, lock),
                        Some(why) if self.req.dry_run => {
                            self.executed.insert(i);
                            self.end(i, Ended::WouldRun(why));
                        }
                        Some(_) if running.len() >= jobs => {
                            self.queue.put_back(i);
                            break;
                        }
                        Some(_) => match self.launch(scope, i, &tx) {
                            Ok(started) => {
                                running.insert(i, started);
                            }
                            Err(e) => self.fail(i, format!("{e:#}")),
                        },
                    }
                }
                // With nothing running, every stage that could start or settle has.
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
                self.end(i, ended);
            }
            let why = if self.interrupted.load(Ordering::SeqCst) {
                "interrupted before it started"
            } else {
                "stopped by --fail-fast"
            };
            for &i in selected {
                self.ended
                    .entry(i)
                    .or_insert_with(|| Ended::NotRun(why.to_string()));
            }
            Ok(())
        })
    }

    /// Stage `i` ended this way: what waited for it may start.
    fn end(&mut self, i: usize, ended: Ended) {
        self.ended.insert(i, ended);
        self.queue.ended(&self.project.dag, i);
    }

    fn reevaluate(
        &mut self,
        i: usize,
        lock: &LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let mut recorded = status::RecordedUpstream::default();
        let upstream = status::upstream_fingerprints(self.project, i, lock, &mut recorded, |j| {
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
        if let State::Kept {
            reason, sources, ..
        } = &status.state
        {
            let ended = Ended::Kept {
                reason: reason.clone(),
                measured_on: measured_on(lock, &self.project.stages[i].name),
                not_current: not_current(sources),
            };
            if !self.req.dry_run {
                self.progress.info(&format!(
                    "· {} {}",
                    self.project.stages[i].name,
                    ended.label()
                ));
            }
            self.end(i, ended);
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
        // A failure on other inputs is superseded: these inputs are the recorded run's.
        let name = &self.project.stages[i].name;
        let stale_failure = self
            .records
            .get(name)
            .is_some_and(|r| r.failure().is_some() && r.fingerprint != status.fingerprint);
        if stale_failure && !self.req.dry_run {
            run_record::forget(&self.project.root, name);
        }
        self.end(i, ended);
    }

    /// A stage could not even start.
    fn fail(&mut self, i: usize, msg: String) {
        self.progress.error(&format!(
            "error: stage `{}` failed: {msg}",
            self.project.stages[i].name
        ));
        let ended = Ended::Failed(msg);
        self.record_run(i, &ended, Duration::ZERO);
        self.end(i, ended);
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
        // The log first: once the outputs are moved aside, nothing may fail before the
        // stage runs (its guard is what puts them back).
        let log = project.root.join(".repro/logs").join(format!(
            "{}.log",
            repro_pipeline::paths::safe_name(&stage.name)
        ));
        if let Some(dir) = log.parent() {
            repro_base::fsio::create_dir_all(dir)?;
        }
        staging::truncate_or_create(&log)?;
        let guard = staging::prepare(
            &project.root,
            &stage.name,
            &stage.outputs,
            stage.kind.writes_in_place(),
        )?;
        let line = self.progress.start(&stage.name);
        let write_root = guard.write_root(&project.root).to_path_buf();
        let bar = line.clone();
        let tx = tx.clone();
        let cancel: &'a CancelFlag = self.cancel;
        let req: &'a Request = self.req;
        let overrides = &req.overrides;
        let cli_executor = req.executor.as_deref();
        let count_gpus = req.count_gpus;
        let repro_exe = self.repro_exe.clone();
        // Children run in the project root: give them the file by an absolute path.
        let pipeline_file = project
            .root
            .join(project.file.file_name().unwrap_or("pipeline.yaml".as_ref()));
        let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
            let started = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let executor = repro_executor::for_stage(
                    project.pipeline.executor.as_ref(),
                    stage.spec.executor.as_ref(),
                    cli_executor,
                    count_gpus,
                )?;
                let progress = |m: &str| bar.set(m);
                let ctx = RunCtx {
                    name: &stage.name,
                    spec: &stage.spec,
                    config: &stage.config,
                    pipeline: &project.pipeline,
                    peers: &project.configs,
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
        if let Err(e) = spawned {
            // Out of threads (`ulimit -u`): this stage fails, its outputs as they were.
            line.finish(
                &stage.name,
                "failed",
                Duration::ZERO,
                self.progress.is_quiet(),
            );
            self.put_back(i, &guard);
            anyhow::bail!("cannot start a thread to run the stage: {e}; fewer stages at once (`-j`) or a higher process limit (`ulimit -u`) lets it run");
        }
        Ok((guard, line))
    }

    /// Put back the previous outputs of stage `i`, saying what could not be.
    fn put_back(&self, i: usize, guard: &staging::Guard) {
        let name = &self.project.stages[i].name;
        match guard.rollback(&self.project.root) {
            Ok(notes) => {
                for note in notes {
                    self.progress
                        .error(&format!("warning: stage `{name}`: {note}"));
                }
            }
            Err(e) => self.progress.error(&format!(
                "error: could not restore the outputs of `{name}`: {e:#}"
            )),
        }
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
        // The stage wrote: what was digested before may have changed.
        cache.forget_seen();
        let rollback = |why: Ended| {
            self.put_back(i, guard);
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
                let changes = match &self.statuses[i].state {
                    State::Stale(c) => c.clone(),
                    _ => Vec::new(),
                };
                let entry = lock.stages.get(&stage.name);
                let kept = State::kept(self.project, i, entry, reason.clone(), changes);
                let ended = rollback(Ended::Kept {
                    reason: reason.clone(),
                    measured_on,
                    not_current: match &kept {
                        State::Kept { sources, .. } => not_current(sources),
                        _ => None,
                    },
                });
                // The one place the reason is said (hidden by --quiet; the final table
                // still says the stage kept its results, and whether they are current).
                let lead = match &ended {
                    Ended::Kept {
                        not_current: None, ..
                    } => "note",
                    _ => "warning",
                };
                self.progress.warn(&format!(
                    "{lead}: stage `{}` {}; not re-run here: {reason}\n  help: {fix}",
                    stage.name,
                    ended.label()
                ));
                self.statuses[i].state = kept;
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
        lock.record(
            &project.root,
            &stage.name,
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
        )
    }

    /// Print the plan or the final table; return the exit code.
    pub(super) fn report(&self, selected: &[usize]) -> anyhow::Result<RunOutcome> {
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
            if let Some(note) = status::run_in_progress(project) {
                out.push_str(&format!("{note}\n"));
            }
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
        display::out(&out)?;
        let interrupted = self.interrupted.load(Ordering::SeqCst);
        if interrupted {
            self.progress.error(
                "interrupted: running stages were stopped and their previous outputs restored",
            );
            return Ok(RunOutcome::Interrupted);
        }
        let bad = self.ended.values().any(|e| {
            matches!(
                e,
                Ended::Failed(_) | Ended::GateFailed(_) | Ended::NotRun(_) | Ended::Interrupted
            )
        });
        Ok(if bad {
            RunOutcome::Failed
        } else {
            RunOutcome::Passed
        })
    }
}

/// For a stage that keeps earlier results: what changed in the sources since they were
/// measured (the first change and how many more), or `None` when only the machine differs.
fn not_current(sources: &[status::Change]) -> Option<String> {
    let first = sources.first()?.line(60);
    Some(match sources.len() {
        1 => first,
        n => format!("{first}, and {} more", n - 1),
    })
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
