//! Runs each [`Job`] as a Slurm job step through `srun`, on a project directory the
//! compute nodes share. The step's stdout and stderr come back through srun; the node
//! name comes from a marker line the wrapper prints first (see [`srun`]).
//!
//! Ends: the program's exit code or signal; [`ExitKind::TimedOut`] when the job's own
//! `timeout` passes (counted from when the step starts, not from submission);
//! [`ExitKind::Scheduler`] with Slurm's reason when Slurm ends the step (time limit, node
//! failure, preemption); [`ExitKind::Cancelled`] when the run is interrupted. On timeout
//! and cancel the job is `scancel`led and repro waits until it has left the queue.

mod cluster;
mod conversation;
mod report;
mod srun;

pub use cluster::SlurmError;
use cluster::SlurmTools;

use crate::ExecutorSpec;
use crate::{conversation::open_log, conversation::Log as SharedLog};
use crate::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use anyhow::Context;
use report::{Cancelled, Started, TaskEnd};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How many lines of output [`JobOutcome::tail`] keeps.
const TAIL_LINES: usize = 40;
/// How long a cancelled or timed-out job may take to leave Slurm's queue.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// How long srun may take to exit after its job was cancelled, before it is killed.
const SRUN_EXIT_GRACE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);
/// Set when repro itself runs inside a Slurm job (`srun ... repro run`, `sbatch`). srun
/// would then start each job as a step of that job, within its resources, and cancelling
/// one would cancel repro's own job; without them every job is a job of its own.
const ALLOCATION_VARS: &[&str] = &[
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_STEP_ID",
    "SLURM_STEPID",
];

/// The `executor:` settings that shape each `srun` (see `pipeline.yaml`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SlurmSettings {
    pub partition: Option<String>,
    /// Requested for jobs that need a GPU, e.g. `gpu:1` or `gpu:l4:1`.
    pub gres: Option<String>,
    /// Slurm's `--time` for jobs without their own timeout (`30`, `1:00:00`, `2-00:00:00`).
    pub time: Option<String>,
    pub account: Option<String>,
    /// Extra `srun` arguments, placed after repro's own.
    pub srun_args: Vec<String>,
    /// Concurrent GPU jobs; the partition's GPU count when absent.
    pub max_jobs: Option<u32>,
}

impl From<&ExecutorSpec> for SlurmSettings {
    fn from(spec: &ExecutorSpec) -> Self {
        SlurmSettings {
            partition: spec.partition.clone(),
            gres: spec.gres.clone(),
            time: spec.time.clone(),
            account: spec.account.clone(),
            srun_args: spec.srun_args.clone(),
            max_jobs: spec.max_jobs,
        }
    }
}

impl SlurmSettings {
    /// A stage's settings: the pipeline's `executor:` block, with the stage's own block laid
    /// over it key by key (a stage names only what differs, e.g. `partition: gpu`). Blocks
    /// of another kind (`local`) contribute nothing.
    pub fn for_stage(pipeline: Option<&ExecutorSpec>, stage: Option<&ExecutorSpec>) -> Self {
        let slurm =
            |spec: Option<&ExecutorSpec>| spec.filter(|s| s.kind == "slurm").map(Self::from);
        let base = slurm(pipeline).unwrap_or_default();
        let Some(over) = slurm(stage) else {
            return base;
        };
        SlurmSettings {
            partition: over.partition.or(base.partition),
            gres: over.gres.or(base.gres),
            time: over.time.or(base.time),
            account: over.account.or(base.account),
            srun_args: if over.srun_args.is_empty() {
                base.srun_args
            } else {
                over.srun_args
            },
            max_jobs: over.max_jobs.or(base.max_jobs),
        }
    }
}

/// Runs jobs as Slurm job steps; one per stage (see [`SlurmSettings::for_stage`]).
#[derive(Debug)]
pub struct SlurmExecutor {
    tools: SlurmTools,
    settings: SlurmSettings,
    gpu_slots: u32,
}

impl SlurmExecutor {
    /// Checks that the client tools are installed, the controller answers and the
    /// partition exists, then counts the partition's GPUs.
    pub fn new(settings: SlurmSettings) -> Result<Self, SlurmError> {
        let tools = SlurmTools::find()?;
        let partition = tools.resolve_partition(settings.partition.as_deref())?;
        let gpu_slots = match settings.max_jobs {
            Some(n) => n.max(1),
            None => tools
                .partition_gpus(&partition, settings.gres.as_deref())?
                .max(1),
        };
        Ok(SlurmExecutor {
            tools,
            settings,
            gpu_slots,
        })
    }

    /// Starts srun in its own process group, so the terminal's Ctrl-C reaches repro (which
    /// cancels through Slurm) rather than srun directly. `stdin`: null, or a pipe srun
    /// forwards to the job (a conversation).
    fn spawn(&self, job: &Job, stdin: Stdio) -> anyhow::Result<Child> {
        let mut cmd = Command::new(&self.tools.srun);
        for var in ALLOCATION_VARS {
            cmd.env_remove(var);
        }
        cmd.args(srun::srun_args(job, &self.settings))
            .envs(&job.env)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot start {}", self.tools.srun.display()))
    }

