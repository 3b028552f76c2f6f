//! Where stage processes are started. Every process a stage runs goes through an
//! [`Executor`]: local child processes today, a cluster scheduler (Slurm) behind the same
//! interface. No stage spawns processes around it.
//!
//! It depends only on `repro-base`: it knows no pipeline, stage or GPU (a local executor is
//! told how to count GPUs).

pub mod conversation;
pub mod local;
pub mod orphans;
pub mod slurm;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// Short name for logs and scheduler job names, e.g. `bench:stage2-baseline:mission:0`.
    pub name: String,
    /// Program and arguments. A shell line is `["sh", "-c", line]`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Added to the inherited environment.
    pub env: BTreeMap<String, String>,
    pub timeout: Option<Duration>,
    /// Append the job's stdout and stderr here (created if missing).
    pub log: Option<PathBuf>,
    /// Also keep stdout in memory and return it (for `repro exec`'s JSON line).
    pub capture_stdout: bool,
    /// The job needs one GPU: which visible device index (locally `CUDA_VISIBLE_DEVICES` is
    /// set to that GPU, see [`local::visible_gpu`]; a GPU request for a scheduler).
    pub gpu: Option<u32>,
    /// The job reads this file on stdin (without one, stdin is empty: `/dev/null`).
    pub stdin: Option<PathBuf>,
}

impl Job {
    pub fn new(name: impl Into<String>, argv: Vec<String>, cwd: impl Into<PathBuf>) -> Self {
        Job {
            name: name.into(),
            argv,
            cwd: cwd.into(),
            env: BTreeMap::new(),
            timeout: None,
            log: None,
            capture_stdout: false,
            gpu: None,
            stdin: None,
        }
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with this code (0 is success).
    Code(i32),
    /// Killed by a signal it did not ask for (e.g. a segfault).
    Signal(i32),
    /// Killed by us after its timeout.
    TimedOut,
    /// Killed by us because the run was interrupted.
    Cancelled,
    /// The scheduler ended it, with its reason (Slurm: TIMEOUT, NODE_FAIL, ...).
    Scheduler(String),
}

#[derive(Debug, Clone)]
pub struct JobOutcome {
    pub exit: ExitKind,
    /// Captured stdout (empty unless `capture_stdout`).
    pub stdout: Vec<u8>,
    /// The last lines of combined output, for error messages.
    pub tail: String,
    /// The host that ran it.
    pub node: Option<String>,
    pub elapsed: Duration,
}

impl JobOutcome {
    pub fn success(&self) -> bool {
        self.exit == ExitKind::Code(0)
    }

    /// The last non-blank line of the captured stdout, trimmed: where `repro exec` prints
    /// its one JSON answer, after anything a kernel or the driver may have printed.
    pub fn last_stdout_line(&self) -> Option<String> {
        String::from_utf8_lossy(&self.stdout)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    }
}

/// Set when the user interrupts (Ctrl-C / SIGTERM): executors kill what they started.
pub type CancelFlag = Arc<AtomicBool>;

pub use conversation::{Conversation, Ending, Received};

/// Starts jobs. `run` blocks until the job ends; stages that want concurrency call it from
/// several threads.
pub trait Executor: Send + Sync {
    fn name(&self) -> &str;
    fn run(&self, job: &Job, cancel: &CancelFlag) -> anyhow::Result<JobOutcome>;
    /// Start `job` for a conversation: lines to its stdin, lines back from its stdout, until
    /// the caller ends it (a long-lived `repro exec --worker`). The job's `timeout` is not
    /// applied: the caller times each answer. The default starts a local process, as
    /// [`local`] does; executors whose jobs run elsewhere start it there.
    fn converse<'a>(
        &'a self,
        job: &Job,
        cancel: &CancelFlag,
    ) -> anyhow::Result<Box<dyn Conversation + 'a>> {
        conversation::start_local(job, cancel)
    }
    /// How many GPU jobs may run at once (visible GPUs locally; a limit on a cluster).
    fn gpu_slots(&self) -> u32;
    /// Do jobs run on the machine running repro, seeing its GPUs? When not (a cluster),
    /// GPU stages discover the GPUs by running a probe job instead.
    fn runs_jobs_here(&self) -> bool {
        true
    }
}

/// Where processes run. `local` (default) or `slurm`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSpec {
    pub kind: String,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub gres: Option<String>,
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    #[serde(default)]
    pub srun_args: Vec<String>,
    /// Maximum concurrent job steps (tune trials).
    #[serde(default)]
    pub max_jobs: Option<u32>,
}

/// The executor kind pipeline.yaml gives a stage: its own `executor:`, else the pipeline's,
/// else `local` (without the command line's `--executor`).
pub fn configured_kind<'a>(
    pipeline: Option<&'a ExecutorSpec>,
    stage: Option<&'a ExecutorSpec>,
) -> &'a str {
    stage.or(pipeline).map_or("local", |e| e.kind.as_str())
}

/// The executor for one stage: the stage's own `executor:`, else the pipeline's, else
/// `local`; `cli_override` (`--executor`) wins over both.
/// `count_gpus` tells a local executor how many GPUs this machine has (asked once, when a
/// stage first wants its GPU slots): this crate knows no GPU.
pub fn for_stage(
    pipeline: Option<&ExecutorSpec>,
    stage: Option<&ExecutorSpec>,
    cli_override: Option<&str>,
    count_gpus: local::GpuCount,
) -> anyhow::Result<Box<dyn Executor>> {
    match cli_override.unwrap_or_else(|| configured_kind(pipeline, stage)) {
        "local" => Ok(Box::new(local::LocalExecutor::counting_gpus(count_gpus))),
        "slurm" => {
            let settings = slurm::SlurmSettings::for_stage(pipeline, stage);
            Ok(Box::new(slurm::SlurmExecutor::new(settings)?))
        }
        other => anyhow::bail!("unknown executor `{other}`\n  help: expected `local` or `slurm`"),
    }
}
