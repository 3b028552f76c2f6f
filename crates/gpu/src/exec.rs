//! `repro exec`: one kernel of a workload, one shape, recipe and seed → one JSON line (a
//! `schema::BenchResult`). The kernel's arguments, launch, reference and gates all come
//! from its workload's declaration (`repro_pipeline::workload`). Also `--dump-inputs` (the cases as
//! files, for baseline scripts) and `--attributes` (a function's driver attributes, for the
//! bench stage's driver check).

use super::client::ExecRequest;
use super::client::ExecTarget;
use super::client::GPU_INDEX_ENV;
use super::harness;
use super::harness::Launch;
use super::harness::Session;
use super::launch::kernel_order;
use super::launch::launch_dims;
use super::launch::DeviceCase;
use super::timing::Method;
use super::timing::TimingConfig;
use super::warm::Reference;
use super::warm::Warm;
use anyhow::bail;
use anyhow::Context as _;
use repro_pipeline::define_value;
use repro_pipeline::workload::accuracy::larger;
use repro_pipeline::workload::compare::check_case;
use repro_pipeline::workload::compare::OutputCheck;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::exprs::Compiled;
use repro_pipeline::workload::inputs::Case;
use repro_pipeline::workload::problem::Problem;
use repro_pipeline::workload::Declaration;
use repro_pipeline::workload::Workloads;
use repro_pipeline::Pipeline;
use repro_schema::BenchResult;
use repro_schema::OutputAccuracy;
use repro_schema::RunStatus;
use repro_schema::TimingMode;
use serde::Serialize;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

/// Whether a shape text is dimensions (`rows=4,hidden=1024`, or `4,1024`: integers in the
/// order of the workload's `dims`) rather than a shape name.
pub fn is_dims(text: &str) -> bool {
    !text.is_empty()
        && text.split(',').all(|part| {
            let value = part.split_once('=').map_or(part, |(_, v)| v);
            value.trim().parse::<i64>().is_ok()
        })
}

/// The dimensions `text` gives for a workload with `dims`: every one of them, by name or in
/// order, each a positive integer.
pub fn parse_dims(text: &str, dims: &[String]) -> Result<Bindings, String> {
    let expected = || {
        format!(
            "expected the workload's dimensions as {} (or their values in that order)",
            dims.iter()
                .map(|d| format!("{d}=N"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut out = Bindings::new();
    for (i, part) in parts.iter().enumerate() {
        let (name, value) = match part.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), v.trim()),
            None => match dims.get(i) {
                Some(d) => (d.clone(), *part),
                None => {
                    return Err(format!(
                        "{} values for {} dimensions; {}",
                        parts.len(),
                        dims.len(),
                        expected()
                    ))
                }
            },
        };
        if !dims.contains(&name) {
            return Err(format!(
                "`{name}` is not a dimension of the workload; {}",
                expected()
            ));
        }
        match value.parse::<i64>() {
            Ok(v) if v > 0 => {
                out.insert(name, v);
            }
            _ => {
                return Err(format!(
                    "`{part}` is not a positive integer; {}",
                    expected()
                ))
            }
        }
    }
    if let Some(missing) = dims.iter().find(|d| !out.contains_key(*d)) {
        return Err(format!("no value for `{missing}`; {}", expected()));
    }
    Ok(out)
}

/// Read pipeline.yaml (serde's message carries the line and column).
pub(super) fn load_pipeline(file: &Path) -> anyhow::Result<Pipeline> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("{}: invalid pipeline", file.display()))
}

/// The project root: the pipeline file's folder.
pub(super) fn root_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Bump when a change here changes what a run measures (the timing method, the correctness
/// check): records measured before are then not reused (`stages::reuse`).
pub const HARNESS_REVISION: u32 = 2;

/// What `repro exec` takes beyond the [`ExecRequest`] the stages send: the GPU, when to
/// stop sampling, the graph method's batch, another reference kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecSettings {
    /// Device index among the visible ones.
    pub device: u32,
    /// Keep sampling while the coefficient of variation is above this...
    pub max_cv: f64,
    /// ...for at most this many seconds.
    pub max_time: f64,
    /// Graph method: launches per sample (default: enough for a sample of at least 100 µs).
    pub launches_per_sample: Option<u32>,
    /// The reference cubin (default the build's, of the workload and this GPU's arch).
    pub reference: Option<PathBuf>,
}

/// `repro exec --attributes`: a function's driver attributes (needs no pipeline; the bench
/// stage asks for any cubin).
pub fn attributes(cubin: &Path, entry: &str, device: u32) -> anyhow::Result<harness::Attributes> {
    super::driver_library_loads()?;
    let _session = Session::open(device)?;
    harness::attributes(cubin, entry)
}

