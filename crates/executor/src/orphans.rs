//! Processes a killed `repro` left behind. Every process a run starts carries the run's id
//! in `REPRO_RUN_ID` (children inherit it), and the project lock records the id of the run
//! holding it. A run killed with SIGKILL cannot clean up: its stage's process group leader
//! dies with it (`PR_SET_PDEATHSIG`, see [`super::local`]), but what that leader started
//! lives on. The next run takes over the lock, finds those processes by the dead run's id
//! ([`kill_run`]) and kills them before it touches any output, so nothing from the old run
//! writes into the new one's outputs.
//!
//! Within a run, each job's processes also carry the job's own tag (`REPRO_JOB`), and
//! `repro` is a child subreaper: a process that leaves the job's process group (`setsid`,
//! a daemon's double fork) is re-parented to `repro` when its parent dies, so when the job
//! ends, [`seal_job`] finds it among `repro`'s own children and kills it before the job's
//! outputs are recorded.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that carries the run id to every process of a run.
pub const RUN_ID_ENV: &str = "REPRO_RUN_ID";
/// The environment variable that carries one job's tag to its processes.
pub const JOB_ENV: &str = "REPRO_JOB";

/// How long [`kill_run`] waits for killed processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(10);

static RUN_ID: OnceLock<String> = OnceLock::new();

fn fresh_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}", std::process::id())
}

/// The id of a run this process starts (it takes the project lock): always a new one,
/// even inside a stage of another run.
pub fn begin_run() -> &'static str {
    RUN_ID.get_or_init(fresh_id)
}

/// The id of the run this process belongs to: the one it began, else the one inherited
/// (`repro exec` children of a stage), else a new one.
pub fn run_id() -> &'static str {
    RUN_ID.get_or_init(|| {
        std::env::var(RUN_ID_ENV)
            .ok()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(fresh_id)
    })
}

/// What `/proc` says of one process's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tagged {
    Yes,
    No,
    /// Empty though the process lives: it is inside `execve`, between dropping its old
    /// memory and writing the new environment (the kernel reads it as empty until then).
    /// Look again.
    Unsure,
}

/// The kernel's flag for its own threads (`PF_KTHREAD`), whose environment is always empty.
const PF_KTHREAD: u64 = 0x0020_0000;

/// A process's state letter, process group and flags, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp session tty tpgid flags ...`; comm may hold anything.
    let mut rest = text.rsplit_once(") ")?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let pgrp = rest.nth(1)?.parse().ok()?;
    let flags = rest.nth(3)?.parse().ok()?;
    Some((state, pgrp, flags))
}

/// Whether process `pid`'s environment holds `needle` (`NAME=value`).
fn tagged(pid: u32, needle: &[u8]) -> Tagged {
    // Another user's process fails: it is not ours to kill.
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return Tagged::No;
    };
    if env.split(|&b| b == 0).any(|v| v == needle) {
        return Tagged::Yes;
    }
    if !env.is_empty() {
        return Tagged::No;
    }
    match stat(pid) {
        Some((state, _, flags)) if state != 'Z' && state != 'X' && flags & PF_KTHREAD == 0 => {
            Tagged::Unsure
        }
        _ => Tagged::No, // a zombie, a kernel thread, or gone
    }
}

/// How long a process whose environment reads as empty is looked at again before it is
/// taken for one started with an empty environment (`env -i`): far longer than an
/// `execve` takes, even on a loaded machine.
const UNSURE_WAIT: Duration = Duration::from_millis(500);

/// The processes (not zombies) whose environment says they belong to run `id`, except
/// this process and its ancestors. A process caught inside `execve` is read again until it
/// can be told (see [`Tagged::Unsure`]).
fn members(id: &str) -> Vec<u32> {
    let needle = format!("{RUN_ID_ENV}={id}");
    let spared = ancestors();
    let started = Instant::now();
    loop {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let mut unsure = false;
        for pid in procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| !spared.contains(pid))
        {
            match tagged(pid, needle.as_bytes()) {
                Tagged::Yes => found.push(pid),
                Tagged::No => {}
                Tagged::Unsure => unsure = true,
            }
        }
        if !unsure || !found.is_empty() || started.elapsed() > UNSURE_WAIT {
            return found;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// This process and every process above it.
fn ancestors() -> Vec<u32> {
    let mut out = vec![std::process::id()];
    while let Some(&pid) = out.last() {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
                let after = s.rsplit_once(") ")?.1;
                after.split_whitespace().nth(1)?.parse::<u32>().ok()
            });
        match parent {
            Some(p) if p > 1 && !out.contains(&p) => out.push(p),
            _ => break,
        }
    }
    out
}

