//! Local child processes, through duct. Each job runs in its own process group
//! (`before_spawn` sets it), so a timeout or an interrupt kills the job and everything it
//! started — SIGTERM to the group, then SIGKILL after a short grace. Processes the job
//! leaves behind when it exits are killed too, in its group or escaped from it
//! ([`super::orphans::seal_job`]), so nothing outlives its stage. If `repro`
//! itself is killed (SIGKILL), the job's first process dies with it (`PR_SET_PDEATHSIG`)
//! and the rest of its group is found by the run id it carries and killed by the next run
//! ([`super::orphans`]).

use super::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use anyhow::Context;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a process group gets between SIGTERM and SIGKILL.
pub(super) const GRACE: Duration = Duration::from_secs(2);
/// Lines of output kept for error messages.
pub(super) const TAIL_LINES: usize = 20;

/// Runs jobs as local processes.
#[derive(Debug, Default)]
pub struct LocalExecutor {
    gpu_slots: OnceLock<u32>,
    count_gpus: Option<GpuCount>,
}

/// How many GPUs this machine has, `None` when it cannot tell; the caller that knows GPUs
/// supplies it.
pub type GpuCount = fn() -> Option<u32>;

impl LocalExecutor {
    /// An executor whose GPU slots come from `CUDA_VISIBLE_DEVICES` alone (1 without it).
    pub fn new() -> Self {
        LocalExecutor::default()
    }

    /// An executor that asks `count_gpus` for its GPU slots when `CUDA_VISIBLE_DEVICES`
    /// does not say.
    pub fn counting_gpus(count_gpus: GpuCount) -> Self {
        LocalExecutor {
            gpu_slots: OnceLock::new(),
            count_gpus: Some(count_gpus),
        }
    }
}

impl Executor for LocalExecutor {
    fn name(&self) -> &str {
        "local"
    }

    fn run(&self, job: &Job, cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        run_job(job, cancel)
    }

    /// `CUDA_VISIBLE_DEVICES` if set, else the number of GPUs the probe sees; at least 1.
    /// Computed on first use only.
    fn gpu_slots(&self) -> u32 {
        *self.gpu_slots.get_or_init(|| {
            if let Ok(visible) = std::env::var("CUDA_VISIBLE_DEVICES") {
                let n = visible.split(',').filter(|s| !s.trim().is_empty()).count() as u32;
                return n.max(1);
            }
            self.count_gpus
                .and_then(|count| count())
                .unwrap_or(1)
                .max(1)
        })
    }
}

/// `CUDA_VISIBLE_DEVICES` for a job given visible GPU `index`: the `index`-th entry of
/// this process's own `CUDA_VISIBLE_DEVICES` when it has one (repro itself was given some
/// GPUs: its jobs stay on them), else the index.
pub fn visible_gpu(index: u32) -> String {
    visible_gpu_of(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(), index)
}

fn visible_gpu_of(ours: Option<&str>, index: u32) -> String {
    ours.and_then(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .nth(index as usize)
            .map(str::to_string)
    })
    .unwrap_or_else(|| index.to_string())
}

/// How often a running job's timeout and the run's interrupt are looked at.
const POLL: Duration = Duration::from_millis(20);

/// Waits for a child to exit without a busy loop: a pidfd (Linux 5.3) becomes readable
/// when the process ends, so a short job is noticed at once, not after a sleep.
struct ExitWatch {
    pidfd: Option<std::os::fd::OwnedFd>,
    /// The pidfd said "exited" once: it stays readable, so what is left to wait for (a
    /// reader of the job's output) is waited for with short sleeps.
    signalled: std::cell::Cell<bool>,
}

impl ExitWatch {
    fn new(pid: u32) -> ExitWatch {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags (integers, no memory) and returns a new
        // descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        ExitWatch {
            // SAFETY: `fd` is a descriptor the kernel just returned (>= 0), owned by nothing
            // else, so `OwnedFd` may close it.
            pidfd: (fd >= 0 && pid != 0)
                .then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }),
            signalled: std::cell::Cell::new(false),
        }
    }

    /// Return when the process has exited, or after `at_most`.
    fn wait(&self, at_most: Duration) {
        use std::os::fd::AsRawFd;
        match &self.pidfd {
            Some(fd) if !self.signalled.get() => {
                let mut poll = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: `poll` is one valid pollfd, borrowed mutably for the call, and the
                // count passed is 1; an error or a signal just ends the wait early.
                let ready = unsafe { libc::poll(&mut poll, 1, at_most.as_millis() as libc::c_int) };
                self.signalled.set(ready > 0);
            }
            Some(_) => std::thread::sleep(Duration::from_millis(1)),
            None => std::thread::sleep(at_most.min(Duration::from_millis(5))),
        }
    }
}