/// The project a `repro exec` process serves: its pipeline.yaml, read once, its workloads,
/// and the architecture of the build's cubins this process's GPU loads, found once.
pub struct Project {
    file: PathBuf,
    root: PathBuf,
    pipeline: Option<Pipeline>,
    workloads: Workloads,
    arch: std::cell::OnceCell<String>,
}

impl Project {
    /// Read the pipeline at `file`, if there is one (a `--cubin` run needs none).
    pub fn load(file: &Path) -> anyhow::Result<Project> {
        let pipeline = file.exists().then(|| load_pipeline(file)).transpose()?;
        let workloads = pipeline.as_ref().map(Workloads::of).unwrap_or_default();
        Ok(Project {
            file: file.to_path_buf(),
            root: root_of(file),
            pipeline,
            workloads,
            arch: std::cell::OnceCell::new(),
        })
    }

    /// The pipeline, when the file exists.
    pub(super) fn loaded(&self) -> Option<&Pipeline> {
        self.pipeline.as_ref()
    }

    fn pipeline(&self) -> anyhow::Result<&Pipeline> {
        self.pipeline.as_ref().with_context(|| {
            format!(
                "{} not found: `repro exec` runs a workload declared there",
                self.file.display()
            )
        })
    }

    /// The architecture of the build's cubins that GPU `device` loads.
    fn arch(&self, device: u32) -> anyhow::Result<&str> {
        if self.arch.get().is_none() {
            let _ = self
                .arch
                .set(device_arch(self.pipeline()?, &self.file, device)?);
        }
        Ok(self.arch.get().expect("set above"))
    }

    /// The workload `req` runs: the one asked for, else its variant's, else the only one.
    pub(super) fn workload_of(&self, req: &ExecRequest) -> anyhow::Result<(&str, &Declaration)> {
        let p = self.pipeline()?;
        let names = || self.workloads.names().collect::<Vec<_>>().join(", ");
        if let Some(w) = &req.workload {
            return self
                .workloads
                .iter()
                .find(|(n, _)| n == w)
                .with_context(|| {
                    format!(
                        "no workload `{w}` in {} (workloads: {})",
                        self.file.display(),
                        names()
                    )
                });
        }
        if let ExecTarget::Variant(v) = &req.target {
            variant_entry(p, &self.file, v)?;
            return self.workloads.of_variant(p, v).with_context(|| {
                format!(
                    "variant `{v}`'s kernel `{}` is in no workload: list it under a workload's `kernels`",
                    p.variants[v].kernel
                )
            });
        }
        let mut all = self.workloads.iter();
        match (all.next(), all.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => bail!("{} declares no workload", self.file.display()),
            _ => bail!(
                "say which workload the cubin runs: --workload NAME (workloads: {})",
                names()
            ),
        }
    }

    /// What `req` loads and how it is judged.
    pub(super) fn resolve(
        &self,
        req: &ExecRequest,
        settings: &ExecSettings,
    ) -> anyhow::Result<Resolved> {
        let (workload, decl) = self.workload_of(req)?;
        // The build's cubins are per architecture: a variant's, or the reference's, is the
        // one of this GPU's.
        let kernel_reference = decl.reference.run.is_none();
        let builds_needed = matches!(req.target, ExecTarget::Variant(_))
            || (kernel_reference && settings.reference.is_none());
        let arch = if builds_needed {
            Some(self.arch(settings.device)?.to_string())
        } else {
            None
        };
        let p = self.pipeline()?;
        let (cubin, entry, defines, target) = match &req.target {
            ExecTarget::Variant(v) => {
                let (cubin, entry) =
                    variant_cubin(p, &self.file, v, arch.as_deref().unwrap_or_default())?;
                (
                    cubin,
                    entry,
                    integer_defines(p, v),
                    format!("variant `{v}`"),
                )
            }
            ExecTarget::Cubin {
                path,
                entry,
                defines,
            } => (
                path.clone(),
                entry.clone(),
                defines.clone(),
                format!("cubin `{}`", path.display()),
            ),
        };
        let (shape, dims) = if is_dims(&req.shape) {
            let dims = parse_dims(&req.shape, &decl.dims).map_err(anyhow::Error::msg)?;
            (req.shape.clone(), dims)
        } else {
            let dims = decl
                .shapes
                .get(&req.shape)
                .with_context(|| {
                    format!(
                        "no shape `{}` in workload `{workload}` (shapes: {})",
                        req.shape,
                        decl.shapes.keys().cloned().collect::<Vec<_>>().join(", ")
                    )
                })?
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            (req.shape.clone(), dims)
        };
        let recipe = match &req.inputs {
            Some(r) => r.clone(),
            None => decl.recipes_of(&shape)[0].to_string(),
        };
        if !decl.recipe_names().contains(&recipe.as_str()) {
            bail!(
                "no input recipe `{recipe}` in workload `{workload}` (recipes: {})",
                decl.recipe_names().join(", ")
            );
        }
        let reference = match (&decl.reference.run, &settings.reference) {
            (Some(run), _) => Reference::Command {
                root: self.root.clone(),
                run: run.clone(),
            },
            (None, chosen) => Reference::Kernel {
                cubin: chosen.clone().unwrap_or_else(|| {
                    let name = self.workloads.reference_name(workload);
                    self.root.join(repro_pipeline::paths::cubin_path(
                        &name,
                        arch.as_deref().unwrap_or_default(),
                    ))
                }),
                entry: decl.reference.entry.clone().unwrap_or_default(),
            },
        };
        let class = req.precision.clone().or_else(|| match &req.target {
            ExecTarget::Variant(v) => self.workloads.class_of(p, v),
            ExecTarget::Cubin { .. } => decl.precision.clone(),
        });
        Ok(Resolved {
            workload: workload.to_string(),
            decl: decl.clone(),
            cubin,
            entry,
            defines,
            target,
            reference,
            shape,
            dims,
            recipe,
            class,
        })
    }

