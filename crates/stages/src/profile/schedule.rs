//! When the stage's ncu processes run. ncu profiles one launch at a time, but each process
//! spends its first second or more before its first launch: ncu's own start-up, CUDA's under
//! ncu, and for a baseline script starting Python and importing torch (on an H200, 0.7 to 1.1
//! s of CUDA start-up under ncu, 3 s of import; `benches/results/ncu_prestart_h200.md`). So
//! the processes of all three passes take turns on the GPU, in order (each pass's kernel
//! targets, then its baseline scripts, the one with the most calls first), and each starts
//! ahead of its turn and waits at a gate, having touched nothing on the GPU:
//!
//! * a kernel unit's worker opens its CUDA session and waits for its first request
//!   ([`kernels::Process::started`]); it starts during the turn of the script before it;
//! * a baseline script gets `REPRO_PROFILE_GATE`, a file name. A script that writes
//!   `<file>.honoured` at once promises to start CUDA (nothing more) and then wait for
//!   `<file>` before it runs anything on the GPU; the stage writes `<file>` at its turn. The
//!   first script of a command starts just before the turn of the kernel unit ahead of it,
//!   which waits until the script has promised or ended (one that does not promise runs alone,
//!   to its end); once a command has promised, its later scripts start up to [`AHEAD`] turns
//!   early.
//!
//! Concurrent start-ups leave the measured kernel times as they are alone (the same results
//! file: a process starting CUDA and the profiler beside each pass).

use super::kernels::{self, Process, Profiled};
use super::ncu_call::NcuCall;
use super::run::{self, Reading};
use super::targets::Target;
use crate::gpu_nodes::stage_jobs;
use repro_pipeline::kind::RunCtx;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How many turns ahead a script whose command has promised to wait may start.
const AHEAD: usize = 2;

/// The targets one ncu process profiles, by index: every kernel target to profile, or the
/// calls of one baseline command.
pub(super) struct Unit {
    pub members: Vec<usize>,
    pub script: bool,
}

/// One pass: its ncu command line and what it reads, its units, and the name its kernel
/// units' CSV goes under (`.repro/ncu/kernels.<tag>.csv`).
pub(super) struct Pass<'p> {
    pub tag: &'static str,
    pub call: &'p NcuCall<'p>,
    pub units: &'p [Unit],
    pub reading: &'p Reading<'p>,
}

/// How a unit's process went: its records (or why none), how long its turn took, and how
/// long it had been starting before its turn.
pub(super) struct Ran {
    pub profiled: anyhow::Result<Profiled>,
    pub took: Duration,
    pub ahead: Duration,
}

/// One unit's place in the GPU's order.
struct Turn<'p> {
    pass: usize,
    unit: usize,
    pass_of: &'p Pass<'p>,
}

impl Turn<'_> {
    fn unit(&self) -> &Unit {
        &self.pass_of.units[self.unit]
    }
}

/// Profile every pass's units, answering per pass in their order.
pub(super) fn profile_passes(ctx: &RunCtx, targets: &[Target], passes: &[Pass]) -> Vec<Vec<Ran>> {
    let turns = turns(passes);
    let members =
        |t: &Turn| -> Vec<&Target> { t.unit().members.iter().map(|&i| &targets[i]).collect() };
    // A gate waits at most until every turn before it has taken its whole time limit.
    let limit = passes[0].call.opts.timeout;
    let wait = limit * (turns.iter().map(|t| t.unit().members.len()).sum::<usize>() as u32 + 1);
    let gates: Vec<Option<Gate>> = turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            t.unit()
                .script
                .then(|| Gate::new(ctx.root, std::process::id(), i))
        })
        .collect();
    let mut ran: Vec<Vec<Option<Ran>>> = passes
        .iter()
        .map(|p| p.units.iter().map(|_| None).collect())
        .collect();
    std::thread::scope(|s| {
        // Opened however the turns end, so no script waits for good.
        let _open = Opener(&gates);
        let mut scripts = Vec::new();
        scripts.resize_with(turns.len(), || None);
        // Each kernel unit's process, started ahead in a thread of its own, and when.
        let mut prestarted = Vec::new();
        prestarted.resize_with(turns.len(), || None);
        // The commands whose scripts promised to wait at their gates.
        let mut promising: BTreeSet<Vec<String>> = BTreeSet::new();
        let command = |t: &Turn| run::script_job(ctx, t.pass_of.call, &members(t), None).argv;
        let spawn = |i: usize, scripts: &mut Vec<Option<_>>| {
            let t = &turns[i];
            let gate = gates[i].as_ref().expect("a script's gate");
            let job = run::script_job(ctx, t.pass_of.call, &members(t), Some((gate.path(), wait)));
            let (executor, cancel) = (ctx.executor, ctx.cancel);
            scripts[i] = Some((Instant::now(), s.spawn(move || executor.run(&job, cancel))));
        };
        for (i, t) in turns.iter().enumerate() {
            // Later scripts of commands that promised start now, to prepare meanwhile.
            for j in (i + 1..turns.len()).take(AHEAD) {
                if turns[j].unit().script
                    && scripts[j].is_none()
                    && promising.contains(&command(&turns[j]))
                {
                    spawn(j, &mut scripts);
                }
            }
            // So does the next kernel unit's ncu and worker (this turn's, if it has none yet).
            if let Some(k) = (i..turns.len()).find(|&k| !turns[k].unit().script) {
                if prestarted[k].is_none() {
                    let (jobs, call) = (stage_jobs(ctx), turns[k].pass_of.call);
                    let csv = kernel_csv(ctx.root, turns[k].pass_of.tag);
                    prestarted[k] = Some((
                        Instant::now(),
                        s.spawn(move || Process::started(jobs, call, csv)),
                    ));
                }
            }
            let turn_began = Instant::now();
            let outcome = if !t.unit().script {
                // The script next in line starts while these kernels are profiled, if it
                // promises to wait; the kernels wait for its promise (or its end).
                if let Some(j) = (i + 1..turns.len()).find(|&j| turns[j].unit().script) {
                    if turns[j].pass == t.pass && scripts[j].is_none() {
                        spawn(j, &mut scripts);
                        let gate = gates[j].as_ref().expect("a script's gate");
                        let thread = &scripts[j].as_ref().expect("spawned").1;
                        while !gate.honoured() && !thread.is_finished() {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        if gate.honoured() {
                            promising.insert(command(&turns[j]));
                        }
                    }
                }
                let (since, thread) = prestarted[i].take().expect("started above");
                let process = thread.join().expect("starting an ncu process panicked");
                let ahead = turn_began.saturating_duration_since(since);
                let profiled = kernels::profile_kernels(
                    ctx,
                    t.pass_of.call,
                    &members(t),
                    t.pass_of.reading,
                    process,
                );
                Ran {
                    profiled: Ok(profiled),
                    took: turn_began.elapsed(),
                    ahead,
                }
            } else {
                if scripts[i].is_none() {
                    spawn(i, &mut scripts);
                }
                let gate = gates[i].as_ref().expect("a script's gate");
                gate.open();
                let (since, thread) = scripts[i].take().expect("spawned");
                let outcome = thread.join().expect("a baseline script's thread panicked");
                if gate.honoured() {
                    promising.insert(command(t));
                }
                let profiled = outcome
                    .and_then(|o| run::read_script_outcome(&members(t), &o, t.pass_of.reading));
                Ran {
                    profiled,
                    took: turn_began.elapsed(),
                    ahead: turn_began.duration_since(since),
                }
            };
            ran[t.pass][t.unit] = Some(outcome);
        }
    });
    ran.into_iter()
        .map(|pass| {
            pass.into_iter()
                .map(|r| r.expect("every unit ran"))
                .collect()
        })
        .collect()
}

