//! Jobs the caller talks to: lines to the job's stdin, lines back from its stdout, until the
//! caller ends it. A long-lived `repro exec --worker` is one (docs/ARCHITECTURE.md, "The
//! GPU worker"). The caller times each answer itself and ends the job when one is late, so
//! a conversation has no timeout of its own.
//!
//! Locally the job runs as [`super::local`] runs one: in its own process group, killed with
//! `repro` (`PR_SET_PDEATHSIG`, armed on a keeper thread that lives as long as the job, not
//! on the caller's thread, which may end first), carrying the run id, its stderr appended
//! to the job's log.

use super::local::{die_with_parent, signal_group, visible_gpu, GRACE, TAIL_LINES};
use super::{CancelFlag, ExitKind, Job, JobOutcome};
use anyhow::Context as _;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a wait for a line looks at the cancel flag.
const POLL: Duration = Duration::from_millis(50);

/// What [`Conversation::receive`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// One line of the job's stdout, without its newline.
    Line(String),
    /// The job closed its stdout: it has ended (or is ending).
    Closed,
    /// No line within the time given.
    TimedOut,
    /// The run was interrupted.
    Cancelled,
}

/// How to end a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// Close the job's stdin and give it a short grace to exit by itself (then kill it).
    Finish,
    /// Close the job's stdin and give it this long to exit by itself (then kill it): for a
    /// job with work left once its input ends, such as a profiler writing its report.
    FinishWithin(Duration),
    /// Kill it now; the outcome's exit says why (`TimedOut`, `Cancelled`).
    Kill(ExitKind),
}

/// A job started by [`super::Executor::converse`].
pub trait Conversation: Send {
    /// Write `line` and a newline to the job's stdin.
    fn send(&mut self, line: &str) -> std::io::Result<()>;
    /// The job's next stdout line, waiting at most `timeout` from now (from the job's start
    /// where it first waits in a queue).
    fn receive(&mut self, timeout: Duration) -> Received;
    /// The host the job runs on, once known.
    fn node(&self) -> Option<String>;
    /// End the job (see [`Ending`]) and say how it ended, with the last lines of its stderr.
    fn end(self: Box<Self>, how: Ending) -> anyhow::Result<JobOutcome>;
}

/// A job's stdout, read line by line on a thread of its own.
pub(super) struct Lines(mpsc::Receiver<String>);

impl Lines {
    /// Read `stream` until it ends, handing each line to `seen` (the log) and to the caller.
    pub(super) fn pump(
        stream: impl Read + Send + 'static,
        mut seen: impl FnMut(&[u8]) + Send + 'static,
    ) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                seen(&line);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                if tx.send(text).is_err() {
                    return;
                }
                line.clear();
            }
        });
        Lines(rx)
    }

    /// The next line if one comes within `wait`; `None` if none did.
    pub(super) fn next_within(&self, wait: Duration) -> Option<Received> {
        match self.0.recv_timeout(wait) {
            Ok(line) => Some(Received::Line(line)),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => Some(Received::Closed),
        }
    }

    /// The next line before `deadline`, or why there is none.
    pub(super) fn next_before(&self, deadline: Instant, cancel: &CancelFlag) -> Received {
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Received::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                return Received::TimedOut;
            }
            if let Some(got) = self.next_within((deadline - now).min(POLL)) {
                return got;
            }
        }
    }
}

/// Write `line` and a newline to a job's stdin, unless it was closed.
pub(super) fn send_line(stdin: &mut Option<ChildStdin>, line: &str) -> std::io::Result<()> {
    let stdin = stdin
        .as_mut()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin is closed"))?;
    stdin.write_all(line.as_bytes())?;
    stdin.write_all(b"\n")?;
    stdin.flush()
}

/// The last lines of a stream, kept as they are read.
#[derive(Debug, Default, Clone)]
pub(super) struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    pub(super) fn push(&self, line: &[u8]) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(String::from_utf8_lossy(line).trim_end().to_string());
    }

    pub(super) fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// The job's log, shared by the threads that append to it.
pub(super) type Log = Arc<Mutex<Option<File>>>;

/// `job.log` opened for appending (its folder made), or none.
pub(super) fn open_log(job: &Job) -> anyhow::Result<Log> {
    let file = match &job.log {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log {}", path.display()))?;
            Some(f)
        }
        None => None,
    };
    Ok(Arc::new(Mutex::new(file)))
}

fn append(log: &Log, bytes: &[u8]) {
    if let Some(f) = log.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        // A log that cannot be written loses lines, never the job.
        let _ = f.write_all(bytes);
    }
}