    /// `problem` at its place in pipeline.yaml (`file:line:col: error: ...`).
    pub(super) fn render(&self, problem: &Problem) -> String {
        match &self.pipeline {
            Some(p) => repro_pipeline::workload::render(p, &self.file, problem),
            None => format!("{}: error: {}", self.file.display(), problem.message),
        }
    }
}

/// A variant's defines that are integers, as launch expressions read them.
fn integer_defines(p: &Pipeline, variant: &str) -> Bindings {
    p.variants[variant]
        .defines
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), define_value(v).ok()?.parse().ok()?)))
        .collect()
}

/// Runs requests in one process (one, or a worker's many), keeping a [`Warm`] session
/// between them.
pub struct Runner {
    project: Project,
    settings: ExecSettings,
    warm: Option<Warm>,
    /// No session could be opened: nothing will run in this process.
    no_session: bool,
}

impl Runner {
    pub fn new(file: &Path, settings: &ExecSettings) -> anyhow::Result<Runner> {
        let project = Project::load(file)?;
        super::driver_library_loads()?;
        Ok(Runner {
            project,
            settings: settings.clone(),
            warm: None,
            no_session: false,
        })
    }

    /// `repro exec`: load `req.target`, check it against the reference on `req`'s case,
    /// time it unless `!req.timing`; the record `repro exec` prints.
    pub fn run(&mut self, req: &ExecRequest) -> anyhow::Result<BenchResult> {
        if self.settings.launches_per_sample.is_some() && req.method != Method::Graph {
            bail!(
                "--launches-per-sample applies to --method graph; the {} method times one launch per sample\nhelp: add `--method graph`, or drop --launches-per-sample",
                req.method
            );
        }
        let resolved = self.project.resolve(req, &self.settings)?;
        let warm = match &mut self.warm {
            Some(w) => w,
            None => match Warm::open(self.settings.device) {
                Ok(w) => self.warm.insert(w),
                Err(e) => {
                    self.no_session = true;
                    return Err(e);
                }
            },
        };
        measure(warm, &self.project, &resolved, req, &self.settings)
    }

    /// May this process take another run after one failed? Not when no session could be
    /// opened, nor when a sticky CUDA error poisoned the context.
    pub fn usable(&self) -> bool {
        !self.no_session && self.warm.as_ref().is_none_or(Warm::usable)
    }
}

/// One `repro exec` run in a process of its own.
pub fn run_request(
    file: &Path,
    req: &ExecRequest,
    settings: &ExecSettings,
) -> anyhow::Result<BenchResult> {
    Runner::new(file, settings)?.run(req)
}

/// The architecture of `p`'s cubins that GPU `device` runs: the declared one for its
/// compute capability, or an error at `arch:` in `file` naming what to add.
pub(super) fn device_arch(p: &Pipeline, file: &Path, device: u32) -> anyhow::Result<String> {
    let gpus = super::probe()?;
    let gpu = gpus.iter().find(|g| g.index == device).with_context(|| {
        format!(
            "there is no GPU {device}: the driver sees {} (indices from 0)",
            gpus.len()
        )
    })?;
    crate::arch::for_gpu(gpu, &p.arch).map_err(|e| anyhow::anyhow!(e.at(file)))
}

