//! When the stage's ncu processes run. ncu profiles one kernel at a time, whichever process
//! launched it, but a baseline script spends its first seconds starting Python and
//! importing torch, before it touches the GPU. So one baseline script (the one with the
//! most calls) starts first, with `REPRO_PROFILE_GATE` naming a file. A script that writes
//! `<file>.honoured` at once promises to wait for `<file>` before CUDA starts: the kernel
//! targets are then profiled while it imports, and the stage writes `<file>` when they are
//! done. One that does not runs alone, to its end, before them: nothing of a script runs on
//! the GPU while the kernels are profiled. Other scripts run after, one at a time.

use super::kernels::{self, Profiled};
use super::ncu_call::NcuCall;
use super::run::{self, Reading};
use super::targets::Target;
use repro_pipeline::kind::RunCtx;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The targets one ncu process profiles, by index: every kernel target to profile, or the
/// calls of one baseline command.
pub(super) struct Unit {
    pub members: Vec<usize>,
    pub script: bool,
}

/// How a unit's process went: its records (or why none), how long it took, and how much
/// of that it waited at the gate.
pub(super) struct Ran {
    pub profiled: anyhow::Result<Profiled>,
    pub took: Duration,
    pub waited: Duration,
}

/// Profile `units`, answering in their order.
pub(super) fn profile_units(
    ctx: &RunCtx,
    call: &NcuCall,
    targets: &[Target],
    units: &[Unit],
    reading: &Reading,
) -> Vec<Ran> {
    let members = |u: &Unit| -> Vec<&Target> { u.members.iter().map(|&i| &targets[i]).collect() };
    // The script with the most calls: a script that cannot run skips them at once.
    let held = (0..units.len())
        .filter(|&i| units[i].script)
        .max_by_key(|&i| (units[i].members.len(), std::cmp::Reverse(i)));
    let kernel_targets = units
        .iter()
        .filter(|u| !u.script)
        .map(|u| u.members.len())
        .sum::<usize>();
    let gate = Gate::new(ctx.root, std::process::id());
    let mut ran: Vec<Option<Ran>> = units.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        // Built here: the thread holds only the job, the executor and the cancel flag.
        let beside = held.map(|h| {
            // Each kernel target may take the stage's time limit; the wait is bounded so.
            let wait = call.opts.timeout * (kernel_targets as u32 + 1);
            let job = run::script_job(ctx, call, &members(&units[h]), Some((gate.path(), wait)));
            let (executor, cancel) = (ctx.executor, ctx.cancel);
            let thread = s.spawn(move || executor.run(&job, cancel));
            // A script that does not say it waits at the gate runs alone, to its end.
            while !gate.honoured() && !thread.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
            }
            (h, Instant::now(), thread)
        });
        {
            // Opened however the kernel targets end, so the script never waits for good.
            let _open = gate.opener();
            for (i, u) in units.iter().enumerate().filter(|(_, u)| !u.script) {
                let began = Instant::now();
                let profiled = Ok(kernels::profile_kernels(ctx, call, &members(u), reading));
                ran[i] = Some(Ran {
                    profiled,
                    took: began.elapsed(),
                    waited: Duration::ZERO,
                });
            }
        }
        let opened = Instant::now();
        if let Some((h, began, thread)) = beside {
            let outcome = thread
                .join()
                .expect("the baseline script's thread panicked");
            ran[h] = Some(Ran {
                profiled: outcome
                    .and_then(|o| run::read_script_outcome(&members(&units[h]), &o, reading)),
                took: began.elapsed(),
                waited: opened.duration_since(began),
            });
        }
    });
    for (i, u) in units.iter().enumerate() {
        if ran[i].is_none() {
            let began = Instant::now();
            let profiled = run::profile_scripts(ctx, call, &members(u), reading);
            ran[i] = Some(Ran {
                profiled,
                took: began.elapsed(),
                waited: Duration::ZERO,
            });
        }
    }
    ran.into_iter()
        .map(|r| r.expect("every unit ran"))
        .collect()
}

/// A file whose existence lets a waiting baseline script go on; removed when dropped.
struct Gate {
    path: PathBuf,
}

impl Gate {
    fn new(root: &Path, id: u32) -> Gate {
        let path = root.join(format!(".repro/ncu/gate-{id}"));
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let gate = Gate { path };
        let _ = std::fs::remove_file(&gate.path);
        let _ = std::fs::remove_file(gate.honour_file());
        gate
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the script has said, first thing, that it waits at the gate before CUDA
    /// starts: it writes the gate's file name with `.honoured` appended.
    fn honoured(&self) -> bool {
        self.honour_file().exists()
    }

    fn honour_file(&self) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(".honoured");
        PathBuf::from(name)
    }

    /// Opens the gate when dropped.
    fn opener(&self) -> Opener<'_> {
        Opener(self)
    }

    fn open(&self) {
        // Should this fail, the script waits until its time limit and its job says so.
        let _ = std::fs::write(&self.path, b"");
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(self.honour_file());
    }
}

struct Opener<'a>(&'a Gate);

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opens_when_its_opener_goes_and_is_gone_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::new(dir.path(), 7);
        let path = gate.path().to_path_buf();
        assert!(path.starts_with(dir.path().join(".repro/ncu")));
        {
            let _open = gate.opener();
            assert!(!path.exists(), "closed while the kernels are profiled");
        }
        assert!(path.exists(), "open once they are done");
        assert!(!gate.honoured());
        std::fs::write(dir.path().join(".repro/ncu/gate-7.honoured"), "").unwrap();
        assert!(gate.honoured(), "the script's promise, by the gate's name");
        drop(gate);
        assert!(!path.exists(), "removed with the gate");
        assert!(!dir.path().join(".repro/ncu/gate-7.honoured").exists());
    }

    #[test]
    fn a_panic_still_opens_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::new(dir.path(), 8);
        let path = gate.path().to_path_buf();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _open = gate.opener();
            panic!("a kernel target's profiling broke");
        }));
        assert!(result.is_err());
        assert!(path.exists(), "a waiting script goes on");
    }
}
