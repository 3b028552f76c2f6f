//! The `tune` kind: an evolutionary search over a kernel's compile-time defines
//! ([`repro_tune`]), gate-first. Per generation every candidate is compiled in parallel
//! (the build stage's compile API, cached), then rejected at the first failing gate —
//! compile error, PTXAS gates (the tuned kernel's, `TuneOptions::ptxas`), correctness on every input recipe of the `small` and primary
//! shapes (`repro exec --no-timing`, judged at the kernel's precision class) — and only the survivors are timed on the tuning shapes (`repro exec`),
//! one child per GPU. Every finished trial goes to the memo under `.repro/cache/tune/`,
//! so an interrupted tune resumes and a larger budget continues.
//!
//! The kernel's workload (the one listing it) gives the shapes, recipes, reference and gates
//! every trial is judged by; several tune stages tune several kernels, each into its own
//! `dir`. A stage with `archs:` tunes only on a GPU that runs one of them, and is skipped
//! elsewhere, naming the stages that tune there ([`repro_tune::archs`]).
//!
//! Outputs, under its `dir` (default `artifacts/tune`): `tune_log.csv` (one row per trial),
//! `topk.json` (the elite with their bench records and parents), the elite cubins
//! `.repro/cubins/<dir's name>-top<k>.cubin` (optional outputs: a rank no passing
//! configuration filled, or a skipped run, leaves none, and the engine removes an older
//! one); with `repro tune --exhaustive` also `exhaustive.csv` and `comparison.json`.

use crate::{build::arch, build::cubin_path, build::sources};
use crate::{gpu_nodes, gpu_nodes::OneGpuModel};
use anyhow::Context;
use repro_gpu::GpuInfo;
use repro_pipeline::kind::{Config, Configured, Overrides, TuneOverrides};
use repro_pipeline::options::refuse_timeout;
use repro_pipeline::{
    kind::OptionError, kind::Outputs, kind::RunCtx, kind::StageInputs, kind::StageKind,
    kind::StageOutcome,
};
use repro_pipeline::{KernelSpec, Pipeline, StageSpec};
use repro_tune::memo::Memo;
use repro_tune::options::TuneOptions;
use repro_tune::proposer::brief::earlier_profiles;
use repro_tune::proposer::brief::KernelBrief;
use repro_tune::proposer::store::SourceStore;
use repro_tune::proposer::ProposerSpec;
use repro_tune::search::Settings;
use repro_tune::space::show;
use repro_tune::{proposer::run::CommandProposer, proposer::run::Host};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

mod cases;
mod driver;
mod gpu;
mod outputs;
mod restore;

pub use driver::{tune_and_write, Backend, Reporter, Sources};
use gpu::GpuBackend;
use outputs::write_skipped;

/// The memo of finished trials.
pub const MEMO_DIR: &str = ".repro/cache/tune";

/// The input that says why the stage is skipped on this GPU's arch (absent where it tunes).
const SKIPPED_HERE: &str = "skipped_here";

/// The `tune` kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct TuneStage;

/// The distinct GPU models (with arch and driver), sorted.
fn gpu_models(gpus: &[GpuInfo]) -> Vec<String> {
    let models: std::collections::BTreeSet<String> = gpus
        .iter()
        .map(|g| repro_gpu::gpu_identity(std::slice::from_ref(g)))
        .collect();
    models.into_iter().collect()
}

/// The trials to run: `--budget`'s, else the stage's.
fn budget(o: &TuneOptions, overrides: &TuneOverrides) -> u32 {
    overrides.budget.map_or(o.budget, |b| b.get())
}