/// Variant `v`'s cubin for `arch` (the build's `.repro/cubins/<VARIANT>.<ARCH>.cubin` beside
/// `file`) and entry point.
pub fn variant_cubin(
    p: &Pipeline,
    file: &Path,
    v: &str,
    arch: &str,
) -> anyhow::Result<(PathBuf, String)> {
    let entry = variant_entry(p, file, v)?;
    Ok((
        root_of(file).join(repro_pipeline::paths::cubin_path(v, arch)),
        entry,
    ))
}

/// The entry point of variant `v` of `p` (read from `file`): an error naming the variants
/// when there is none. Its cubin is the build's `.repro/cubins/<VARIANT>.<ARCH>.cubin`.
pub(super) fn variant_entry(p: &Pipeline, file: &Path, v: &str) -> anyhow::Result<String> {
    let spec = p.variants.get(v).with_context(|| {
        format!(
            "no variant `{v}` in {} (variants: {})",
            file.display(),
            p.variants.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let kernel = p.kernels.get(&spec.kernel).with_context(|| {
        format!(
            "variant `{v}` names kernel `{}`, which is not under `kernels:`",
            spec.kernel
        )
    })?;
    Ok(kernel.entry.clone())
}

/// A request resolved against the project: what to load, on what, judged how.
pub(super) struct Resolved {
    pub(super) workload: String,
    pub(super) decl: Declaration,
    pub(super) cubin: PathBuf,
    pub(super) entry: String,
    /// The kernel's integer defines (a variant's, or the cubin's as the request gives them).
    pub(super) defines: Bindings,
    /// `variant `v`` or `cubin `path``, for messages.
    pub(super) target: String,
    pub(super) reference: Reference,
    pub(super) shape: String,
    pub(super) dims: Bindings,
    pub(super) recipe: String,
    pub(super) class: Option<String>,
}

/// A resolved run made ready to launch: its case and the expected outputs, its kernel,
/// its geometry, its buffers and parameters.
pub(super) struct Ready {
    pub(super) prepared: std::rc::Rc<super::warm::Prepared>,
    pub(super) kernel: std::rc::Rc<super::harness::Kernel>,
    pub(super) dims: super::driver::LaunchDims,
    pub(super) device_case: DeviceCase,
    pub(super) params: super::launch::Params,
}

impl Ready {
    pub(super) fn launch(&self) -> Launch<'_> {
        Launch {
            kernel: &self.kernel,
            dims: self.dims,
            params: &self.params,
        }
    }
}

/// Draw (or find) `r`'s case and the reference's outputs, load its kernel, and evaluate
/// its launch: a launch the declaration refuses (`requires`) or beyond this GPU's limits is
/// an error at its key in pipeline.yaml.
pub(super) fn ready(
    warm: &mut Warm,
    project: &Project,
    r: &Resolved,
    seed: u64,
) -> anyhow::Result<Ready> {
    let fail = |p: &Problem| anyhow::anyhow!("{}", project.render(p));
    let names: Vec<&str> = r.defines.keys().map(String::as_str).collect();
    let c = Compiled::new(&r.workload, &r.decl, &names).map_err(|problems| {
        let text: Vec<String> = problems.iter().map(|p| project.render(p)).collect();
        anyhow::anyhow!("{}", text.join("\n"))
    })?;
    let prepared = warm.prepared(&c, &r.reference, (&r.shape, &r.dims), &r.recipe, seed)?;
    let kernel = warm.kernel(&r.cubin, &r.entry, &r.decl.launch.globals)?;
    let mut values = r.defines.clone();
    values.extend(kernel.globals.clone());
    let what = format!("shape `{}` with {}", r.shape, r.target);
    if let Some(cond) = c.unmet(&r.dims, &values, &what).map_err(|p| fail(&p))? {
        bail!(
            "{} cannot run shape `{}`: its launch requires `{cond}`, which does not hold",
            r.target,
            r.shape
        );
    }
    let geometry = c.launch(&r.dims, &values, &what).map_err(|p| fail(&p))?;
    if let Some(e) = warm.session().limits.check(&geometry).into_iter().next() {
        let mut path = repro_pipeline::workload::problem::path(&r.workload, &["launch", e.key]);
        path.extend(e.index.map(|i| i.to_string()));
        return Err(fail(&Problem::at(
            path,
            format!(
                "the launch for {what} is beyond this GPU's limits: {}",
                e.message
            ),
            "make the launch smaller for this shape, or the shape smaller",
        )));
    }
    let device_case = DeviceCase::upload(&r.decl, &prepared.case, |i| r.decl.args[i].dtype)?;
    let params = device_case.params(&kernel_order(&r.decl));
    Ok(Ready {
        prepared,
        kernel,
        dims: launch_dims(&geometry),
        device_case,
        params,
    })
}

/// One checked run: every output judged against its gates, and the outputs the kernel
/// never wrote (each rendered at its argument in pipeline.yaml).
#[derive(Debug, Clone)]
pub struct Checked {
    pub checks: Vec<OutputCheck>,
    pub never_written: Vec<String>,
}

impl Checked {
    pub fn pass(&self) -> bool {
        self.never_written.is_empty() && self.checks.iter().all(OutputCheck::pass)
    }
}

/// Launch `ready` once with its outputs filled with the sentinel, and judge them.
pub(super) fn check(
    session: &Session,
    project: &Project,
    r: &Resolved,
    ready: &Ready,
) -> anyhow::Result<Checked> {
    let written = session.run_checked(&ready.launch(), &ready.device_case)?;
    let never_written = never_written(&r.workload, &r.decl, &written, &r.target)
        .iter()
        .map(|p| project.render(p))
        .collect();
    let outputs: Vec<Vec<f64>> = written
        .iter()
        .zip(r.decl.outputs())
        .map(|(bytes, a)| a.dtype.decode(bytes))
        .collect();
    let case = &ready.prepared.case;
    let checks = check_case(
        &r.decl,
        case,
        &outputs,
        &ready.prepared.expected,
        r.class.as_deref(),
    );
    Ok(Checked {
        checks,
        never_written,
    })
}

/// A cubin of a workload on one case, checked without timing: what `repro exec
/// --no-timing` does for a cubin, for callers that hold the declaration (the GPU tests).
pub struct Run<'a> {
    /// The pipeline file problems are placed in.
    pub file: &'a Path,
    pub workload: &'a str,
    pub decl: &'a Declaration,
    pub cubin: &'a Path,
    pub entry: &'a str,
    /// The integer defines the cubin was compiled with (its launch may read them).
    pub defines: Bindings,
    pub reference: Reference,
    pub shape: &'a str,
    pub recipe: &'a str,
    pub seed: u64,
    pub class: Option<&'a str>,
}

/// Check `run` on the session of `warm` (keeping its case and reference outputs there).
pub fn check_run(warm: &mut Warm, run: &Run) -> anyhow::Result<Checked> {
    let project = Project::load(run.file)?;
    let dims = run
        .decl
        .shapes
        .get(run.shape)
        .with_context(|| format!("no shape `{}` in workload `{}`", run.shape, run.workload))?
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let resolved = Resolved {
        workload: run.workload.to_string(),
        decl: run.decl.clone(),
        cubin: run.cubin.to_path_buf(),
        entry: run.entry.to_string(),
        defines: run.defines.clone(),
        target: format!("cubin `{}`", run.cubin.display()),
        reference: run.reference.clone(),
        shape: run.shape.to_string(),
        dims,
        recipe: run.recipe.to_string(),
        class: run.class.map(str::to_string),
    };
    let ready = ready(warm, &project, &resolved, run.seed)?;
    check(warm.session(), &project, &resolved, &ready)
}

fn measure(
    warm: &mut Warm,
    project: &Project,
    r: &Resolved,
    req: &ExecRequest,
    settings: &ExecSettings,
) -> anyhow::Result<BenchResult> {
    let ready = ready(warm, project, r, req.seed)?;
    let session = warm.session();
    let checked = check(session, project, r, &ready)?;
    let mut out = BenchResult::blank(
        &r.shape,
        r.dims.clone(),
        req.seed,
        (req.warmup, req.iters),
        RunStatus::Ok,
    );
    out.inputs = r.recipe.clone();
    out.device_index = Some(device_index(|k| std::env::var(k).ok(), settings.device));
    out.device_name = Some(warm.device_name().to_string());
    record_accuracy(&mut out, &checked.checks);
    if !checked.never_written.is_empty() {
        out.correctness_pass = Some(false);
        out.error = Some(checked.never_written.join("\n"));
    }
    if req.timing {
        let cfg = TimingConfig {
            method: req.method,
            warmup: req.warmup,
            iters: req.iters.max(1),
            l2: req.l2,
            max_cv: settings.max_cv,
            time_limit: Duration::from_secs_f64(settings.max_time.max(0.0)),
            target_sample_us: 100.0,
            fixed_batch: settings.launches_per_sample,
        };
        let timing = session.time(&ready.launch(), &cfg)?;
        let s = repro_base::stats::summarize(&timing.samples_us)
            .context("the timing samples were empty or not finite")?;
        out.timing_mode = Some(TimingMode {
            method: timing.method.into(),
            launches_per_sample: timing.launches_per_sample,
            l2: cfg.l2.name().into(),
            timer_overhead_us: timing.timer_overhead_us,
        });
        out.p50_us = Some(s.p50);
        out.p90_us = Some(s.p90);
        out.p99_us = Some(s.p99);
        out.mean_us = Some(s.mean);
        out.std_us = Some(s.std);
        out.min_us = Some(s.min);
        out.ci95_us = Some(s.ci95_half_width());
        out.cv = Some(s.cv);
        out.samples = Some(s.n as u32);
    }
    Ok(out)
}

/// The outputs `target` never wrote (every element still the sentinel), each a problem at
/// its argument in pipeline.yaml.
fn never_written(
    workload: &str,
    decl: &Declaration,
    written: &[Vec<u8>],
    target: &str,
) -> Vec<Problem> {
    decl.args
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role == repro_pipeline::workload::spec::Role::Output)
        .zip(written)
        .filter(|((_, a), bytes)| {
            let n = bytes.len() / a.dtype.size();
            n > 0 && a.dtype.count_sentinels(bytes) == n
        })
        .map(|((i, a), _)| {
            Problem::at(
                repro_pipeline::workload::problem::path(workload, &["args", &i.to_string()]),
                format!("output `{}` is never written by {target}: every element still holds the sentinel it was filled with", a.name),
                "check that the kernel stores to this parameter, that it is at this position of the signature, and that the launch covers the output",
            )
        })
        .collect()
}