/// Kill every process left running by run `id` and wait until they are gone. Returns
/// their pids. Fails if some are still there after a while (stuck in the kernel), so the
/// caller does not touch outputs they might still write.
pub fn kill_run(id: &str) -> anyhow::Result<Vec<u32>> {
    let started = Instant::now();
    let mut killed: Vec<u32> = Vec::new();
    loop {
        let left = members(id);
        if left.is_empty() {
            killed.sort_unstable();
            return Ok(killed);
        }
        if started.elapsed() > KILL_WAIT {
            anyhow::bail!(
                "processes {left:?} of a killed repro run ({RUN_ID_ENV}={id}) survive SIGKILL\n  help: they may be stuck in the kernel (state D in `ps`); wait for them to end, then run again"
            );
        }
        for &pid in &left {
            // SAFETY: kill takes integers only and touches no memory; the pids are read
            // from /proc, so positive (never 0 or -1, which would signal groups); a process
            // that is already gone gives ESRCH.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Make this process the reaper of the orphans its descendants leave (`PR_SET_CHILD_SUBREAPER`),
/// so a process that escapes a job stays findable among its children. Done once.
pub fn become_subreaper() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: PR_SET_CHILD_SUBREAPER takes integer arguments only (no pointers) and
        // changes only this process's attributes.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// A tag no other job of any run carries: the run id and a counter.
pub fn job_tag() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}/{n}", run_id())
}

/// This process's children, from every one of its threads.
fn children() -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// After a job's first process has ended (and been reaped), kill everything the job left:
/// the rest of its process group `pgid`, and the processes that left the group but carry
/// its `tag` (re-parented to this subreaper, see [`become_subreaper`]); reap those that are
/// this process's children; and return only when none is left, so nothing of the job writes
/// into its outputs once they are sealed. A process that leaves the group *and* drops the
/// tag from its environment is not found.
pub fn seal_job(pgid: u32, tag: &str) -> anyhow::Result<()> {
    if pgid == 0 {
        return Ok(());
    }
    let needle = format!("{JOB_ENV}={tag}");
    let started = Instant::now();
    loop {
        // SAFETY: killpg takes integers only and touches no memory; `pgid` is not 0
        // (checked above); an empty group gives ESRCH.
        let group_left = unsafe { libc::killpg(pgid as libc::pid_t, libc::SIGKILL) } == 0;
        let mut left = Vec::new();
        let mut unsure = false;
        for pid in children() {
            let Some((state, pgrp, _)) = stat(pid) else {
                continue;
            };
            let zombie = state == 'Z' || state == 'X';
            let ours = if pgrp == pgid {
                true
            } else if zombie {
                false
            } else {
                match tagged(pid, needle.as_bytes()) {
                    Tagged::Yes => true,
                    Tagged::No => false,
                    // Maybe another job's first process, inside its execve: look again.
                    Tagged::Unsure => {
                        unsure = true;
                        false
                    }
                }
            };
            if !ours {
                continue;
            }
            left.push(pid);
            // SAFETY: a signal to, or a non-blocking wait for, a child of this process
            // that belongs to the job (its group, or its tag): no one else waits for it.
            // waitpid accepts a null status pointer; kill takes integers only.
            unsafe {
                if zombie {
                    libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG);
                } else {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
        }
        if !group_left && left.is_empty() && !unsure {
            return Ok(());
        }
        if started.elapsed() > KILL_WAIT {
            anyhow::bail!(
                "processes {left:?} started by the job survive SIGKILL (process group {pgid})\n  help: they may be stuck in the kernel (state D in `ps`); wait for them to end, then run again"
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_processes_of_the_run_and_spares_others() {
        let id = format!("test-{}", fresh_id());
        let spawn = |run: &str| {
            std::process::Command::new("sleep")
                .arg("30")
                .env(RUN_ID_ENV, run)
                .spawn()
                .unwrap()
        };
        let mut mine = spawn(&id);
        let mut other = spawn("some-other-run");
        let killed = kill_run(&id).unwrap();
        assert_eq!(killed, [mine.id()]);
        assert!(mine.wait().unwrap().code().is_none(), "killed by a signal");
        assert_eq!(
            other.try_wait().unwrap(),
            None,
            "another run's process lives"
        );
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(kill_run(&id).unwrap().is_empty());
    }
}