/// The units of every pass in the GPU's order: each pass's kernel units, then its scripts,
/// the one with the most calls first.
fn turns<'p>(passes: &'p [Pass<'p>]) -> Vec<Turn<'p>> {
    let mut turns = Vec::new();
    for (p, pass) in passes.iter().enumerate() {
        let mut order: Vec<usize> = (0..pass.units.len()).collect();
        order.sort_by_key(|&u| {
            (
                pass.units[u].script,
                std::cmp::Reverse(pass.units[u].members.len()),
                u,
            )
        });
        turns.extend(order.into_iter().map(|unit| Turn {
            pass: p,
            unit,
            pass_of: pass,
        }));
    }
    turns
}

/// Where a pass's kernel units write their CSV.
fn kernel_csv(root: &Path, tag: &str) -> PathBuf {
    root.join(format!(".repro/ncu/kernels.{tag}.csv"))
}

/// A file whose existence lets a waiting baseline script go on; removed when dropped.
struct Gate {
    path: PathBuf,
}

impl Gate {
    /// The gate of turn `turn` of the stage run in process `id`.
    fn new(root: &Path, id: u32, turn: usize) -> Gate {
        let path = root.join(format!(".repro/ncu/gate-{id}-{turn}"));
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

    /// Whether the script has said, first thing, that it waits at the gate before it runs
    /// anything on the GPU: it writes the gate's file name with `.honoured` appended.
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

/// Opens every gate when dropped, however the turns ended.
struct Opener<'a>(&'a [Option<Gate>]);

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        self.0.iter().flatten().for_each(Gate::open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_opens_when_its_opener_goes_and_is_gone_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let gates = [Some(Gate::new(dir.path(), 7, 1)), None];
        let path = gates[0].as_ref().unwrap().path().to_path_buf();
        assert!(path.starts_with(dir.path().join(".repro/ncu")));
        {
            let _open = Opener(&gates);
            assert!(!path.exists(), "closed until its turn");
        }
        assert!(path.exists(), "open once the turns are done");
        let gate = gates[0].as_ref().unwrap();
        assert!(!gate.honoured());
        std::fs::write(dir.path().join(".repro/ncu/gate-7-1.honoured"), "").unwrap();
        assert!(gate.honoured(), "the script's promise, by the gate's name");
        drop(gates);
        assert!(!path.exists(), "removed with the gate");
        assert!(!dir.path().join(".repro/ncu/gate-7-1.honoured").exists());
    }

    #[test]
    fn a_panic_still_opens_the_gates() {
        let dir = tempfile::tempdir().unwrap();
        let gates = [
            Some(Gate::new(dir.path(), 8, 0)),
            Some(Gate::new(dir.path(), 8, 3)),
        ];
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _open = Opener(&gates);
            panic!("a kernel target's profiling broke");
        }));
        assert!(result.is_err());
        for gate in gates.iter().flatten() {
            assert!(gate.path().exists(), "a waiting script goes on");
        }
    }
}
