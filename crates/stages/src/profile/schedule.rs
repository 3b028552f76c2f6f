//! When the stage's ncu processes run. ncu profiles one kernel at a time, whichever process
//! launched it, but a baseline script spends its first seconds starting Python and
//! importing torch, before it touches the GPU. The stage profiles in passes (the kernel
//! time's, then the full profile: [`super::own_time`]), each a process per unit. One
//! baseline script (the one with the most calls) starts at once for every pass, each process
//! with `REPRO_PROFILE_GATE` naming a file of its own. A script that writes `<file>.honoured`
//! at once promises to wait for `<file>` before CUDA starts: the kernel targets of every pass
//! are then profiled while those import, and the stage opens their gates one after the
//! other when they are done, each once the one before has ended. One that does not runs
//! alone, to its end, before the kernel targets: nothing of a script runs on the GPU while
//! they are profiled. Other scripts run after, one at a time.

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

/// One pass over the units: what ncu collects, and how its output is read.
pub(super) struct Pass<'a> {
    pub call: &'a NcuCall<'a>,
    pub reading: &'a Reading<'a>,
}

/// How a unit's process went: its records (or why none), how long it took, and how much
/// of that it waited at the gate.
pub(super) struct Ran {
    pub profiled: anyhow::Result<Profiled>,
    pub took: Duration,
    pub waited: Duration,
}

/// Profile `units` in each of `passes`, answering per pass, in the units' order.
pub(super) fn profile_units(
    ctx: &RunCtx,
    passes: &[Pass],
    targets: &[Target],
    units: &[Unit],
) -> Vec<Vec<Ran>> {
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
    let gates: Vec<Gate> = (0..passes.len())
        .map(|p| Gate::new(ctx.root, std::process::id(), p))
        .collect();
    let mut ran: Vec<Vec<Option<Ran>>> = passes
        .iter()
        .map(|_| units.iter().map(|_| None).collect())
        .collect();
    std::thread::scope(|s| {
        // Built here: each thread holds only its job, the executor and the cancel flag.
        let beside: Vec<_> = held
            .map(|h| {
                passes
                    .iter()
                    .zip(&gates)
                    .map(|(pass, gate)| {
                        // Each kernel target, and each script before it, may take the
                        // stage's time limit; the wait is bounded so.
                        let runs = passes.len() as u32 * (kernel_targets as u32 + 1);
                        let wait = pass.call.opts.timeout * runs;
                        let unit = members(&units[h]);
                        let job = run::script_job(ctx, pass.call, &unit, Some((gate.path(), wait)));
                        let (executor, cancel) = (ctx.executor, ctx.cancel);
                        let thread = s.spawn(move || executor.run(&job, cancel));
                        // A script that does not say it waits at the gate runs alone, to
                        // its end.
                        while !gate.honoured() && !thread.is_finished() {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        (Instant::now(), thread)
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Opened however the kernel targets end, so no script waits for good.
        let openers: Vec<Opener> = gates.iter().map(Gate::opener).collect();
        for (p, pass) in passes.iter().enumerate() {
            for (i, u) in units.iter().enumerate().filter(|(_, u)| !u.script) {
                let began = Instant::now();
                let profiled = kernels::profile_kernels(ctx, pass.call, &members(u), pass.reading);
                ran[p][i] = Some(Ran {
                    profiled: Ok(profiled),
                    took: began.elapsed(),
                    waited: Duration::ZERO,
                });
            }
        }
        // The waiting scripts in pass order, one at a time on the GPU.
        for ((p, (began, thread)), opener) in beside.into_iter().enumerate().zip(openers) {
            let h = held.expect("a held script");
            drop(opener);
            let opened = Instant::now();
            let outcome = thread
                .join()
                .expect("the baseline script's thread panicked");
            ran[p][h] = Some(Ran {
                profiled: outcome.and_then(|o| {
                    run::read_script_outcome(&members(&units[h]), &o, passes[p].reading)
                }),
                took: began.elapsed(),
                waited: opened.duration_since(began),
            });
        }
    });
    for (p, pass) in passes.iter().enumerate() {
        for (i, u) in units.iter().enumerate() {
            if ran[p][i].is_none() {
                let began = Instant::now();
                let profiled = run::profile_scripts(ctx, pass.call, &members(u), pass.reading);
                ran[p][i] = Some(Ran {
                    profiled,
                    took: began.elapsed(),
                    waited: Duration::ZERO,
                });
            }
        }
    }
    ran.into_iter()
        .map(|pass| {
            pass.into_iter()
                .map(|r| r.expect("every unit ran"))
                .collect()
        })
        .collect()
}

/// A file whose existence lets a waiting baseline script go on; removed when dropped.
struct Gate {
    path: PathBuf,
}

impl Gate {
    fn new(root: &Path, id: u32, pass: usize) -> Gate {
        let path = root.join(format!(".repro/ncu/gate-{id}-{pass}"));
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
        let gate = Gate::new(dir.path(), 7, 0);
        let path = gate.path().to_path_buf();
        assert!(path.starts_with(dir.path().join(".repro/ncu")));
        {
            let _open = gate.opener();
            assert!(!path.exists(), "closed while the kernels are profiled");
        }
        assert!(path.exists(), "open once they are done");
        assert!(!gate.honoured());
        std::fs::write(dir.path().join(".repro/ncu/gate-7-0.honoured"), "").unwrap();
        assert!(gate.honoured(), "the script's promise, by the gate's name");
        drop(gate);
        assert!(!path.exists(), "removed with the gate");
        assert!(!dir.path().join(".repro/ncu/gate-7-0.honoured").exists());
    }

    #[test]
    fn a_panic_still_opens_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::new(dir.path(), 8, 1);
        let path = gate.path().to_path_buf();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _open = gate.opener();
            panic!("a kernel target's profiling broke");
        }));
        assert!(result.is_err());
        assert!(path.exists(), "a waiting script goes on");
    }
}
