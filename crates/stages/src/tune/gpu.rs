//! The real trial backend: the build stage's compile API on every CPU core, the PTXAS gates,
//! then the GPU workers — correctness first (`--no-timing`), timing only for survivors —
//! spread over the GPU slots, each candidate measured as soon as its compile is done.

use super::cases::GpuUse;
use super::Backend;
use crate::build::compile;
use crate::build::compile::CompileOutput;
use crate::build::compile::CompileRequest;
use crate::build::cubin;
use crate::build::gates;
use crate::gpu_nodes::OneGpuModel;
use crate::slots::run_on_slots;
use crate::slots::run_streamed;
use anyhow::bail;
use anyhow::Context;
use repro_executor::CancelFlag;
use repro_executor::Executor;
use repro_gpu::client::ExecRequest;
use repro_gpu::client::ExecTarget;
use repro_gpu::timing::L2Mode;
use repro_gpu::timing::Method;
use repro_gpu::worker::pool::Workers;
use repro_pipeline::toolchain::Toolchain;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::Declaration;
use repro_pipeline::KernelSpec;
use repro_pipeline::PtxasGates;
use repro_schema::BenchResult;
use repro_schema::TrialStatus;
use repro_tune::memo::Evaluation;
use repro_tune::proposer::store::include_flags;
use repro_tune::search::Candidate;
use repro_tune::search::Objective;
use repro_tune::space::show;
use sha2::Digest;
use sha2::Sha256;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// Compiles with the build stage's compile API on every CPU core and measures each
/// candidate as soon as it is compiled, on one `repro exec --worker` per GPU slot.
pub(super) struct GpuBackend<'a, 'w> {
    pub(super) executor: &'a dyn Executor,
    pub(super) cancel: &'a CancelFlag,
    pub(super) root: &'a Path,
    /// One per GPU slot, kept for the whole tune: the reference outputs are computed once.
    pub(super) workers: &'w Workers<'a>,
    /// Told when trials begin and held by each trial and confirmation on the GPU, so the
    /// cases prepared ahead of the confirmations take only time the GPU would wait anyway.
    pub(super) gpu_use: &'w GpuUse,
    pub(super) tc: Toolchain,
    pub(super) arch: String,
    pub(super) kernel: KernelSpec,
    pub(super) base_defines: BTreeMap<String, String>,
    pub(super) gates: Option<PtxasGates>,
    /// The kernel's workload: its shapes, and the recipes of each (every one of a check
    /// shape is checked, the first is the one timed).
    pub(super) workload: String,
    pub(super) decl: Declaration,
    /// The kernel's precision class: which correctness thresholds apply.
    pub(super) precision: Option<String>,
    pub(super) check_shapes: Vec<String>,
    pub(super) timed_shapes: Vec<String>,
    pub(super) seed: u64,
    pub(super) warmup: u32,
    pub(super) iters: u32,
    pub(super) l2: L2Mode,
    pub(super) method: Method,
    pub(super) timeout: Duration,
    pub(super) slots: u32,
    pub(super) jobs: usize,
    /// Refuses a trial timed on a second GPU model unless `allow_mixed_gpus`.
    pub(super) one_model: OneGpuModel,
    /// What each distinct program measured (see [`GpuBackend::program_key`]).
    pub(super) measured: SameProgram,
}

/// The measurements of this tune's programs so far, by [`GpuBackend::program_key`], with the
/// trial that made each. A candidate whose cubin and launch are byte for byte those of an
/// earlier trial (a define the source ignores, a patch that compiles to the same code) takes
/// that trial's measurement instead of a second sample of the same program, so the ranking
/// never rewards noise.
pub(super) type SameProgram = Mutex<HashMap<String, (u32, Evaluation)>>;

impl GpuBackend<'_, '_> {
    /// A trial's compile: its source (the kernel's own, or a proposed one that includes the
    /// kernel's headers through `-I`) with the base defines overridden by its configuration.
    fn request(&self, c: &Candidate) -> CompileRequest {
        let mut defines = self.base_defines.clone();
        for (k, v) in &c.config {
            defines.insert(k.clone(), v.to_string());
        }
        let kernel = PathBuf::from(&self.kernel.source);
        let mut flags = self.kernel.flags.clone();
        let source = match &c.source {
            Some(proposed) => {
                flags.extend(include_flags(&kernel));
                proposed.path.clone()
            }
            None => kernel,
        };
        CompileRequest {
            source,
            entry: self.kernel.entry.clone(),
            defines,
            arch: self.arch.clone(),
            flags,
        }
    }

