//! A conversation with a job step: srun forwards the lines written to its stdin to the step
//! and the step's stdout back, so one Slurm job runs one `repro exec --worker` for a whole
//! batch of runs. The caller's wait for an answer counts from when the step started, not
//! while the job waits in the queue; killing the conversation `scancel`s the job.

use super::{read_stderr, write_log, SlurmExecutor, StepState, POLL};
use crate::{
    conversation::send_line, conversation::Ending, conversation::Lines, conversation::Received,
};
use crate::{CancelFlag, Conversation, ExitKind, Job, JobOutcome};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long a step that has answered waits for its start marker to name its node.
const MARKER_WAIT: Duration = Duration::from_secs(2);

/// How the step ended, as far as this side saw.
enum Ended {
    Exited(ExitStatus),
    /// Killed by us (`scancel`), for this reason.
    Killed(ExitKind),
}

pub(super) struct Step<'a> {
    executor: &'a SlurmExecutor,
    job: Job,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines,
    state: Arc<Mutex<StepState>>,
    stderr_reader: thread::JoinHandle<anyhow::Result<()>>,
    cancel: CancelFlag,
    begin: Instant,
}

pub(super) fn start<'a>(
    executor: &'a SlurmExecutor,
    job: &Job,
    cancel: &CancelFlag,
) -> anyhow::Result<Box<dyn Conversation + 'a>> {
    let log = super::open_log(job)?;
    let state = Arc::new(Mutex::new(StepState::default()));
    let mut child = executor.spawn(job, Stdio::piped())?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let lines = {
        let (state, log) = (state.clone(), log.clone());
        Lines::pump(stdout, move |line| {
            // A log that cannot be written loses lines, never the step.
            let _ = write_log(&log, line);
            state
                .lock()
                .unwrap()
                .push_tail(&String::from_utf8_lossy(line));
        })
    };
    let stderr_reader = {
        let state = state.clone();
        thread::spawn(move || read_stderr(stderr, &state, &log))
    };
    Ok(Box::new(Step {
        executor,
        job: job.clone(),
        child,
        stdin,
        lines,
        state,
        stderr_reader,
        cancel: cancel.clone(),
        begin: Instant::now(),
    }))
}

impl Conversation for Step<'_> {
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        send_line(&mut self.stdin, line)
    }

    fn receive(&mut self, timeout: Duration) -> Received {
        let asked = Instant::now();
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                return Received::Cancelled;
            }
            // Queued: no clock runs yet.
            let started = self.state.lock().unwrap().started_at;
            let Some(started) = started else {
                match self.lines.next_within(POLL) {
                    Some(got) => return got,
                    None => continue,
                }
            };
            let deadline = asked.max(started) + timeout;
            return self.lines.next_before(deadline, &self.cancel);
        }
    }

    /// The wrapper writes its start marker, naming the node, to stderr before the step's
    /// program runs, but stderr is read on a thread of its own: an answer read from stdout
    /// can come first. So the marker is waited for, briefly, unless stderr has ended.
    fn node(&self) -> Option<String> {
        let deadline = Instant::now() + MARKER_WAIT;
        loop {
            if let Some(started) = &self.state.lock().unwrap().started {
                return Some(started.node.clone());
            }
            if Instant::now() >= deadline || self.stderr_reader.is_finished() {
                return None;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    fn end(mut self: Box<Self>, how: Ending) -> anyhow::Result<JobOutcome> {
        drop(self.stdin.take());
        let ended = match how {
            Ending::Kill(why) => {
                self.executor
                    .stop(&mut self.child, &self.job, &self.state)?;
                Ended::Killed(why)
            }
            Ending::Finish | Ending::FinishWithin(_) => {
                let grace = match how {
                    Ending::FinishWithin(d) => d.max(super::SRUN_EXIT_GRACE),
                    _ => super::SRUN_EXIT_GRACE,
                };
                let deadline = Instant::now() + grace;
                loop {
                    if let Some(status) = self.child.try_wait()? {
                        break Ended::Exited(status);
                    }
                    if Instant::now() >= deadline {
                        self.executor
                            .stop(&mut self.child, &self.job, &self.state)?;
                        break Ended::Killed(ExitKind::Signal(libc::SIGKILL));
                    }
                    thread::sleep(POLL);
                }
            }
        };
        self.stderr_reader.join().expect("stderr reader panicked")?;
        let state = std::mem::take(&mut *self.state.lock().unwrap());
        let exit = match ended {
            Ended::Killed(why) => why,
            Ended::Exited(status) => self.executor.exit_kind(&self.job, status, &state)?,
        };
        Ok(JobOutcome {
            exit,
            stdout: Vec::new(),
            tail: state.tail.into_iter().collect::<Vec<_>>().join("\n"),
            node: state.started.map(|s| s.node),
            elapsed: self.begin.elapsed(),
        })
    }
}
