//! The stages' side: one `repro exec --worker` per GPU slot, started through the stage's
//! executor on first use. Each run's answer is timed here; a run that fails to answer in
//! time (a hang), a worker that dies (a crash) and an answer that says the CUDA context
//! is lost all end that worker. The run is recorded as failed with the reason, never as an
//! error, and the slot's next run starts a fresh worker.

use super::{Answer, Request};
use crate::discover::StageJobs;
use crate::{
    client::failed_result, client::why_it_ended, client::ExecRequest, client::GPU_INDEX_ENV,
};
use repro_executor::{Conversation, Ending, ExitKind, Job, JobOutcome, Received};
use repro_pipeline::workload::exprs::Bindings;
use repro_schema::BenchResult;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `repro exec --worker` job for GPU slot `gpu` (the executor makes it the only GPU
/// the worker sees), run under `wrapper` (a profiler's command line) when one is given.
pub fn worker_job(jobs: &StageJobs, gpu: u32, wrapper: &[String]) -> Job {
    let mut argv = wrapper.to_vec();
    argv.extend([
        jobs.repro_exe.display().to_string(),
        "-f".into(),
        jobs.pipeline_file.display().to_string(),
        "exec".into(),
        "--worker".into(),
    ]);
    let mut job = Job::new(format!("exec-worker:gpu{gpu}"), argv, jobs.root);
    job.gpu = Some(gpu);
    // The GPU's number on this machine, for the records (locally; a scheduler's node
    // numbers its own).
    let physical = repro_executor::local::visible_gpu(gpu);
    job.env = BTreeMap::from([(GPU_INDEX_ENV.to_string(), physical)]);
    job.log = jobs.log.map(Path::to_path_buf);
    job
}

/// A running worker.
struct Live<'a> {
    talk: Box<dyn Conversation + 'a>,
    next_id: u64,
}

/// One worker per GPU slot, each used by one thread at a time (the slot's).
pub struct Workers<'a> {
    jobs: StageJobs<'a>,
    slots: Vec<Mutex<Option<Live<'a>>>>,
    /// The command each worker runs under (empty: none).
    wrapper: Vec<String>,
}

/// How one exchange with a worker ended.
enum Exchange {
    /// The run's record, and the worker's node.
    Record(Box<BenchResult>, Option<String>),
    /// The worker answered with an error. It lives on, unless it lost its context: then it
    /// was ended, and this is how it went.
    Refused {
        error: String,
        node: Option<String>,
        ended: Option<anyhow::Result<JobOutcome>>,
    },
    /// The worker gave no answer (late, crashed, interrupted) and was ended: how.
    Ended(JobOutcome),
}