    /// Every candidate of `batch`, `jobs` nvcc at a time.
    fn compile(&self, batch: &[Candidate]) -> anyhow::Result<Vec<CompileOutput>> {
        let reqs: Vec<CompileRequest> = batch.iter().map(|c| self.request(c)).collect();
        let outs = compile::compile_many(
            self.executor,
            self.cancel,
            &self.tc,
            self.root,
            &reqs,
            self.jobs,
        );
        self.check_cancel()?;
        Ok(outs)
    }

    /// A trial's integer defines (the base's, overridden by its configuration): what the
    /// workload's launch geometry reads.
    fn launch_defines(&self, c: &Candidate) -> Bindings {
        let mut defines: Bindings = self
            .base_defines
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
            .collect();
        defines.extend(c.config.iter().map(|(k, v)| (k.clone(), *v)));
        defines
    }

    /// One candidate's compile (a cache hit when it was built before).
    fn compile_one(&self, candidate: &Candidate) -> CompileOutput {
        let mut outs = compile::compile_many(
            self.executor,
            self.cancel,
            &self.tc,
            self.root,
            &[self.request(candidate)],
            1,
        );
        outs.pop().expect("one output per request")
    }

    fn check_cancel(&self) -> anyhow::Result<()> {
        if self.cancel.load(Ordering::SeqCst) {
            bail!("interrupted");
        }
        Ok(())
    }

    /// One run of `cubin` (compiled with `defines`) on GPU slot `slot`'s worker, with
    /// inputs `(shape, recipe, seed)`.
    fn exec(
        &self,
        slot: u32,
        (cubin, defines): (&Path, &Bindings),
        (shape, inputs, seed): (&str, &str, u64),
        timing: bool,
    ) -> BenchResult {
        let req = ExecRequest {
            target: ExecTarget::Cubin {
                path: cubin.to_path_buf(),
                entry: self.kernel.entry.clone(),
                defines: defines.clone(),
            },
            workload: Some(self.workload.clone()),
            shape: shape.to_string(),
            inputs: Some(inputs.to_string()),
            precision: self.precision.clone(),
            seed,
            warmup: self.warmup,
            iters: self.iters,
            l2: self.l2,
            method: self.method,
            timing,
            profile: None,
            check: true,
        };
        let dims = self.decl.shape_dims(shape).unwrap_or_default();
        self.workers.run(slot, &req, &dims, self.timeout)
    }

    /// The GPU gates, then timing: correctness on every recipe of every check shape, then
    /// p50 on every timed shape's first recipe (score: their geometric mean).
    fn on_gpu(&self, slot: u32, compiled: &Evaluation, kernel: (&Path, &Bindings)) -> Evaluation {
        let mut e = compiled.clone();
        let decl = &self.decl;
        let checks = self.check_shapes.iter().flat_map(|s| {
            decl.recipes_of(s)
                .into_iter()
                .map(move |r| ((s.as_str(), r), false))
        });
        let timed = self
            .timed_shapes
            .iter()
            .map(|s| ((s.as_str(), decl.recipes_of(s)[0]), true));
        let mut p50s = Vec::new();
        for (run, timing) in checks.chain(timed) {
            let r = self.exec(slot, kernel, (run.0, run.1, self.seed), timing);
            let verdict = judge(&r, timing);
            let worst = |seen: Option<f64>, new: Option<f64>| match (seen, new) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            e.max_abs_err = worst(e.max_abs_err, r.max_abs_err);
            e.max_err_over_ref_std = worst(e.max_err_over_ref_std, r.max_err_over_ref_std);
            e.bench.push(r);
            match verdict {
                Verdict::Pass(p50) => p50s.extend(p50),
                Verdict::Reject(status, note) => {
                    let (shape, inputs) = run;
                    e.correctness_pass = (status == TrialStatus::Incorrect).then_some(false);
                    e.status = status;
                    e.note = if inputs == decl.recipes_of(shape)[0] {
                        format!("{shape}: {note}")
                    } else {
                        format!("{shape} ({inputs} inputs): {note}")
                    };
                    return e;
                }
            }
        }
        // One timed shape: its p50 as is; several: their geometric mean.
        let score = match p50s[..] {
            [one] => one,
            _ => (p50s.iter().map(|p| p.ln()).sum::<f64>() / p50s.len() as f64).exp(),
        };
        e.status = TrialStatus::Ok;
        e.score = Some(score);
        e.correctness_pass = Some(true);
        e
    }
}