    /// Cancels the job through Slurm, waits for srun to exit (killing it if it hangs on),
    /// and for the job to leave the queue.
    fn stop(&self, child: &mut Child, job: &Job, state: &Mutex<StepState>) -> anyhow::Result<()> {
        let job_id = state.lock().unwrap().job_id();
        self.tools.scancel(job_id, &job.name);
        let deadline = Instant::now() + SRUN_EXIT_GRACE;
        while child.try_wait()?.is_none() {
            if Instant::now() >= deadline {
                child.kill()?;
                child.wait()?;
                break;
            }
            thread::sleep(POLL);
        }
        let job_id = job_id.or_else(|| state.lock().unwrap().job_id());
        self.tools.drain(job_id, &job.name, DRAIN_LIMIT)
    }
}

impl Executor for SlurmExecutor {
    fn name(&self) -> &str {
        "slurm"
    }

    fn run(&self, job: &Job, cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        let begin = Instant::now();
        let log = open_log(job)?;
        let state = Arc::new(Mutex::new(StepState::default()));
        let stdin =
            match &job.stdin {
                Some(path) => Stdio::from(std::fs::File::open(path).with_context(|| {
                    format!("cannot open {} for the job's stdin", path.display())
                })?),
                None => Stdio::null(),
            };
        let mut child = self.spawn(job, stdin)?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let out_reader = {
            let (state, log) = (state.clone(), log.clone());
            let capture = job.capture_stdout;
            thread::spawn(move || read_stdout(stdout, capture, &state, &log))
        };
        let err_reader = {
            let (state, log) = (state.clone(), log.clone());
            thread::spawn(move || read_stderr(stderr, &state, &log))
        };

        let ours = loop {
            if let Some(status) = child.try_wait()? {
                break Ours::Finished(status);
            }
            if cancel.load(Ordering::SeqCst) {
                self.stop(&mut child, job, &state)?;
                break Ours::Cancelled;
            }
            let running_for = state.lock().unwrap().started_at.map(|t| t.elapsed());
            if let (Some(limit), Some(ran)) = (job.timeout, running_for) {
                if ran > limit {
                    self.stop(&mut child, job, &state)?;
                    break Ours::TimedOut;
                }
            }
            thread::sleep(POLL);
        };
        let stdout = out_reader.join().expect("stdout reader panicked")?;
        err_reader.join().expect("stderr reader panicked")?;

        let state = std::mem::take(&mut *state.lock().unwrap());
        let exit = match ours {
            Ours::Cancelled => ExitKind::Cancelled,
            Ours::TimedOut => ExitKind::TimedOut,
            Ours::Finished(status) => self.exit_kind(job, status, &state)?,
        };
        Ok(JobOutcome {
            exit,
            stdout,
            tail: state.tail.into_iter().collect::<Vec<_>>().join("\n"),
            node: state.started.map(|s| s.node),
            elapsed: begin.elapsed(),
        })
    }

    fn converse<'a>(
        &'a self,
        job: &Job,
        cancel: &CancelFlag,
    ) -> anyhow::Result<Box<dyn crate::Conversation + 'a>> {
        conversation::start(self, job, cancel)
    }

    fn gpu_slots(&self) -> u32 {
        self.gpu_slots
    }

    fn runs_jobs_here(&self) -> bool {
        false
    }
}

impl SlurmExecutor {
    /// How a step that srun saw to the end finished.
    fn exit_kind(
        &self,
        job: &Job,
        status: ExitStatus,
        state: &StepState,
    ) -> anyhow::Result<ExitKind> {
        if let Some(c) = &state.cancelled {
            return Ok(ExitKind::Scheduler(c.describe()));
        }
        let Some(code) = status.code() else {
            // srun itself was killed by a signal (not by us).
            return Ok(ExitKind::Signal(status.signal().unwrap_or(0)));
        };
        if state.started.is_none() {
            if code == 0 {
                anyhow::bail!(
                    "srun ended job '{}' without running it (no start marker); its output:\n{}",
                    job.name,
                    state.tail_text()
                );
            }
            let why = state
                .alloc_error
                .as_deref()
                .unwrap_or("srun failed before the job started");
            anyhow::bail!(
                "Slurm did not run job '{}': {why}\n{}\n  check `executor:` in pipeline.yaml (partition, gres, time, account, srun_args)",
                job.name,
                state.tail_text()
            );
        }
        if code != 0 {
            if let Some(reason) = state.job_id().and_then(|id| self.tools.scheduler_end(id)) {
                return Ok(ExitKind::Scheduler(reason));
            }
        }
        Ok(match (&state.task_end, code) {
            (Some(TaskEnd::Signalled), c) if c > 128 => ExitKind::Signal(c - 128),
            (Some(TaskEnd::Exited(c)), _) => ExitKind::Code(*c),
            (_, c) => ExitKind::Code(c),
        })
    }
}

