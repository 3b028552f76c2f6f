//! When the stage's ncu processes run. ncu profiles one kernel at a time, whichever process
//! launched it, but a baseline script spends its first seconds starting Python, importing
//! torch and reading its inputs before it touches the GPU: on an H200 longer than the pass
//! that times the kernel targets alone. So each pass's script with the most calls starts
//! with the stage, with `REPRO_PROFILE_GATE` naming a file of its own. A script that writes
//! `<file>.honoured` at once promises to wait for `<file>` before it copies to or launches
//! on the GPU (it may create its CUDA context before): the kernel targets are profiled, pass
//! after pass, while the scripts import, then the stage writes each script's `<file>` in
//! turn, once the one before has ended. One that does not say so runs alone, to its end,
//! before anything else starts: nothing of a script runs on the GPU while another process
//! profiles. Other scripts run after, one at a time.
//!
//! Every kernel pass's ncu process starts with the stage too ([`kernels::Process`]): its
//! worker opens its CUDA context and waits, launching nothing, until its pass's turn.

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

/// One pass: its ncu call (the metric list), its units, how its output is read.
pub(super) struct Pass<'a> {
    pub call: &'a NcuCall<'a>,
    pub units: &'a [Unit],
    pub reading: &'a Reading<'a>,
}

/// How a unit's process went: its records (or why none), how long it took once its turn
/// came, and how long it waited for that turn after it started.
pub(super) struct Ran {
    pub profiled: anyhow::Result<Profiled>,
    pub took: Duration,
    pub waited: Duration,
}

/// A script started ahead of its turn, waiting at its gate (or, if it did not say it would,
/// already run to its end).
struct Waiting<'scope> {
    unit: usize,
    gate: &'scope Gate,
    began: Instant,
    /// How long it ran alone, when it did not wait at the gate.
    alone: Option<Duration>,
    thread: std::thread::ScopedJoinHandle<'scope, anyhow::Result<repro_executor::JobOutcome>>,
}

/// Profile every pass's units; for each pass, its units' runs in their order. A unit is
/// `None` when it did not run: once ncu says it may not read the counters, no further
/// kernel targets are profiled, and the waiting scripts, let through in turn so that none
/// waits for good, have their runs ignored.
pub(super) fn profile_passes(
    ctx: &RunCtx,
    targets: &[Target],
    passes: &[Pass],
) -> Vec<Vec<Option<Ran>>> {
    let members = |u: &Unit| -> Vec<&Target> { u.members.iter().map(|&i| &targets[i]).collect() };
    let mut ran: Vec<Vec<Option<Ran>>> = passes
        .iter()
        .map(|p| p.units.iter().map(|_| None).collect())
        .collect();
    // Each waiting script may wait for every kernel target, each of which may take the
    // stage's time limit, and for the scripts before it.
    let kernel_targets: usize = passes
        .iter()
        .flat_map(|p| p.units.iter().filter(|u| !u.script))
        .map(|u| u.members.len())
        .sum();
    // Each pass's held script and its gate, made here: a gate outlives the scope, so its
    // file stays until every script has ended.
    let gates: Vec<Option<(usize, Gate)>> = passes
        .iter()
        .enumerate()
        .map(|(p, pass)| {
            let gate = || Gate::new(ctx.root, &format!("{}-{p}", std::process::id()));
            held_script(pass.units).map(|h| (h, gate()))
        })
        .collect();
    // Each kernel unit's process, started now; its CSV is its own.
    let mut ahead: Vec<Vec<Option<kernels::Process>>> = passes
        .iter()
        .enumerate()
        .map(|(p, pass)| {
            let units = pass.units.iter().enumerate();
            units
                .map(|(i, u)| {
                    let csv = ctx.root.join(format!(".repro/ncu/kernels-{p}-{i}.csv"));
                    (!u.script).then(|| kernels::Process::start(ctx, pass.call, csv))
                })
                .collect()
        })
        .collect();
    std::thread::scope(|s| {
        let mut waiting: Vec<Option<Waiting>> = Vec::new();
        for (pass, held) in passes.iter().zip(&gates) {
            let Some((h, gate)) = held else {
                waiting.push(None);
                continue;
            };
            let h = *h;
            let wait = pass.call.opts.timeout * (kernel_targets + passes.len() + 1) as u32;
            let job = run::script_job(
                ctx,
                pass.call,
                &members(&pass.units[h]),
                Some((gate.path(), wait)),
            );
            let (executor, cancel) = (ctx.executor, ctx.cancel);
            let began = Instant::now();
            let thread = s.spawn(move || executor.run(&job, cancel));
            // A script that does not say it waits at the gate runs alone, to its end.
            while !gate.honoured() && !thread.is_finished() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let alone = (!gate.honoured()).then(|| began.elapsed());
            waiting.push(Some(Waiting {
                unit: h,
                gate,
                began,
                alone,
                thread,
            }));
        }
        // However the kernel targets end (a panic included), no script waits for good.
        let _open = Opener(gates.iter().flatten().map(|(_, g)| g).collect());
        let mut denied = false;
        'kernels: for (p, pass) in passes.iter().enumerate() {
            for (i, u) in pass.units.iter().enumerate().filter(|(_, u)| !u.script) {
                let began = Instant::now();
                let process = ahead[p][i].take().expect("each kernel unit's process");
                let waited = began.saturating_duration_since(process.began());
                let profiled =
                    kernels::profile_kernels(ctx, pass.call, &members(u), pass.reading, process);
                denied = profiled.is_err();
                ran[p][i] = Some(Ran {
                    profiled: Ok(profiled),
                    took: began.elapsed(),
                    waited,
                });
                if denied {
                    break 'kernels;
                }
            }
        }
        // Those whose turn never came (ncu was denied the counters) end before the scripts go.
        drop(std::mem::take(&mut ahead));
        for (p, w) in waiting.into_iter().enumerate() {
            let Some(w) = w else { continue };
            let opened = Instant::now();
            w.gate.open();
            let outcome = w
                .thread
                .join()
                .expect("the baseline script's thread panicked");
            if !denied {
                let unit = &passes[p].units[w.unit];
                let (took, waited) = match w.alone {
                    Some(alone) => (alone, Duration::ZERO),
                    None => (opened.elapsed(), opened.duration_since(w.began)),
                };
                ran[p][w.unit] = Some(Ran {
                    profiled: outcome.and_then(|o| {
                        run::read_script_outcome(&members(unit), &o, passes[p].reading)
                    }),
                    took,
                    waited,
                });
            }
        }
    });
    if ran
        .iter()
        .flatten()
        .flatten()
        .any(|r| matches!(r.profiled, Ok(Err(_))))
    {
        return ran;
    }
    for (p, pass) in passes.iter().enumerate() {
        for (i, u) in pass.units.iter().enumerate() {
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
    ran
}

/// Opens its gates when dropped.
struct Opener<'a>(Vec<&'a Gate>);

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.0.iter().for_each(|gate| gate.open());
    }
}