impl GpuBackend<'_, '_> {
    /// A compiled candidate (trial `trial`, with its launch defines) through the
    /// compile-time gates, then the GPU on slot `slot`, unless an earlier trial ran the same
    /// program.
    fn trial(&self, slot: u32, (trial, out, defines): &Compiled) -> Evaluation {
        let gates = self
            .gates
            .as_ref()
            .map(|g| crate::build::gates::for_arch(g, &self.arch));
        let (compiled, cubin) = match compile_gates(out, &self.kernel.entry, gates.as_ref()) {
            CompileGate::Passed(compiled, cubin) => (compiled, cubin),
            CompileGate::Rejected(rejected) => return rejected,
        };
        let key = self.program_key(&cubin, defines);
        let seen = key
            .as_ref()
            .and_then(|k| self.measured.lock().unwrap().get(k).cloned());
        if let Some((first, mut e)) = seen {
            e.note = format!(
                "the same cubin and launch as trial {first}: its measurement{}",
                if e.note.is_empty() {
                    String::new()
                } else {
                    format!("; {}", e.note)
                }
            );
            return e;
        }
        let wanting = self.gpu_use.want();
        let e = self.on_gpu(slot, &compiled, (&cubin, defines));
        drop(wanting);
        if let (Some(k), TrialStatus::Ok | TrialStatus::Incorrect) = (key, &e.status) {
            self.measured
                .lock()
                .unwrap()
                .entry(k)
                .or_insert((*trial, e.clone()));
        }
        e
    }

    /// What a measurement depends on besides the fixed shapes and recipes: the cubin's
    /// bytes and the defines the workload's launch reads (`None`: the cubin is unreadable).
    fn program_key(&self, cubin: &Path, defines: &Bindings) -> Option<String> {
        let mut hash = Sha256::new();
        hash.update(std::fs::read(cubin).ok()?);
        for (name, value) in self.decl.launch.defines_read(defines) {
            hash.update(format!("\0{name}={value}"));
        }
        Some(format!("{:x}", hash.finalize()))
    }
}

/// A candidate's trial number, compile and launch defines, on its way to a GPU slot.
type Compiled = (u32, CompileOutput, Bindings);

impl Objective for GpuBackend<'_, '_> {
    /// nvcc on every CPU core; each candidate goes to a free GPU slot as soon as its compile
    /// finishes, so the GPUs measure while the rest still compile.
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        self.gpu_use.trials_begin();
        let this = &*self;
        let mut mixed = None;
        std::thread::scope(|s| {
            let (compiled, arrivals) = mpsc::channel();
            s.spawn(move || {
                run_on_slots(
                    this.jobs as u32,
                    batch,
                    this.cancel,
                    |_, candidate| {
                        let out = this.compile_one(candidate);
                        (candidate.trial, out, this.launch_defines(candidate))
                    },
                    |i, out| {
                        // The receiver goes only when the GPU side has stopped (interrupt).
                        let _ = compiled.send((i, out));
                    },
                );
            });
            run_streamed(
                this.slots,
                arrivals,
                this.cancel,
                |slot, out: Compiled| this.trial(slot, &out),
                |i, evaluation| {
                    // A run killed by the interrupt is not a result, nor is a timing from
                    // another GPU model: leave them unrecorded (the next run redoes them).
                    if this.cancel.load(Ordering::SeqCst) {
                        return;
                    }
                    match this.one_model.admit(&evaluation.bench) {
                        Ok(()) => done(i, evaluation),
                        Err(message) => mixed = Some(message),
                    }
                },
            );
        });
        this.check_cancel()?;
        match mixed {
            Some(message) => bail!(message),
            None => Ok(()),
        }
    }
}

impl Backend for GpuBackend<'_, '_> {
    fn nvcc_version(&self) -> Option<String> {
        Some(self.tc.version.clone())
    }

    /// Every declared shape × its recipes × every seed of the workload, untimed, on the
    /// first GPU slot; stops at the first run that does not pass.
    fn confirm(&mut self, trial: &Candidate) -> anyhow::Result<Vec<BenchResult>> {
        let _wanting = self.gpu_use.want();
        let out = self.compile_one(trial);
        self.check_cancel()?;
        let cubin = out
            .cubin
            .filter(|_| out.ok)
            .with_context(|| format!("cannot rebuild trial {} to confirm it", trial.trial))?;
        let defines = self.launch_defines(trial);
        let mut runs = Vec::new();
        for (shape, recipe, seed) in every_case(&self.decl) {
            let r = self.exec(0, (&cubin, &defines), (shape, recipe, seed), false);
            self.check_cancel()?;
            let passed = matches!(judge(&r, false), Verdict::Pass(_));
            runs.push(r);
            if !passed {
                break;
            }
        }
        Ok(runs)
    }