impl StageKind for TuneStage {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Tune.as_str()
    }

    /// The arch is the declared one the GPU present runs, and whether the stage tunes it
    /// follows.
    fn machine_params(&self) -> &'static [&'static str] {
        &["arch", SKIPPED_HERE]
    }

    /// `timeout:` is refused: `trial_timeout:` limits each trial's runs, and
    /// `proposer.timeout` each call of the proposer.
    fn configure(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        refuse_timeout(
            "tune",
            spec,
            "`trial_timeout:` limits each trial's GPU runs, and `proposer: {timeout}` each call of the proposer",
        )?;
        TuneOptions::parse(spec, pipeline).map(Config::new)
    }

    fn outputs(&self, stage: &Configured, _pipeline: &Pipeline) -> Outputs {
        let o: &TuneOptions = stage.config.of();
        std::iter::once(PathBuf::from(&o.dir))
            .chain((1..=o.elite).map(|k| o.elite_cubin(k)))
            .collect()
    }

    /// The elite cubins: a skipped run or an unfilled rank writes none.
    fn optional_outputs(&self, stage: &Configured, _pipeline: &Pipeline) -> Outputs {
        let o: &TuneOptions = stage.config.of();
        (1..=o.elite).map(|k| o.elite_cubin(k)).collect()
    }

    /// `--budget` and `--exhaustive` change what it measures: both are inputs.
    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let o: &TuneOptions = stage.config.of();
        let kernel = &pipeline.kernels[&o.kernel];
        // The tuner compiles the kernel itself: its code matters, not its comments.
        let code = sources::closure(root, Path::new(&kernel.source), &kernel.flags)
            .unwrap_or_else(|_| vec![PathBuf::from(&kernel.source)]);
        // It compiles for, and loads the reference of, the declared arch its GPU runs.
        let arch = match repro_gpu::probe_cached(root) {
            Ok(gpus) if !gpus.is_empty() => arch::for_gpu(&gpus[0], &pipeline.arch).map_err(|e| {
                format!(
                    "unresolved: no declared arch runs on it (needs {})",
                    e.needs
                )
            }),
            Ok(_) => Err("unresolved: no GPU is visible".into()),
            Err(no) => Err(format!("unresolved: {no}")),
        };
        let workloads = repro_pipeline::workload::Workloads::of(pipeline);
        let decl = workloads
            .get(&o.workload)
            .expect("the tuned kernel's workload");
        let mut files = match (&arch, &decl.reference.run) {
            (Ok(a), None) => vec![cubin_path(&workloads.reference_name(&o.workload), a)],
            _ => Vec::new(),
        };
        let run = decl.reference.run.iter().flatten();
        files.extend(run.filter(|w| root.join(w).is_file()).map(PathBuf::from));
        // Off its `archs:` the stage is skipped, and the reason (naming the stages that tune
        // there) is an input: the plan says so, and the recorded reason stays current.
        let skip = arch
            .as_ref()
            .ok()
            .and_then(|a| repro_tune::archs::skip(stage.name, o, a, stage.peers));
        let arch = arch.unwrap_or_else(|why| why);
        let params = BTreeMap::from([
            ("arch".to_string(), arch),
            ("budget".to_string(), budget(o, &overrides.tune).to_string()),
            (
                "exhaustive".to_string(),
                overrides.tune.exhaustive.to_string(),
            ),
            ("gates".to_string(), serde_json::to_string(&o.ptxas)?),
            ("workload".to_string(), serde_json::to_string(decl)?),
            (
                "precision".to_string(),
                workloads
                    .class_of_kernel(pipeline, &o.kernel)
                    .unwrap_or_default(),
            ),
        ]);
        let mut params = params;
        if let Some(skip) = skip {
            params.insert(SKIPPED_HERE.to_string(), skip.reason);
        }
        if o.proposer.is_some() {
            // The command is in the stage's spec; the model (never the key) is recorded here.
            let model = repro_tune::proposer::model_from_env();
            params.insert(
                "proposer_model".to_string(),
                model.unwrap_or_else(|| "(none)".into()),
            );
        }
        let nvcc = repro_pipeline::toolchain::fingerprint(
            root,
            &repro_pipeline::toolchain::NvccSearch::from_env(),
            repro_pipeline::toolchain::pin(pipeline),
        );
        Ok(StageInputs {
            files,
            code,
            params,
            tools: BTreeMap::from([("nvcc".to_string(), nvcc)]),
            hardware: Some(gpu_nodes::hardware(pipeline, stage.spec, root)),
            overrides: overrides.tune.recorded(),
        })
    }

    /// Install the pinned nvcc when this machine has none of that version, then rebuild the
    /// elite cubins a fresh clone lacks, or holds from an older tune, from the committed elite ([`restore::elite_cubins`]).
    fn prepare(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        if let Some(pin) = repro_pipeline::toolchain::pin(pipeline) {
            repro_pipeline::toolchain::ensure(root, pin, say)?;
        }
        restore::elite_cubins(stage.name, stage.config.of(), pipeline, root, say)
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let began = std::time::Instant::now();
        let o: &TuneOptions = ctx.config.of();
        let budget = budget(o, &ctx.overrides.tune);
        let gpus = gpu_nodes::stage_gpus(ctx);
        let gpu_list = match &gpus {
            Ok(list) if !list.is_empty() => list.clone(),
            other => {
                let reason = match other {
                    Err(no) => no.0.clone(),
                    Ok(_) => "no GPU is visible".into(),
                };
                write_skipped(ctx.staging, &o.dir)?;
                return Ok(StageOutcome::Skipped {
                    reason: format!("the tune stage times kernels on a GPU: {reason}"),
                    fix: gpu_nodes::no_gpu_fix(ctx.executor, "run `repro tune`"),
                });
            }
        };
        let arch = arch::for_gpu(&gpu_list[0], &ctx.pipeline.arch)
            .map_err(|e| anyhow::anyhow!(e.at(ctx.pipeline_file)))?;
        if let Some(skip) = repro_tune::archs::skip(ctx.name, o, &arch, ctx.peers) {
            write_skipped(ctx.staging, &o.dir)?;
            return Ok(StageOutcome::Skipped {
                reason: skip.reason,
                fix: skip.fix,
            });
        }
        let tc = repro_pipeline::toolchain::find(
            ctx.root,
            repro_pipeline::toolchain::pin(ctx.pipeline),
        )?;
        let workloads = repro_pipeline::workload::Workloads::of(ctx.pipeline);
        let decl = workloads
            .get(&o.workload)
            .context("the tuned kernel's workload")?
            .clone();
        let kernel = ctx.pipeline.kernels[&o.kernel].clone();
        let precision = workloads.class_of_kernel(ctx.pipeline, &o.kernel);
        let seed = decl.seeds.first().copied().unwrap_or(0);
        let reference = crate::reuse::reference_key(ctx.root, &workloads, &o.workload, &arch)
            .with_context(|| {
                format!(
                    "cannot read workload `{}`'s reference for {arch}: run the build stage first (`repro stage build`)",
                    o.workload
                )
            })?;
        let key = serde_json::json!({
            "kernel": o.kernel,
            "entry": kernel.entry,
            "flags": kernel.flags,
            "sources": source_digest(ctx.root, &kernel)?,
            "reference": reference,
            "base_defines": o.base_defines,
            "arch": arch,
            "nvcc": tc.version,
            // The model, not the count: one GPU's trials are as good as another's of the kind.
            "gpu": gpu_models(&gpu_list),
            "harness": {
                "seed": seed,
                "warmup": o.warmup,
                "iters": o.iters,
                "l2": o.l2.name(),
                "method": o.method.name(),
                "shapes": o.shapes,
                "check_shapes": o.check_shapes,
                "workload": {"args": decl.args, "launch": decl.launch, "shapes": decl.shapes,
                             "recipes": decl.recipes, "inputs": decl.inputs,
                             // every seed: an elite member's confirmation runs each one
                             "seeds": decl.seeds},
                "precision": precision,
            },
            "gates": {"ptxas": o.ptxas, "correctness": decl.gates},
        });
        let mut memo = Memo::open(&ctx.root.join(MEMO_DIR), &key)?;
        let slots = gpu_nodes::gpu_slots(ctx.executor, &gpu_list);
        // The memo is keyed by the probed model: every timing must come from it.
        let one_model = OneGpuModel::new(o.allow_mixed_gpus);
        for gpu in &gpu_list {
            one_model
                .expect("the GPU probe", &gpu.name)
                .map_err(anyhow::Error::msg)?;
        }
        let jobs = o.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        // Workers read the project's pipeline.yaml, as the bench stage's do.
        let workers = gpu_nodes::workers(ctx, slots);
        let gpu_use = cases::GpuUse::default();
        let preparer = o.base.clone().map(|base| cases::Preparer {
            workers: &workers,
            base,
            workload: o.workload.clone(),
            decl: decl.clone(),
            timeout: o.trial_timeout,
        });
        let mut backend = GpuBackend {
            executor: ctx.executor,
            cancel: ctx.cancel,
            root: ctx.root,
            workers: &workers,
            gpu_use: &gpu_use,
            tc,
            arch,
            kernel,
            base_defines: o.base_defines.clone(),
            gates: o.ptxas.clone(),
            workload: o.workload.clone(),
            decl,
            precision,
            check_shapes: o.check_shapes.clone(),
            timed_shapes: o.shapes.clone(),
            seed,
            warmup: o.warmup,
            iters: o.iters,
            l2: o.l2,
            method: o.method,
            timeout: o.trial_timeout,
            slots,
            jobs,
            one_model,
            measured: Default::default(),
        };
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ctx.log)
            .with_context(|| format!("cannot open {}", ctx.log.display()))?;
        writeln!(
            log,
            "tune: {} valid configurations ({} ruled out by constraints), budget {budget}, {slots} GPU slot(s), {jobs} compile jobs, memo {} ({} trials); ready after {:.1} s",
            o.space.valid().len(),
            o.space.rejected(),
            memo.path().map(|p| p.display().to_string()).unwrap_or_default(),
            memo.len(),
            began.elapsed().as_secs_f64()
        )?;
        let start = start_config(ctx.root, &backend.kernel.source, o);
        match &start {
            Some(c) => writeln!(log, "tune: trial 1 is the base variant's configuration {}", show(c))?,
            None => writeln!(
                log,
                "tune: the base variant's configuration is not one of the space's (a define with no value, or one the space leaves out): the search starts from random samples"
            )?,
        }
        let settings = Settings {
            budget,
            population: o.population,
            elite: o.elite,
            seed: o.seed,
            exhaustive: false,
            start: start.into_iter().collect(),
        };
        let report = Reporter {
            progress: ctx.progress,
            log: &mut log,
        };
        let say = |line: &str| {
            (ctx.progress)(line);
            repro_base::fsio::append_line(ctx.log, line);
        };
        let store = SourceStore::open(ctx.root, Path::new(&backend.kernel.source))?;
        let mut proposer = o
            .proposer
            .as_ref()
            .map(|spec| command_proposer(ctx, o, spec, &store, &say));
        let sources = proposer.as_mut().map(|p| Sources {
            proposer: p,
            store: &store,
        });
        cases::alongside(preparer.as_ref(), &gpu_use, ctx.log, || {
            tune_and_write(
                o,
                &settings,
                ctx.overrides.tune.exhaustive,
                &mut backend,
                &mut memo,
                ctx.staging,
                report,
                sources,
            )
        })
    }
}