/// A local job in conversation.
struct Local {
    name: String,
    pgid: u32,
    stdin: Option<ChildStdin>,
    lines: Lines,
    tail: Tail,
    /// The keeper thread sends the exit status here when the job ends.
    exited: mpsc::Receiver<std::io::Result<ExitStatus>>,
    /// Set by the stderr reader when stderr ends (the tail is then complete).
    stderr_done: mpsc::Receiver<()>,
    cancel: CancelFlag,
    started: Instant,
}

/// What the keeper thread hands back once the job has started.
type Started = (
    u32,
    ChildStdin,
    std::process::ChildStdout,
    std::process::ChildStderr,
);

/// Start `job` locally for a conversation ([`super::Executor::converse`]'s default).
pub fn start_local(job: &Job, cancel: &CancelFlag) -> anyhow::Result<Box<dyn Conversation>> {
    let (program, args) = job
        .argv
        .split_first()
        .with_context(|| format!("job `{}` has an empty command", job.name))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&job.cwd)
        .envs(&job.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(gpu) = job.gpu {
        cmd.env("CUDA_VISIBLE_DEVICES", visible_gpu(gpu));
    }
    // After the job's own env: a stage cannot take its processes out of the run.
    cmd.env(super::orphans::RUN_ID_ENV, super::orphans::run_id());
    let log = open_log(job)?;
    let (started_tx, started_rx) = mpsc::channel::<std::io::Result<Started>>();
    let (exit_tx, exited) = mpsc::channel();
    // The keeper starts the job and waits for it: PR_SET_PDEATHSIG fires when the thread
    // that started a process ends, and this one lives exactly as long as the job.
    let keeper = std::thread::Builder::new().spawn(move || {
        die_with_parent(&mut cmd);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = started_tx.send(Err(e));
                return;
            }
        };
        let pipes = (
            child.id(),
            child.stdin.take().expect("stdin is piped"),
            child.stdout.take().expect("stdout is piped"),
            child.stderr.take().expect("stderr is piped"),
        );
        let _ = started_tx.send(Ok(pipes));
        let _ = exit_tx.send(child.wait());
    });
    keeper.with_context(|| format!("cannot start a thread for job `{}`", job.name))?;
    let (pgid, stdin, stdout, stderr) = started_rx
        .recv()
        .context("the thread starting the job ended")?
        .with_context(|| format!("cannot start `{program}` (job `{}`)", job.name))?;
    let tail = Tail::default();
    let (stderr_tx, stderr_done) = mpsc::channel();
    {
        let (tail, log) = (tail.clone(), log.clone());
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                append(&log, &line);
                tail.push(&line);
                line.clear();
            }
            let _ = stderr_tx.send(());
        });
    }
    let lines = Lines::pump(stdout, move |line| append(&log, line));
    Ok(Box::new(Local {
        name: job.name.clone(),
        pgid,
        stdin: Some(stdin),
        lines,
        tail,
        exited,
        stderr_done,
        cancel: cancel.clone(),
        started: Instant::now(),
    }))
}

impl Local {
    /// The exit status if the job ends within `wait`.
    fn wait_exit(&self, wait: Duration) -> Option<std::io::Result<ExitStatus>> {
        self.exited.recv_timeout(wait).ok()
    }
}

impl Conversation for Local {
    fn send(&mut self, line: &str) -> std::io::Result<()> {
        send_line(&mut self.stdin, line)
    }

    fn receive(&mut self, timeout: Duration) -> Received {
        self.lines
            .next_before(Instant::now() + timeout, &self.cancel)
    }

    fn node(&self) -> Option<String> {
        Some(super::local::hostname())
    }

