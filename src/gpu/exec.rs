//! `repro exec`: one kernel, one shape, one seed → one JSON line (a `schema::BenchResult`).
//! Also `--dump-inputs` (the inputs as files, for the baseline script) and `--attributes`
//! (a function's driver attributes, for the build stage).

use super::client::{blank_result, ExecRequest, ExecTarget, GPU_INDEX_ENV};
use super::harness::{self, DeviceInputs, Session};
use super::timing::{Method, TimingConfig};
use super::warm::Warm;
use super::workload::{self, DumpEntry, DumpIndex, Inputs};
use crate::pipeline::{CorrectnessGates, Pipeline, Precision, Recipe, Shape};
use crate::schema::{BenchResult, TimingMode};
use anyhow::{bail, Context as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `B,H,S,D` as a shape.
pub fn parse_dims(s: &str) -> Result<Shape, String> {
    let v: Vec<u32> = s
        .split(',')
        .map(|p| p.trim().parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("expected B,H,S,D as four positive integers: {e}"))?;
    match v[..] {
        [b, h, s, d] if v.iter().all(|&x| x > 0) => Ok(Shape {
            B: b,
            H: h,
            S: s,
            D: d,
        }),
        _ => Err(format!(
            "expected B,H,S,D as four positive integers, got `{s}`"
        )),
    }
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
pub const HARNESS_REVISION: u32 = 1;

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
    /// The reference cubin (default the build's `.repro/cubins/reference.<ARCH>.cubin`).
    pub reference: Option<PathBuf>,
}

/// `repro exec --attributes`: a function's driver attributes (needs no pipeline; the build
/// stage asks for any cubin).
pub fn attributes(cubin: &Path, entry: &str, device: u32) -> anyhow::Result<harness::Attributes> {
    super::driver_library_loads()?;
    let _session = Session::open(device)?;
    harness::attributes(cubin, entry)
}

/// The pipeline at `file`, if there is one.
fn optional_pipeline(file: &Path) -> anyhow::Result<Option<Pipeline>> {
    file.exists().then(|| load_pipeline(file)).transpose()
}

fn need_pipeline<'a>(pipeline: &'a Option<Pipeline>, file: &Path) -> anyhow::Result<&'a Pipeline> {
    pipeline.as_ref().with_context(|| {
        format!(
            "{} not found (needed for --variant, --shape and --dump-inputs; or use --cubin/--entry and --dims)",
            file.display()
        )
    })
}

/// The project a `repro exec` process serves: its pipeline.yaml, read once, and the
/// architecture of the build's cubins this process's GPU loads, found once.
pub struct Project {
    file: PathBuf,
    root: PathBuf,
    pipeline: Option<Pipeline>,
    arch: std::cell::OnceCell<String>,
}

impl Project {
    /// Read the pipeline at `file`, if there is one (a `--cubin` run needs none).
    pub fn load(file: &Path) -> anyhow::Result<Project> {
        Ok(Project {
            file: file.to_path_buf(),
            root: root_of(file),
            pipeline: optional_pipeline(file)?,
            arch: std::cell::OnceCell::new(),
        })
    }

    fn pipeline(&self) -> anyhow::Result<&Pipeline> {
        need_pipeline(&self.pipeline, &self.file)
    }

    /// The architecture of the build's cubins that GPU `device` loads.
    fn arch(&self, p: &Pipeline, device: u32) -> anyhow::Result<&str> {
        if self.arch.get().is_none() {
            let _ = self.arch.set(device_arch(p, &self.file, device)?);
        }
        Ok(self.arch.get().expect("set above"))
    }

