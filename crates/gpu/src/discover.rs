//! Which GPUs a GPU stage measures on. When the executor runs jobs here (local) that is
//! this machine's driver ([`super::probe_cached`], fast and cached). Through another executor (Slurm) the
//! machine running `repro` may have no GPU at all (a login node), so one
//! `repro exec --query-devices` job runs where the stage's GPU jobs will run, holding a GPU
//! as they do, and prints what the driver there sees.

use super::client::error_lines;
use super::{GpuInfo, NoGpu};
use repro_executor::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use std::path::Path;
use std::time::Duration;

/// How long the probe job may take (queueing aside, it only initializes CUDA).
const QUERY_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a GPU stage's jobs run and what they run: the probe job here, the GPU workers
/// ([`super::worker::pool`]).
#[derive(Clone, Copy)]
pub struct StageJobs<'a> {
    pub executor: &'a dyn Executor,
    pub cancel: &'a CancelFlag,
    pub repro_exe: &'a Path,
    pub pipeline_file: &'a Path,
    pub root: &'a Path,
    /// The stage's log, which the jobs' output is appended to.
    pub log: Option<&'a Path>,
}

/// The GPUs the stage's jobs will see: the local probe when the executor runs jobs on this
/// machine, else a probe job through the executor. Every failure is a [`NoGpu`] with the reason.
pub fn stage_gpus(q: &StageJobs) -> Result<Vec<GpuInfo>, NoGpu> {
    if q.executor.runs_jobs_here() {
        return super::probe_cached(q.root);
    }
    let mut job = query_job(q.repro_exe, q.pipeline_file, q.root);
    job.log = q.log.map(Path::to_path_buf);
    let outcome = q.executor.run(&job, q.cancel).map_err(|e| {
        NoGpu(format!(
            "could not run the GPU probe job through the {} executor: {e:#}",
            q.executor.name()
        ))
    })?;
    devices_from_outcome(q.executor.name(), &outcome)
}

/// `repro exec --query-devices`, holding one GPU (so a scheduler places it on a GPU node).
pub fn query_job(repro_exe: &Path, pipeline_file: &Path, root: &Path) -> Job {
    let argv = vec![
        repro_exe.display().to_string(),
        "-f".into(),
        pipeline_file.display().to_string(),
        "exec".into(),
        "--query-devices".into(),
    ];
    let mut job = Job::new("exec:query-devices", argv, root);
    job.gpu = Some(0);
    job.capture_stdout = true;
    job.timeout = Some(QUERY_TIMEOUT);
    job
}

/// The GPU list the probe job printed (its last non-empty stdout line), or why there is none.
pub fn devices_from_outcome(executor: &str, outcome: &JobOutcome) -> Result<Vec<GpuInfo>, NoGpu> {
    let node = outcome.node.as_deref().unwrap_or("an unknown node");
    if !outcome.success() {
        let ended = match &outcome.exit {
            ExitKind::Code(code) => format!("exited with code {code}"),
            ExitKind::Signal(sig) => format!("was killed by signal {sig}"),
            ExitKind::TimedOut => format!("timed out after {} s", QUERY_TIMEOUT.as_secs()),
            ExitKind::Cancelled => "was cancelled".into(),
            ExitKind::Scheduler(reason) => format!("was ended by the scheduler: {reason}"),
        };
        return Err(NoGpu(format!(
            "the GPU probe job (repro exec --query-devices) through the {executor} executor on {node} {ended}: {}",
            error_lines(&outcome.tail)
        )));
    }
    let line = outcome.last_stdout_line().unwrap_or_default();
    let gpus: Vec<GpuInfo> = serde_json::from_str(&line).map_err(|e| {
        NoGpu(format!(
            "the GPU probe job on {node} printed no GPU list ({e}): `{line}`"
        ))
    })?;
    if gpus.is_empty() {
        return Err(NoGpu(format!("the GPU probe job on {node} sees no GPU")));
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100(index: u32) -> GpuInfo {
        GpuInfo {
            index,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: format!("GPU-{index}"),
            compute_capability: [9, 0],
            sm_count: 132,
            memory_bytes: 85_000_000_000,
            cuda_driver_version: "13.0".into(),
            driver_version: Some("580.159.04".into()),
        }
    }

    fn outcome(exit: ExitKind, stdout: &str, tail: &str) -> JobOutcome {
        JobOutcome {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            tail: tail.into(),
            node: Some("gpu-node-3".into()),
            elapsed: Duration::from_secs(1),
        }
    }

    #[test]
    fn the_probe_job_asks_for_a_gpu_and_captures_its_line() {
        let job = query_job(
            Path::new("/shared/repro"),
            Path::new("/p/pipeline.yaml"),
            Path::new("/p"),
        );
        assert_eq!(
            job.argv.join(" "),
            "/shared/repro -f /p/pipeline.yaml exec --query-devices"
        );
        assert_eq!(job.gpu, Some(0));
        assert!(job.capture_stdout);
        assert_eq!(job.timeout, Some(QUERY_TIMEOUT));
    }

    #[test]
    fn reads_the_gpu_list_the_node_printed() {
        let line = serde_json::to_string(&vec![h100(0), h100(1)]).unwrap();
        let got = devices_from_outcome(
            "slurm",
            &outcome(ExitKind::Code(0), &format!("srun noise\n{line}\n"), ""),
        )
        .unwrap();
        assert_eq!(got, vec![h100(0), h100(1)]);
    }

    #[test]
    fn failures_name_the_node_and_the_reason() {
        let err = devices_from_outcome(
            "slurm",
            &outcome(
                ExitKind::Code(1),
                "",
                "error: no CUDA driver (libcuda.so.1) found\n",
            ),
        )
        .unwrap_err();
        assert_eq!(
            err.0,
            "the GPU probe job (repro exec --query-devices) through the slurm executor on \
             gpu-node-3 exited with code 1: error: no CUDA driver (libcuda.so.1) found"
        );
        let err =
            devices_from_outcome("slurm", &outcome(ExitKind::Code(0), "[]\n", "")).unwrap_err();
        assert_eq!(err.0, "the GPU probe job on gpu-node-3 sees no GPU");
        let err =
            devices_from_outcome("slurm", &outcome(ExitKind::Code(0), "hello\n", "")).unwrap_err();
        assert!(err.0.contains("printed no GPU list"), "{}", err.0);
    }
}