    fn end(mut self: Box<Self>, how: Ending) -> anyhow::Result<JobOutcome> {
        drop(self.stdin.take());
        let status = match &how {
            Ending::Finish => self.wait_exit(GRACE),
            Ending::FinishWithin(grace) => self.wait_exit(*grace),
            Ending::Kill(_) => None,
        };
        let status = match status {
            Some(s) => Some(s),
            None => {
                signal_group(self.pgid, libc::SIGTERM);
                self.wait_exit(GRACE).or_else(|| {
                    signal_group(self.pgid, libc::SIGKILL);
                    self.wait_exit(GRACE)
                })
            }
        };
        // Whatever the job left running in its group goes with it.
        signal_group(self.pgid, libc::SIGKILL);
        // The stderr reader ends once the group is gone; its last lines explain a crash.
        let _ = self.stderr_done.recv_timeout(GRACE);
        let exit = match (how, status) {
            (Ending::Kill(why), _) => why,
            (Ending::Finish | Ending::FinishWithin(_), Some(Ok(s))) => match (s.code(), s.signal())
            {
                (Some(code), _) => ExitKind::Code(code),
                (None, Some(sig)) => ExitKind::Signal(sig),
                (None, None) => ExitKind::Code(-1),
            },
            (Ending::Finish | Ending::FinishWithin(_), Some(Err(e))) => {
                anyhow::bail!("cannot wait for job `{}`: {e}", self.name)
            }
            (Ending::Finish | Ending::FinishWithin(_), None) => ExitKind::Signal(libc::SIGKILL),
        };
        Ok(JobOutcome {
            exit,
            stdout: Vec::new(),
            tail: self.tail.text(),
            node: self.node(),
            elapsed: self.started.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Job {
        Job::new(
            "talk",
            vec!["sh".into(), "-c".into(), script.into()],
            std::env::temp_dir(),
        )
    }

    fn start(job: &Job) -> Box<dyn Conversation> {
        start_local(job, &CancelFlag::default()).unwrap()
    }

    #[test]
    fn answers_each_line_and_finishes_when_stdin_closes() {
        let dir = tempfile::tempdir().unwrap();
        let mut job = sh("while read l; do echo \"got $l\"; echo \"note $l\" >&2; done; exit 3");
        job.log = Some(dir.path().join("logs/w.log"));
        let mut c = start(&job);
        for word in ["a", "b"] {
            c.send(word).unwrap();
            assert_eq!(
                c.receive(Duration::from_secs(10)),
                Received::Line(format!("got {word}"))
            );
        }
        let out = c.end(Ending::Finish).unwrap();
        assert_eq!(out.exit, ExitKind::Code(3));
        assert_eq!(out.tail, "note a\nnote b");
        let log = std::fs::read_to_string(dir.path().join("logs/w.log")).unwrap();
        assert!(log.contains("got a\n") && log.contains("note b\n"), "{log}");
    }

    #[test]
    fn a_job_with_work_after_its_input_ends_gets_the_grace_it_is_given() {
        // As ncu does: once the program's stdin ends, it still writes its report.
        let script = "while read l; do :; done; sleep 3; echo written >&2; exit 0";
        let out = start(&sh(script))
            .end(Ending::FinishWithin(Duration::from_secs(20)))
            .unwrap();
        assert_eq!(out.exit, ExitKind::Code(0));
        assert_eq!(out.tail, "written");
        let out = start(&sh(script)).end(Ending::Finish).unwrap();
        assert_ne!(out.exit, ExitKind::Code(0), "the short grace ends it first");
    }

    #[test]
    fn a_late_answer_times_out_and_the_kill_says_why() {
        let mut c = start(&sh("read l; sleep 30"));
        c.send("x").unwrap();
        let began = Instant::now();
        assert_eq!(c.receive(Duration::from_millis(200)), Received::TimedOut);
        let out = c.end(Ending::Kill(ExitKind::TimedOut)).unwrap();
        assert_eq!(out.exit, ExitKind::TimedOut);
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
    }

    #[test]
    fn a_job_that_dies_closes_the_conversation() {
        let mut c = start(&sh("echo dying >&2; kill -SEGV $$"));
        assert_eq!(c.receive(Duration::from_secs(10)), Received::Closed);
        let out = c.end(Ending::Finish).unwrap();
        assert_eq!(out.exit, ExitKind::Signal(libc::SIGSEGV));
        assert_eq!(out.tail, "dying");
    }

    #[test]
    fn cancel_ends_the_wait() {
        let cancel = CancelFlag::default();
        let mut c = start_local(&sh("sleep 30"), &cancel).unwrap();
        cancel.store(true, Ordering::SeqCst);
        assert_eq!(c.receive(Duration::from_secs(30)), Received::Cancelled);
        let out = c.end(Ending::Kill(ExitKind::Cancelled)).unwrap();
        assert_eq!(out.exit, ExitKind::Cancelled);
    }

    #[test]
    fn the_job_outlives_the_thread_that_started_it() {
        // Workers are started on a pool thread that may end before the worker does.
        let job = sh("while read l; do echo \"$l\"; done");
        let mut c = std::thread::spawn(move || start(&job)).join().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        c.send("still here").unwrap();
        assert_eq!(
            c.receive(Duration::from_secs(10)),
            Received::Line("still here".into())
        );
        assert_eq!(c.end(Ending::Finish).unwrap().exit, ExitKind::Code(0));
    }

    #[test]
    fn jobs_carry_the_run_id_and_their_gpu() {
        let mut job = sh("echo \"$REPRO_RUN_ID $CUDA_VISIBLE_DEVICES\"");
        job.gpu = Some(2);
        let mut c = start(&job);
        let want = format!("{} {}", super::super::orphans::run_id(), visible_gpu(2));
        assert_eq!(c.receive(Duration::from_secs(10)), Received::Line(want));
        c.end(Ending::Finish).unwrap();
    }
}