    /// What `req` loads and how it is judged.
    fn resolve(&self, req: &ExecRequest, settings: &ExecSettings) -> anyhow::Result<Resolved> {
        // The build's cubins are per architecture: a variant, or the default reference, is
        // the one of this GPU's.
        let builds_needed =
            matches!(req.target, ExecTarget::Variant(_)) || settings.reference.is_none();
        let arch = match &self.pipeline {
            Some(p) if builds_needed => Some(self.arch(p, settings.device)?),
            _ => None,
        };
        let (cubin, entry) = match &req.target {
            ExecTarget::Variant(v) => {
                variant_cubin(self.pipeline()?, &self.file, v, arch.unwrap_or_default())?
            }
            ExecTarget::Cubin { path, entry } => (path.clone(), entry.clone()),
        };
        let shape = match parse_dims(&req.shape) {
            Ok(d) => d,
            Err(_) => lookup_shape(self.pipeline()?, &req.shape)?,
        };
        let pipeline = self.pipeline.as_ref();
        let gates = pipeline
            .and_then(|p| p.gates.correctness.clone())
            .unwrap_or_default();
        let reference = reference(pipeline, &self.root, arch, settings.reference.as_deref());
        let precision = req
            .precision
            .unwrap_or_else(|| match (&req.target, pipeline) {
                (ExecTarget::Variant(v), Some(p)) => p.precision_of(v),
                _ => Precision::default(),
            });
        Ok(Resolved {
            cubin,
            entry,
            reference,
            shape,
            gates,
            precision,
        })
    }
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

