//! Running the selected stages in dependency order, up to `-j N` at once, recording each
//! success in the lock as it happens, and the table printed at the end.

mod launch;
mod report;
mod settle;

use super::ended::Ended;
use super::ready::ReadyQueue;
use super::Request;
use crate::display;
use crate::lockfile::LockFile;
use crate::progress::Line;
use crate::progress::Progress;
use crate::run_record;
use crate::staging;
use crate::statcache::StatCache;
use crate::status;
use crate::status::EvalCtx;
use crate::status::StageStatus;
use crate::status::State;
use repro_executor::CancelFlag;
use repro_pipeline::kind::StageOutcome;
use repro_pipeline::Project;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

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
        let mut recorded = status::RecordedUpstream::new(lock, self.project.dag.needs(i).len());
        let upstream = status::upstream_fingerprints(self.project, i, &mut recorded, |j| {
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
}