/// This machine's host name, if it has one.
pub fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for the length passed, and gethostname writes at most that
    // many bytes. It need not NUL-terminate a truncated name: the search below stops at the
    // end of the buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// This machine's host name, `unknown` when it has none.
pub fn hostname() -> String {
    host_name().unwrap_or_else(|| "unknown".into())
}

pub(super) fn signal_group(pgid: u32, signal: i32) {
    if pgid == 0 {
        return; // 0 would be this process's own group
    }
    // SAFETY: killpg takes integers only and touches no memory; `pgid` is not 0 (checked
    // above); a group that is gone gives ESRCH, ignored.
    unsafe {
        libc::killpg(pgid as libc::pid_t, signal);
    }
}

/// Have the child killed when the thread that starts it (which waits for it) dies, as it
/// does when `repro` is killed with SIGKILL.
pub(super) fn die_with_parent(cmd: &mut std::process::Command) {
    // SAFETY: getpid takes no arguments and cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the hook runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it makes only prctl, getppid and _exit, allocates nothing (an
    // `io::Error` from errno is a plain code), and captures only the `parent` integer.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the prctl took effect: go now.
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            Ok(())
        });
    }
}

fn run_job(job: &Job, cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
    let (program, args) = job
        .argv
        .split_first()
        .with_context(|| format!("job `{}` has an empty command", job.name))?;
    let mut expr = duct::cmd(program, args).dir(&job.cwd);
    expr = match &job.stdin {
        Some(path) => expr.stdin_path(path),
        None => expr.stdin_null(),
    };
    let mut expr = expr.unchecked().before_spawn(|cmd| {
        cmd.process_group(0);
        die_with_parent(cmd);
        Ok(())
    });
    for (k, v) in &job.env {
        expr = expr.env(k, v);
    }
    if let Some(gpu) = job.gpu {
        expr = expr.env("CUDA_VISIBLE_DEVICES", visible_gpu(gpu));
    }
    // After the job's own env: a stage cannot take its processes out of the run.
    super::orphans::become_subreaper();
    let tag = super::orphans::job_tag();
    expr = expr
        .env(super::orphans::RUN_ID_ENV, super::orphans::run_id())
        .env(super::orphans::JOB_ENV, &tag);
    let mut log_start = 0;
    match &job.log {
        Some(log) => {
            if let Some(parent) = log.parent() {
                repro_base::fsio::create_dir_all(parent)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .with_context(|| format!("cannot open log {}", log.display()))?;
            log_start = file.metadata()?.len();
            expr = if job.capture_stdout {
                expr.stdout_capture().stderr_file(file)
            } else {
                expr.stdout_file(file.try_clone()?).stderr_file(file)
            };
        }
        None => {
            expr = if job.capture_stdout {
                expr.stdout_capture().stderr_capture()
            } else {
                expr.stdout_capture().stderr_to_stdout()
            };
        }
    }
    let started = Instant::now();
    let handle = expr
        .start()
        .with_context(|| format!("cannot start `{program}` (job `{}`)", job.name))?;
    let pgid = handle.pids().first().copied().unwrap_or(0);
    // A timeout too long to add to the clock is no timeout.
    let deadline = job.timeout.and_then(|t| started.checked_add(t));
    let mut killed: Option<(ExitKind, Instant)> = None;
    let exited = ExitWatch::new(pgid);
    let output = loop {
        if let Some(out) = handle.try_wait()? {
            break out;
        }
        let now = Instant::now();
        match &killed {
            None => {
                let reason = if cancel.load(Ordering::SeqCst) {
                    Some(ExitKind::Cancelled)
                } else if deadline.is_some_and(|d| now >= d) {
                    Some(ExitKind::TimedOut)
                } else {
                    None
                };
                if let Some(reason) = reason {
                    signal_group(pgid, libc::SIGTERM);
                    killed = Some((reason, now));
                }
            }
            Some((_, at)) if now.duration_since(*at) >= GRACE => signal_group(pgid, libc::SIGKILL),
            Some(_) => {}
        }
        exited.wait(POLL);
    };
    // Whatever the job left running, in its group or escaped from it, goes with it.
    super::orphans::seal_job(pgid, &tag)
        .with_context(|| format!("job `{}` left processes behind", job.name))?;
    let exit = match killed {
        Some((reason, _)) => reason,
        None => match (output.status.code(), output.status.signal()) {
            (Some(code), _) => ExitKind::Code(code),
            (None, Some(sig)) => ExitKind::Signal(sig),
            (None, None) => ExitKind::Code(-1),
        },
    };
    let stdout = if job.capture_stdout {
        output.stdout.clone()
    } else {
        Vec::new()
    };
    let mut combined = Vec::new();
    if let Some(log) = &job.log {
        combined = log_tail(
            log,
            log_start,
            job.capture_stdout.then_some(&output.stdout[..]),
        )?;
    } else {
        combined.extend_from_slice(&output.stdout);
        combined.extend_from_slice(&output.stderr);
    }
    Ok(JobOutcome {
        exit,
        stdout,
        tail: tail(&String::from_utf8_lossy(&combined), TAIL_LINES),
        node: Some(hostname()),
        elapsed: started.elapsed(),
    })
}

/// What the job wrote to its `log` from `start` on, after `captured` (its stdout, when it
/// was captured) is appended there. A log the job itself removed (a `rm -rf .repro`, a
/// `git clean -xfd`) is no error: the job's own ending is what the stage reports, and the
/// tail says where the log went.
fn log_tail(log: &Path, start: u64, captured: Option<&[u8]>) -> std::io::Result<Vec<u8>> {
    let read = captured
        .map_or(Ok(()), |bytes| append(log, bytes))
        .and_then(|()| read_from(log, start));
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Ok(format!("(no log: the job removed {} while it ran)", log.display()).into_bytes())
        }
        other => other.map_err(|e| repro_base::fsio::at(log, e)),
    }
}

fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(bytes)
}

/// The bytes of `path` from `offset` on (at most the last 64 KiB).
fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = offset.max(len.saturating_sub(64 * 1024));
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    Ok(buf)
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    fn sh(line: &str) -> Job {
        Job::new(
            "t",
            vec!["sh".into(), "-c".into(), line.into()],
            std::env::temp_dir(),
        )
    }

    #[test]
    fn stdin_is_the_jobs_file_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = sh("cat; echo end");
        job.capture_stdout = true;
        let never = Arc::new(AtomicBool::new(false));
        assert_eq!(run_job(&job, &never).unwrap().stdout, b"end\n");
        let file = dir.path().join("in.json");
        std::fs::write(&file, "{\"brief\": 1}\n").unwrap();
        job.stdin = Some(file);
        assert_eq!(
            run_job(&job, &never).unwrap().stdout,
            b"{\"brief\": 1}\nend\n"
        );
    }

    #[test]
    fn captures_stdout_and_exit_code() {
        let mut job = sh("echo hello; echo oops >&2; exit 3");
        job.capture_stdout = true;
        let out = run_job(&job, &Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(out.exit, ExitKind::Code(3));
        assert_eq!(out.stdout, b"hello\n");
        assert!(out.tail.contains("oops"));
    }

    #[test]
    fn appends_to_the_log_and_sets_env() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = sh("echo $GREETING; echo dev=$CUDA_VISIBLE_DEVICES >&2");
        job.env.insert("GREETING".into(), "hi".into());
        job.gpu = Some(1);
        job.log = Some(dir.path().join("logs/j.log"));
        std::fs::create_dir_all(dir.path().join("logs")).unwrap();
        std::fs::write(dir.path().join("logs/j.log"), "before\n").unwrap();
        let out = run_job(&job, &Arc::new(AtomicBool::new(false))).unwrap();
        assert!(out.success());
        let log = std::fs::read_to_string(dir.path().join("logs/j.log")).unwrap();
        assert_eq!(log, "before\nhi\ndev=1\n");
        assert_eq!(out.tail, "hi\ndev=1");
    }

    #[test]
    fn a_jobs_gpu_is_one_of_those_repro_was_given() {
        assert_eq!(visible_gpu_of(None, 1), "1");
        assert_eq!(visible_gpu_of(Some("3"), 0), "3");
        assert_eq!(visible_gpu_of(Some("2, 5"), 1), "5");
        assert_eq!(visible_gpu_of(Some("GPU-abc,GPU-def"), 0), "GPU-abc");
        // More slots than GPUs given (a cluster's count): the index itself.
        assert_eq!(visible_gpu_of(Some("3"), 1), "1");
    }

    #[test]
    fn timeout_kills_the_job() {
        let mut job = sh("sleep 30");
        job.timeout = Some(Duration::from_millis(100));
        let out = run_job(&job, &Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(out.exit, ExitKind::TimedOut);
    }

    #[test]
    fn a_timeout_too_long_for_the_clock_is_no_timeout() {
        let mut job = sh("exit 0");
        job.timeout = Some(Duration::MAX);
        let out = run_job(&job, &Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(out.exit, ExitKind::Code(0));
    }

    #[test]
    fn jobs_carry_the_run_id() {
        let mut job = sh("echo $REPRO_RUN_ID");
        job.capture_stdout = true;
        let out = run_job(&job, &Arc::new(AtomicBool::new(false))).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.lines().next(), Some(crate::orphans::run_id()));
    }

    #[test]
    fn cancel_kills_the_job() {
        let cancel = Arc::new(AtomicBool::new(true));
        let out = run_job(&sh("sleep 30"), &cancel).unwrap();
        assert_eq!(out.exit, ExitKind::Cancelled);
    }
}