    /// `repro exec`: load `req.target`, check it against the reference on `req`'s inputs,
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
        measure(warm, &resolved, req, &self.settings)
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
    crate::stages::build::arch::for_gpu(gpu, &p.arch).map_err(|e| anyhow::anyhow!(e.at(file)))
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
        root_of(file).join(crate::stages::build::cubin_path(v, arch)),
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

/// The reference kernel's cubin (`chosen`, else the build's `.repro/cubins/reference.<ARCH>.cubin`)
/// and entry.
pub fn reference(
    pipeline: Option<&Pipeline>,
    root: &Path,
    arch: Option<&str>,
    chosen: Option<&Path>,
) -> (PathBuf, String) {
    let entry = pipeline
        .and_then(|p| p.workload.as_ref())
        .and_then(|w| w.reference.as_ref())
        .map_or("sdpa_reference_f32".to_string(), |r| r.entry.clone());
    let cubin = chosen.map_or_else(
        || {
            let name = crate::stages::build::REFERENCE;
            root.join(match arch {
                Some(arch) => crate::stages::build::cubin_path(name, arch),
                None => PathBuf::from(format!(".repro/cubins/{name}.cubin")),
            })
        },
        Path::to_path_buf,
    );
    (cubin, entry)
}

pub(super) fn lookup_shape(p: &Pipeline, name: &str) -> anyhow::Result<Shape> {
    let w = p
        .workload
        .as_ref()
        .context("pipeline.yaml has no `workload:` section with shapes")?;
    w.shapes.get(name).copied().with_context(|| {
        format!(
            "no shape `{name}` under workload.shapes (shapes: {})",
            w.shapes.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// A request resolved against the project: what to load, on what, judged how.
struct Resolved {
    cubin: PathBuf,
    entry: String,
    /// The reference kernel's cubin and entry.
    reference: (PathBuf, String),
    shape: Shape,
    gates: CorrectnessGates,
    precision: Precision,
}

fn measure(
    warm: &mut Warm,
    r: &Resolved,
    req: &ExecRequest,
    settings: &ExecSettings,
) -> anyhow::Result<BenchResult> {
    let (seed, recipe) = (req.seed, req.inputs);
    let (ref_cubin, ref_entry) = &r.reference;
    let prepared = warm.prepared((ref_cubin, ref_entry), r.shape, recipe, seed)?;
    let io = DeviceInputs::upload(&prepared.inputs)?;
    let kernel = warm.kernel(&r.cubin, &r.entry)?;
    let session = warm.session();
    let accuracy = session.check(&kernel, &io, &prepared.expected, r.gates.max_abs_err)?;

    let mut out = blank_result(&req.shape, &r.shape, seed, req.warmup, req.iters, "ok");
    out.inputs = recipe.name().to_string();
    out.device_index = Some(device_index(|k| std::env::var(k).ok(), settings.device));
    out.device_name = Some(warm.device_name().to_string());
    out.max_abs_err = Some(accuracy.max_abs_err);
    out.mean_abs_err = Some(accuracy.mean_abs_err);
    out.pct_bad = Some(accuracy.pct_bad);
    out.rel_l2_err = Some(accuracy.rel_l2_err);
    out.max_err_over_ref_std = Some(accuracy.max_err_over_ref_std);
    out.nan_count = Some(accuracy.nan_count);
    out.inf_count = Some(accuracy.inf_count);
    out.correctness_pass = Some(accuracy.passes(&r.gates, r.precision, recipe == Recipe::Gaussian));
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
        let timing = session.time(&kernel, &io, &cfg)?;
        let s = crate::stats::summarize(&timing.samples_us)
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

/// `repro exec --dump-inputs DIR`: write the inputs of every shape × recipe × seed of the
/// pipeline at `file` (or only the `shape`, `seed`, `recipe` given) with an `index.json`.
/// Needs no GPU. Returns how many input sets it wrote.
pub fn dump_inputs(
    file: &Path,
    dir: &Path,
    shape: Option<&str>,
    seed: Option<u64>,
    recipe: Option<Recipe>,
) -> anyhow::Result<usize> {
    let pipeline = optional_pipeline(file)?;
    let p = need_pipeline(&pipeline, file)?;
    let w = p
        .workload
        .as_ref()
        .context("pipeline.yaml has no `workload:` section")?;
    let shapes: Vec<(String, Shape)> = match shape {
        Some(name) => vec![(
            name.to_string(),
            parse_dims(name).or_else(|_| lookup_shape(p, name))?,
        )],
        None => w.shapes.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    let seeds = seed.map_or_else(|| w.seeds.clone(), |s| vec![s]);
    let gates = p.gates.correctness.clone().unwrap_or_default();
    let mut entries = Vec::new();
    for (name, shape) in &shapes {
        let recipes = w.recipes(name);
        let chosen = recipe.map_or_else(|| recipes.clone(), |r| vec![r]);
        for recipe in chosen {
            for &seed in &seeds {
                let sub = format!("{}-{recipe}-seed{seed}", name.replace(',', "x"));
                workload::dump(&Inputs::generate(*shape, recipe, seed), &dir.join(&sub))?;
                entries.push(DumpEntry {
                    shape: name.clone(),
                    B: shape.B,
                    H: shape.H,
                    S: shape.S,
                    D: shape.D,
                    seed,
                    inputs: recipe.name().to_string(),
                    timed: recipes.first() == Some(&recipe),
                    softmax_scale: shape.softmax_scale(),
                    dir: sub,
                });
            }
        }
    }
    let index = DumpIndex {
        op: "sdpa_fp8",
        layout: "row-major [B, H, S, D], little-endian; scales [B*H]",
        max_abs_err: gates.max_abs_err,
        mean_abs_err: gates.mean_abs_err,
        max_pct_bad: gates.max_pct_bad,
        max_err_over_ref_std: gates.max_err_over_ref_std.get(Precision::Fp16Pv),
        max_rel_l2_err: gates.max_rel_l2_err.get(Precision::Fp16Pv),
        primary: Some(w.primary.clone()),
        entries,
    };
    let path = dir.join("index.json");
    std::fs::write(&path, crate::schema::to_json_pretty(&index))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(index.entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_parse() {
        assert_eq!(
            parse_dims("2,8,512,64").unwrap(),
            Shape {
                B: 2,
                H: 8,
                S: 512,
                D: 64
            }
        );
        assert!(parse_dims("2,8,512").is_err());
        assert!(parse_dims("2,0,512,64").is_err());
        assert!(parse_dims("a,b,c,d").is_err());
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
}