/// The errors of every output into `out`: each output's under `outputs` when there are
/// several, the worst of each figure at the top (NaN when any output's is).
fn record_accuracy(out: &mut BenchResult, checks: &[OutputCheck]) {
    let per: Vec<OutputAccuracy> = checks
        .iter()
        .map(|c| OutputAccuracy {
            max_abs_err: c.accuracy.max_abs_err,
            mean_abs_err: c.accuracy.mean_abs_err,
            pct_bad: c.accuracy.pct_bad,
            rel_l2_err: c.accuracy.rel_l2_err,
            max_err_over_ref_std: c.accuracy.max_err_over_ref_std,
            nan_count: c.accuracy.nan_count,
            inf_count: c.accuracy.inf_count,
            correctness_pass: c.pass(),
        })
        .collect();
    let worst = |f: fn(&OutputAccuracy) -> f64| per.iter().map(f).fold(0f64, larger);
    out.max_abs_err = Some(worst(|a| a.max_abs_err));
    out.mean_abs_err = Some(worst(|a| a.mean_abs_err));
    out.pct_bad = Some(worst(|a| a.pct_bad));
    out.rel_l2_err = Some(worst(|a| a.rel_l2_err));
    out.max_err_over_ref_std = Some(worst(|a| a.max_err_over_ref_std));
    out.nan_count = Some(per.iter().map(|a| a.nan_count).sum());
    out.inf_count = Some(per.iter().map(|a| a.inf_count).sum());
    out.correctness_pass = Some(per.iter().all(|a| a.correctness_pass));
    if checks.len() > 1 {
        out.outputs = checks
            .iter()
            .zip(per)
            .map(|(c, a)| (c.output.clone(), a))
            .collect();
    }
}