/// The `proposer:` command, with what its briefs say about the tune.
fn command_proposer<'a>(
    ctx: &'a RunCtx,
    o: &TuneOptions,
    spec: &ProposerSpec,
    store: &SourceStore,
    say: &'a dyn Fn(&str),
) -> CommandProposer<'a> {
    let kernel = &ctx.pipeline.kernels[&o.kernel];
    let host = Host {
        executor: ctx.executor,
        cancel: ctx.cancel,
        root: ctx.root,
        repro_exe: ctx.repro_exe,
        say,
    };
    let brief = KernelBrief {
        name: o.kernel.clone(),
        path: kernel.source.clone(),
        entry: kernel.entry.clone(),
        base_defines: o.base_defines.clone(),
        source: store.base().to_string(),
    };
    let profiles = earlier_profiles(ctx.root, &o.dir, &o.elite_prefix());
    CommandProposer::new(
        spec,
        o.population,
        host,
        profiles,
        store.clone(),
        brief,
        objective(o),
    )
}

/// What the proposer's brief says a candidate must do, with the gates it is judged by.
fn objective(o: &TuneOptions) -> String {
    format!(
        "minimize the p50 in µs of one launch on shape(s) {} (their geometric mean when several); a candidate is timed only after it compiles, passes the ptxas gates {} and is correct on every input recipe of shape(s) {}",
        o.shapes.join(", "),
        serde_json::to_string(&o.ptxas).unwrap_or_default(),
        o.check_shapes.join(", ")
    )
}

/// The base variant's configuration in the tune's space, read with the kernel's source
/// defaults ([`repro_tune::start::base_config`]); `None` when the source cannot be read.
fn start_config(root: &Path, source: &str, o: &TuneOptions) -> Option<repro_tune::space::Config> {
    let text = std::fs::read_to_string(root.join(source)).ok()?;
    repro_tune::start::base_config(&o.space, &o.base_defines, &text)
}

/// SHA-256 of the kernel source and every local header it includes.
fn source_digest(root: &Path, kernel: &KernelSpec) -> anyhow::Result<String> {
    let files = sources::closure(root, Path::new(&kernel.source), &kernel.flags)?;
    let mut all = Vec::new();
    for f in files {
        let bytes =
            std::fs::read(root.join(&f)).with_context(|| format!("cannot read {}", f.display()))?;
        all.extend(f.display().to_string().into_bytes());
        all.push(0);
        all.extend(repro_base::tools::hex(&sha256(&bytes)).into_bytes());
        all.push(b'\n');
    }
    Ok(repro_base::tools::hex(&sha256(&all)))
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).to_vec()
}

#[cfg(test)]
mod arch_tests;
#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod proposer_tests;
#[cfg(test)]
mod tests;
