//! Processes a killed `repro` left behind. Every process a run starts carries the run's id
//! in `REPRO_RUN_ID` (children inherit it), and the project lock records the id of the run
//! holding it. A run killed with SIGKILL cannot clean up: its stage's process group leader
//! dies with it (`PR_SET_PDEATHSIG`, see [`super::local`]), but what that leader started
//! lives on. The next run takes over the lock, finds those processes by the dead run's id
//! ([`kill_run`]) and kills them before it touches any output, so nothing from the old run
//! writes into the new one's outputs.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that carries the run id to every process of a run.
pub const RUN_ID_ENV: &str = "REPRO_RUN_ID";

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

/// The processes (not zombies) whose environment says they belong to run `id`, except
/// this process and its ancestors.
fn members(id: &str) -> Vec<u32> {
    let needle = format!("{RUN_ID_ENV}={id}");
    let spared = ancestors();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !spared.contains(pid))
        .filter(|pid| {
            // A zombie's (or another user's) environment reads as empty or fails.
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
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
            // SAFETY: kill only sends a signal; a process that is already gone gives ESRCH.
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