/// Who ended the wait loop.
enum Ours {
    Finished(ExitStatus),
    Cancelled,
    TimedOut,
}

/// What the output readers learned about the step.
#[derive(Debug, Default)]
struct StepState {
    started: Option<Started>,
    started_at: Option<Instant>,
    /// From srun's queueing messages, before the step starts.
    queued_job_id: Option<u64>,
    cancelled: Option<Cancelled>,
    task_end: Option<TaskEnd>,
    alloc_error: Option<String>,
    tail: VecDeque<String>,
}

impl StepState {
    fn job_id(&self) -> Option<u64> {
        self.started
            .as_ref()
            .and_then(|s| s.job_id)
            .or(self.queued_job_id)
    }

    fn push_tail(&mut self, line: &str) {
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line.trim_end().to_string());
    }

    fn tail_text(&self) -> String {
        self.tail
            .iter()
            .map(|l| format!("  | {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Learns what it can from one line srun wrote on stderr.
    fn note_stderr(&mut self, line: &str) {
        if let Some(id) = report::parse_srun_job_id(line) {
            self.queued_job_id = Some(id);
        } else if let Some(c) = report::parse_cancelled(line) {
            self.cancelled = Some(c);
        } else if let Some(end) = report::parse_task_end(line) {
            self.task_end = Some(end);
        } else if let Some(e) = report::parse_allocation_error(line) {
            self.alloc_error = Some(e.to_string());
        }
    }
}

fn write_log(log: &SharedLog, line: &[u8]) -> anyhow::Result<()> {
    if let Some(f) = log.lock().unwrap().as_mut() {
        f.write_all(line).context("cannot write the job log")?;
    }
    Ok(())
}

/// Copies the step's stdout to the log (and memory, if asked), line by line.
fn read_stdout(
    stream: impl Read,
    capture: bool,
    state: &Mutex<StepState>,
    log: &SharedLog,
) -> anyhow::Result<Vec<u8>> {
    let mut reader = BufReader::new(stream);
    let mut captured = Vec::new();
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line)? > 0 {
        write_log(log, &line)?;
        state
            .lock()
            .unwrap()
            .push_tail(&String::from_utf8_lossy(&line));
        if capture {
            captured.extend_from_slice(&line);
        }
        line.clear();
    }
    Ok(captured)
}

/// Copies the step's stderr to the log, keeping the wrapper's start marker out of it and
/// noting what srun and slurmstepd say about the step.
fn read_stderr(stream: impl Read, state: &Mutex<StepState>, log: &SharedLog) -> anyhow::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line)? > 0 {
        let text = String::from_utf8_lossy(&line);
        let mut st = state.lock().unwrap();
        match report::parse_started(&text) {
            Some(started) if st.started.is_none() => {
                st.started = Some(started);
                st.started_at = Some(Instant::now());
            }
            _ => {
                st.note_stderr(&text);
                st.push_tail(&text);
                drop(st);
                write_log(log, &line)?;
            }
        }
        line.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: &str) -> ExecutorSpec {
        ExecutorSpec {
            kind: kind.into(),
            partition: None,
            gres: None,
            time: None,
            account: None,
            srun_args: vec![],
            max_jobs: None,
        }
    }

    #[test]
    fn a_stage_block_overrides_the_pipeline_block_key_by_key() {
        let pipeline = ExecutorSpec {
            partition: Some("cpu".into()),
            time: Some("30".into()),
            account: Some("kernels".into()),
            srun_args: vec!["--exclusive".into()],
            ..spec("slurm")
        };
        let stage = ExecutorSpec {
            partition: Some("gpu".into()),
            gres: Some("gpu:l4:1".into()),
            ..spec("slurm")
        };
        let merged = SlurmSettings::for_stage(Some(&pipeline), Some(&stage));
        assert_eq!(
            merged,
            SlurmSettings {
                partition: Some("gpu".into()),
                gres: Some("gpu:l4:1".into()),
                time: Some("30".into()),
                account: Some("kernels".into()),
                srun_args: vec!["--exclusive".into()],
                max_jobs: None,
            }
        );
    }

    #[test]
    fn local_blocks_contribute_nothing() {
        let pipeline = ExecutorSpec {
            partition: Some("cpu".into()),
            ..spec("local")
        };
        assert_eq!(
            SlurmSettings::for_stage(Some(&pipeline), None),
            SlurmSettings::default()
        );
        let stage = ExecutorSpec {
            time: Some("5".into()),
            ..spec("slurm")
        };
        assert_eq!(
            SlurmSettings::for_stage(Some(&pipeline), Some(&stage))
                .time
                .as_deref(),
            Some("5")
        );
    }
}