/// The script unit with the most calls: a script that cannot run skips them at once.
fn held_script(units: &[Unit]) -> Option<usize> {
    (0..units.len())
        .filter(|&i| units[i].script)
        .max_by_key(|&i| (units[i].members.len(), std::cmp::Reverse(i)))
}

/// A file whose existence lets a waiting baseline script go on; removed when dropped.
struct Gate {
    path: PathBuf,
}

impl Gate {
    fn new(root: &Path, id: &str) -> Gate {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opens_when_told_and_is_gone_with_its_promise_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::new(dir.path(), "7-1");
        let path = gate.path().to_path_buf();
        assert!(path.starts_with(dir.path().join(".repro/ncu")));
        assert!(!path.exists(), "closed until the script's turn");
        assert!(!gate.honoured());
        std::fs::write(dir.path().join(".repro/ncu/gate-7-1.honoured"), "").unwrap();
        assert!(gate.honoured(), "the script's promise, by the gate's name");
        gate.open();
        assert!(path.exists(), "open once its turn comes");
        drop(gate);
        assert!(!path.exists(), "removed with the gate");
        assert!(!dir.path().join(".repro/ncu/gate-7-1.honoured").exists());
    }

    #[test]
    fn a_panic_still_opens_every_gate() {
        let dir = tempfile::tempdir().unwrap();
        let gates = [Gate::new(dir.path(), "8-0"), Gate::new(dir.path(), "8-1")];
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _open = Opener(gates.iter().collect());
            panic!("a kernel target's profiling broke");
        }));
        assert!(result.is_err());
        assert!(
            gates.iter().all(|g| g.path().exists()),
            "every waiting script goes on"
        );
    }

    #[test]
    fn the_script_with_the_most_calls_waits_at_the_gate() {
        let unit = |n: usize, script: bool| Unit {
            members: (0..n).collect(),
            script,
        };
        assert_eq!(
            held_script(&[unit(9, false), unit(2, true), unit(3, true)]),
            Some(2)
        );
        assert_eq!(held_script(&[unit(3, true), unit(3, true)]), Some(0));
        assert_eq!(held_script(&[unit(9, false)]), None);
    }
}