/// The index of the GPU this process measures on, as the machine numbers it. Under Slurm
/// (`SLURM_JOB_ID` set) that is the node-local GPU Slurm gave the step (`SLURM_STEP_GPUS`,
/// else `SLURM_JOB_GPUS`, else a single `CUDA_VISIBLE_DEVICES` index), never
/// `REPRO_GPU_INDEX`, which is only the stage's concurrency slot there. Locally it is
/// `REPRO_GPU_INDEX` (the executor made that GPU the only visible one). Else `--device`.
fn device_index(env: impl Fn(&str) -> Option<String>, device: u32) -> u32 {
    let first_index =
        |var: &str| env(var).and_then(|v| v.split(',').next().and_then(|i| i.trim().parse().ok()));
    if env("SLURM_JOB_ID").is_some() {
        let single_visible = env("CUDA_VISIBLE_DEVICES")
            .filter(|v| !v.contains(','))
            .and_then(|v| v.trim().parse().ok());
        return first_index("SLURM_STEP_GPUS")
            .or_else(|| first_index("SLURM_JOB_GPUS"))
            .or(single_visible)
            .unwrap_or(device);
    }
    first_index(GPU_INDEX_ENV).unwrap_or(device)
}

/// `index.json` of a `--dump-inputs` folder: what a baseline script reads.
#[derive(Serialize)]
struct DumpIndex<'a> {
    workload: &'a str,
    primary: &'a str,
    /// The workload's default precision class (per-class thresholds of `gates` use it).
    #[serde(skip_serializing_if = "Option::is_none")]
    precision: Option<&'a str>,
    /// Output name → its gates, as declared.
    gates: &'a indexmap::IndexMap<String, repro_pipeline::workload::spec::OutputGates>,
    entries: Vec<DumpEntry>,
}