    fn cubins(&mut self, elite: &[Candidate]) -> anyhow::Result<Vec<PathBuf>> {
        self.compile(elite)?
            .into_iter()
            .zip(elite)
            .map(|(out, c)| {
                out.cubin.filter(|_| out.ok).with_context(|| {
                    format!(
                        "cannot rebuild the elite trial {} ({}): {}",
                        c.trial,
                        show(&c.config),
                        out.error.unwrap_or_default()
                    )
                })
            })
            .collect()
    }
}

/// Every (shape, recipe, seed) `decl` declares: what the bench stage checks a variant on.
pub(super) fn every_case(decl: &Declaration) -> Vec<(&str, &str, u64)> {
    decl.shapes
        .keys()
        .flat_map(|s| decl.recipes_of(s).into_iter().map(move |r| (s.as_str(), r)))
        .flat_map(|(s, r)| decl.seeds.iter().map(move |&seed| (s, r, seed)))
        .collect()
}

/// How a candidate fared at the compile-time gates.
#[derive(Debug)]
pub(super) enum CompileGate {
    /// The trial so far (registers, spills) and its cubin.
    Passed(Evaluation, PathBuf),
    Rejected(Evaluation),
}

/// The compile-time gates: the compile itself, then PTXAS.
pub(super) fn compile_gates(
    out: &CompileOutput,
    entry: &str,
    ptxas: Option<&PtxasGates>,
) -> CompileGate {
    if !out.ok {
        let error = out.error.as_deref().unwrap_or("nvcc failed");
        let first: Vec<&str> = error
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(2)
            .collect();
        return CompileGate::Rejected(Evaluation::rejected(
            TrialStatus::CompileError,
            first.join(" | "),
        ));
    }
    let resources = out.entries.iter().find(|e| e.name == entry);
    // Passed so far; the GPU gates and the timing fill in the rest.
    let mut e = Evaluation::ok(0.0);
    e.score = None;
    e.registers = resources.and_then(|r| r.registers);
    e.spill_bytes =
        resources.map(|r| r.spill_store_bytes.unwrap_or(0) + r.spill_load_bytes.unwrap_or(0));
    if let Some(g) = ptxas {
        let dynamic = out.cubin.as_deref().and_then(cubin::dynamic_smem_bytes);
        let entries = gates::with_dynamic_smem(&out.entries, entry, dynamic);
        let failed = gates::describe_failures("", &gates::ptxas_gates(&entries, g));
        if !failed.is_empty() {
            e.status = TrialStatus::PtxasGate;
            e.note = failed
                .iter()
                .map(|f| f.trim())
                .collect::<Vec<_>>()
                .join("; ");
            return CompileGate::Rejected(e);
        }
    }
    match &out.cubin {
        Some(cubin) => CompileGate::Passed(e, cubin.clone()),
        None => CompileGate::Rejected(Evaluation::rejected(
            TrialStatus::CompileError,
            "nvcc reported success but left no cubin",
        )),
    }
}

pub(super) enum Verdict {
    /// Passed; the p50 when the run was timed.
    Pass(Option<f64>),
    /// `failed` or `incorrect`, with why.
    Reject(TrialStatus, String),
}

pub(super) fn judge(r: &BenchResult, timed: bool) -> Verdict {
    if !r.status.is_ok() {
        let why = r
            .error
            .clone()
            .unwrap_or_else(|| format!("status {}", r.status));
        return Verdict::Reject(TrialStatus::Failed, why);
    }
    if r.correctness_pass != Some(true) {
        if let Some(error) = &r.error {
            // An output it never wrote: the error says which, where it is declared.
            return Verdict::Reject(TrialStatus::Incorrect, error.clone());
        }
        let fmt = |x: Option<f64>| x.map_or("n/a".into(), |v| format!("{v:.6}"));
        let nonfinite = r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0);
        return Verdict::Reject(
            TrialStatus::Incorrect,
            format!(
                "max_abs_err {} mean_abs_err {} pct_bad {} max_err_over_ref_std {} rel_l2_err {} non-finite {nonfinite}",
                fmt(r.max_abs_err),
                fmt(r.mean_abs_err),
                fmt(r.pct_bad),
                fmt(r.max_err_over_ref_std),
                fmt(r.rel_l2_err)
            ),
        );
    }
    if !timed {
        return Verdict::Pass(None);
    }
    match r.p50_us {
        Some(p) if p.is_finite() && p > 0.0 => Verdict::Pass(Some(p)),
        _ => Verdict::Reject(TrialStatus::Failed, "the timed run reported no p50".into()),
    }
}