impl<'a> Workers<'a> {
    pub fn new(jobs: StageJobs<'a>, slots: u32) -> Workers<'a> {
        Workers::wrapped(jobs, slots, Vec::new())
    }

    /// Workers that each run under `wrapper`, e.g. `ncu <flags>`: the profiler sees every
    /// run the worker makes.
    pub fn wrapped(jobs: StageJobs<'a>, slots: u32, wrapper: Vec<String>) -> Workers<'a> {
        Workers {
            jobs,
            slots: (0..slots.max(1)).map(|_| Mutex::new(None)).collect(),
            wrapper,
        }
    }

    /// Start slot `slot`'s worker now rather than at its first run.
    pub fn start(&self, slot: u32) -> anyhow::Result<()> {
        self.ensure_started(&mut self.slot(slot), slot)
    }

    fn slot(&self, slot: u32) -> std::sync::MutexGuard<'_, Option<Live<'a>>> {
        self.slots[slot as usize % self.slots.len()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Start `slot`'s worker into `worker` unless one is live.
    fn ensure_started(&self, worker: &mut Option<Live<'a>>, slot: u32) -> anyhow::Result<()> {
        if worker.is_none() {
            let job = worker_job(&self.jobs, slot, &self.wrapper);
            let talk = self.jobs.executor.converse(&job, self.jobs.cancel)?;
            *worker = Some(Live { talk, next_id: 0 });
        }
        Ok(())
    }

    /// End every live worker, each given `grace` to exit by itself once its stdin closes
    /// (a profiler writes its report then): how each ended.
    pub fn close(self, grace: Duration) -> Vec<anyhow::Result<JobOutcome>> {
        self.slots
            .iter()
            .filter_map(|slot| slot.lock().unwrap_or_else(|e| e.into_inner()).take())
            .map(|live| live.talk.end(Ending::FinishWithin(grace)))
            .collect()
    }

    /// Run `req` (of dimensions `shape`) on slot `slot`'s worker, waiting at most `timeout`
    /// for its answer. Never an error: a run without a record is a `failed` record saying why.
    pub fn run(
        &self,
        slot: u32,
        req: &ExecRequest,
        shape: &Bindings,
        timeout: Duration,
    ) -> BenchResult {
        let mut worker = self.slot(slot);
        if let Err(e) = self.ensure_started(&mut worker, slot) {
            let why = format!("could not start repro exec --worker: {e:#}");
            return failed_result(req, shape, why);
        }
        let began = Instant::now();
        let exchanged = exchange(&mut worker, req, timeout);
        // What each run took, for finding where a stage's time goes.
        self.note(&format!(
            "{} answered in {} ms",
            req.label(),
            began.elapsed().as_millis()
        ));
        match exchanged {
            Exchange::Record(mut r, node) => {
                r.node = node;
                *r
            }
            Exchange::Refused { error, node, ended } => {
                if let Some(ended) = ended {
                    self.replaced(slot, "its CUDA context was lost", ended);
                }
                let mut r = failed_result(req, shape, format!("repro exec: {error}"));
                r.node = node;
                r
            }
            Exchange::Ended(outcome) => {
                let why = why_it_ended("repro exec --worker", &outcome);
                let mut r = failed_result(req, shape, why.clone());
                r.node = outcome.node.clone();
                self.replaced(slot, &why, Ok(outcome));
                r
            }
        }
    }

    /// Say in the stage's log that slot `slot`'s worker ended, and why.
    fn replaced(&self, slot: u32, why: &str, ended: anyhow::Result<JobOutcome>) {
        let how = match ended {
            Ok(o) => format!("{:?}", o.exit),
            Err(e) => format!("{e:#}"),
        };
        self.note(&format!(
            "repro exec --worker on GPU slot {slot} ended ({how}): {why}; a fresh worker takes the slot's next run"
        ));
    }

    /// Append `line` to the stage's log.
    fn note(&self, line: &str) {
        if let Some(log) = self.jobs.log {
            repro_base::fsio::append_line(log, line);
        }
    }
}

/// End the worker in `slot` (taking it out).
fn end(slot: &mut Option<Live>, how: Ending) -> anyhow::Result<JobOutcome> {
    slot.take().expect("a live worker").talk.end(how)
}

/// Send `req` to the worker in `slot` and wait for its answer; a worker that cannot give
/// one is ended and taken out of the slot.
fn exchange(slot: &mut Option<Live>, req: &ExecRequest, timeout: Duration) -> Exchange {
    let live = slot.as_mut().expect("a live worker");
    live.next_id += 1;
    let id = live.next_id;
    let line = serde_json::to_string(&Request {
        id,
        run: req.clone(),
    })
    .expect("requests serialize");
    let sent = Instant::now();
    let ended = |slot: &mut Option<Live>, how: Ending| {
        let mut outcome = end(slot, how).unwrap_or_else(|e| JobOutcome {
            exit: ExitKind::Code(-1),
            stdout: Vec::new(),
            tail: format!("error: {e:#}"),
            node: None,
            elapsed: Duration::ZERO,
        });
        // What the run took, not the worker's whole life.
        outcome.elapsed = sent.elapsed();
        Exchange::Ended(outcome)
    };
    if live.talk.send(&line).is_err() {
        // It is gone: how it ended says why.
        return ended(slot, Ending::Finish);
    }
    loop {
        let live = slot.as_mut().expect("a live worker");
        let left = timeout.saturating_sub(sent.elapsed());
        match live.talk.receive(left) {
            Received::Line(text) => match Answer::find_in(&text) {
                Some(a) if a.id == id => {
                    let node = live.talk.node();
                    return match a.result {
                        Some(r) => Exchange::Record(Box::new(r), node),
                        None => Exchange::Refused {
                            error: a.error.unwrap_or_else(|| "an answer with no result".into()),
                            node,
                            ended: a.context_lost.then(|| end(slot, Ending::Finish)),
                        },
                    };
                }
                // A kernel's printf, or an answer to a request given up on: not ours.
                _ => continue,
            },
            Received::Closed => return ended(slot, Ending::Finish),
            Received::TimedOut => return ended(slot, Ending::Kill(ExitKind::TimedOut)),
            Received::Cancelled => return ended(slot, Ending::Kill(ExitKind::Cancelled)),
        }
    }
}

impl Drop for Workers<'_> {
    /// Close every worker's stdin: each exits once its last answer is written.
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Some(live) = slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = live.talk.end(Ending::Finish);
            }
        }
    }
}

#[cfg(test)]
mod tests;