#[derive(Serialize)]
struct DumpEntry {
    shape: String,
    dims: Bindings,
    seed: u64,
    /// The input recipe.
    inputs: String,
    /// Whether bench times this (shape, recipe): the shape's first recipe only.
    timed: bool,
    /// Whether the absolute gates apply to this recipe.
    absolute_gates: bool,
    /// Folder (relative to the index) holding the case (`repro_pipeline::workload::case`).
    dir: String,
}

/// What `repro exec --dump-inputs` writes.
pub struct DumpRequest<'a> {
    pub dir: &'a Path,
    pub workload: Option<&'a str>,
    /// A shape name or dimensions; `None`: every shape of the workload.
    pub shape: Option<&'a str>,
    pub seed: Option<u64>,
    pub recipe: Option<&'a str>,
}

/// `repro exec --dump-inputs DIR`: write the cases of every shape × recipe × seed of a
/// workload of the pipeline at `file` (or only the `shape`, `seed`, `recipe` given), each a
/// folder in the layout of `repro_pipeline::workload::case`, with an `index.json`. Needs no GPU.
/// Returns how many cases it wrote.
pub fn dump_inputs(file: &Path, req: &DumpRequest) -> anyhow::Result<usize> {
    let project = Project::load(file)?;
    let exec = ExecRequest {
        target: ExecTarget::Cubin {
            path: PathBuf::new(),
            entry: String::new(),
            defines: Bindings::new(),
        },
        workload: req.workload.map(String::from),
        shape: String::new(),
        inputs: None,
        precision: None,
        seed: 0,
        warmup: 0,
        iters: 0,
        l2: super::timing::L2Mode::Warm,
        method: Method::Isolated,
        timing: false,
    };
    let (name, decl) = project.workload_of(&exec)?;
    let c = Compiled::new(name, decl, &[]).map_err(|p| {
        anyhow::anyhow!(
            "{}",
            p.iter()
                .map(|p| project.render(p))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let shapes: Vec<(String, Bindings)> = match req.shape {
        Some(s) if is_dims(s) => vec![(
            s.to_string(),
            parse_dims(s, &decl.dims).map_err(anyhow::Error::msg)?,
        )],
        Some(s) => vec![(
            s.to_string(),
            c.dims(s)
                .with_context(|| format!("no shape `{s}` in workload `{name}`"))?,
        )],
        None => decl
            .shapes
            .keys()
            .map(|s| (s.clone(), c.dims(s).expect("declared")))
            .collect(),
    };
    let seeds = req.seed.map_or_else(|| decl.seeds.clone(), |s| vec![s]);
    let mut entries = Vec::new();
    for (shape, dims) in shapes {
        let recipes = decl.recipes_of(&shape);
        let chosen: Vec<&str> = req.recipe.map_or_else(|| recipes.clone(), |r| vec![r]);
        for recipe in chosen {
            if !decl.recipe_names().contains(&recipe) {
                bail!(
                    "no input recipe `{recipe}` in workload `{name}` (recipes: {})",
                    decl.recipe_names().join(", ")
                );
            }
            for &seed in &seeds {
                let sub = format!("{}-{recipe}-seed{seed}", shape.replace([',', '='], "_"));
                let case = Case::generate_for(&c, &shape, dims.clone(), recipe, seed)
                    .map_err(|p| anyhow::anyhow!("{}", project.render(&p)))?;
                repro_pipeline::workload::case::write(&req.dir.join(&sub), name, decl, &case)?;
                entries.push(DumpEntry {
                    shape: shape.clone(),
                    dims: dims.clone(),
                    seed,
                    inputs: recipe.to_string(),
                    timed: recipes.first() == Some(&recipe),
                    absolute_gates: decl.recipes.get(recipe).is_none_or(|r| r.absolute_gates),
                    dir: sub,
                });
            }
        }
    }
    let index = DumpIndex {
        workload: name,
        primary: &decl.primary,
        precision: decl.precision.as_deref(),
        gates: &decl.gates,
        entries,
    };
    std::fs::create_dir_all(req.dir)
        .with_context(|| format!("cannot create {}", req.dir.display()))?;
    let path = req.dir.join("index.json");
    std::fs::write(&path, repro_schema::to_json_pretty(&index))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(index.entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dims_are_named_or_in_order_and_every_one_is_given() {
        let dims = names(&["rows", "hidden"]);
        let both = Bindings::from([("rows".into(), 4), ("hidden".into(), 1024)]);
        assert_eq!(parse_dims("rows=4,hidden=1024", &dims).unwrap(), both);
        assert_eq!(parse_dims("hidden=1024, rows=4", &dims).unwrap(), both);
        assert_eq!(parse_dims("4,1024", &dims).unwrap(), both);
        let err = parse_dims("4", &dims).unwrap_err();
        assert_eq!(err, "no value for `hidden`; expected the workload's dimensions as rows=N,hidden=N (or their values in that order)");
        assert!(parse_dims("rows=4,hiden=2", &dims)
            .unwrap_err()
            .starts_with("`hiden` is not a dimension"));
        assert!(parse_dims("rows=0,hidden=2", &dims)
            .unwrap_err()
            .starts_with("`rows=0` is not a positive integer"));
        assert!(parse_dims("1,2,3", &dims)
            .unwrap_err()
            .starts_with("3 values for 2 dimensions"));
        assert!(is_dims("2,8,512,64") && is_dims("rows=4,hidden=1024"));
        assert!(!is_dims("mission") && !is_dims("") && !is_dims("rows=x"));
    }

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn device_index_is_the_slot_locally_and_slurms_gpu_on_a_node() {
        assert_eq!(device_index(env_of(&[]), 0), 0);
        assert_eq!(device_index(env_of(&[(GPU_INDEX_ENV, "3")]), 0), 3);
        let slurm = [("SLURM_JOB_ID", "42"), (GPU_INDEX_ENV, "1")];
        assert_eq!(device_index(env_of(&slurm), 0), 0, "the slot is not a GPU");
        let step = [
            ("SLURM_JOB_ID", "42"),
            (GPU_INDEX_ENV, "1"),
            ("SLURM_STEP_GPUS", "5"),
            ("SLURM_JOB_GPUS", "4,5"),
        ];
        assert_eq!(device_index(env_of(&step), 0), 5);
        let job = [("SLURM_JOB_ID", "42"), ("SLURM_JOB_GPUS", "6,7")];
        assert_eq!(device_index(env_of(&job), 0), 6);
        let visible = [("SLURM_JOB_ID", "42"), ("CUDA_VISIBLE_DEVICES", "2")];
        assert_eq!(device_index(env_of(&visible), 0), 2);
    }

    #[test]
    fn root_is_the_pipeline_folder() {
        assert_eq!(root_of(Path::new("pipeline.yaml")), PathBuf::from("."));
        assert_eq!(
            root_of(Path::new("/p/q/pipeline.yaml")),
            PathBuf::from("/p/q")
        );
    }

    fn checks(figures: &[(f64, bool)]) -> Vec<OutputCheck> {
        figures
            .iter()
            .enumerate()
            .map(|(i, &(err, pass))| OutputCheck {
                output: format!("out{i}"),
                accuracy: repro_pipeline::workload::accuracy::Accuracy {
                    max_abs_err: err,
                    mean_abs_err: err / 10.0,
                    pct_bad: 0.0,
                    rel_l2_err: err / 100.0,
                    max_err_over_ref_std: err,
                    nan_count: i as u64,
                    inf_count: 0,
                },
                failed: if pass { vec![] } else { vec!["x".into()] },
            })
            .collect()
    }

    #[test]
    fn several_outputs_are_recorded_each_and_the_worst_at_the_top() {
        let mut one = BenchResult::blank("s", Bindings::new(), 0, (1, 1), RunStatus::Ok);
        record_accuracy(&mut one, &checks(&[(0.5, true)]));
        assert_eq!(
            (one.max_abs_err, one.correctness_pass),
            (Some(0.5), Some(true))
        );
        assert!(
            one.outputs.is_empty(),
            "one output: the top-level figures are its own"
        );
        let mut two = one.clone();
        record_accuracy(&mut two, &checks(&[(0.5, true), (0.25, false)]));
        assert_eq!((two.max_abs_err, two.nan_count), (Some(0.5), Some(1)));
        assert_eq!(two.correctness_pass, Some(false));
        assert_eq!(two.outputs.len(), 2);
        assert!(!two.outputs["out1"].correctness_pass && two.outputs["out0"].correctness_pass);
        // A figure one output could not measure is the worst: it is not dropped at the top.
        let mut nan = checks(&[(0.5, true), (0.25, false)]);
        nan[1].accuracy.rel_l2_err = f64::NAN;
        record_accuracy(&mut two, &nan);
        assert!(
            two.rel_l2_err.is_some_and(f64::is_nan),
            "{:?}",
            two.rel_l2_err
        );
        assert_eq!(two.max_abs_err, Some(0.5));
    }
}
