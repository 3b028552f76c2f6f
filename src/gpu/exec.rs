//! `repro exec`: one kernel, one shape, one seed → one JSON line (a `schema::BenchResult`).
//! Also `--dump-inputs` (the inputs as files, for the baseline script) and `--attributes`
//! (a function's driver attributes, for the build stage).

use super::client::{blank_result, GPU_INDEX_ENV};
use super::harness::{self, DeviceInputs, Kernel, Reference, Session};
use super::timing::{L2Mode, Method, TimingConfig};
use super::workload::{self, DumpEntry, DumpIndex, Inputs};
use crate::cli::GlobalArgs;
use crate::pipeline::{CorrectnessGates, Pipeline, Precision, Recipe, Shape};
use crate::schema::{BenchResult, TimingMode};
use anyhow::{bail, Context as _};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// A variant of pipeline.yaml: loads `.repro/cubins/<VARIANT>.cubin`.
    #[arg(long, conflicts_with_all = ["cubin", "dump_inputs"])]
    pub variant: Option<String>,
    /// A cubin file to load instead of a variant's (needs --entry).
    #[arg(long, requires = "entry")]
    pub cubin: Option<PathBuf>,
    /// The kernel's entry point in --cubin.
    #[arg(long, requires = "cubin")]
    pub entry: Option<String>,
    /// A shape name of pipeline.yaml (`workload.shapes`).
    #[arg(long, conflicts_with = "dims")]
    pub shape: Option<String>,
    /// An explicit shape, `B,H,S,D`.
    #[arg(long, value_parser = parse_dims)]
    pub dims: Option<Shape>,
    /// Input seed (with --dump-inputs: only this seed; default all of pipeline.yaml).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Input recipe: gaussian, outliers, sharp, sink or e4m3-edge (docs/guide/correctness.md).
    /// Default gaussian; with --dump-inputs: only this recipe (default every recipe
    /// `workload.inputs` lists for the shape).
    #[arg(long, value_parser = parse_recipe)]
    pub inputs: Option<Recipe>,
    /// The precision class whose correctness thresholds apply: fp16-pv or fp8-pv (default:
    /// the variant's declared class, else fp16-pv).
    #[arg(long, value_parser = parse_precision)]
    pub precision: Option<Precision>,
    /// Launches before timing.
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// Timing samples (the minimum; more are taken while the CV is above --max-cv).
    #[arg(long, default_value_t = 100)]
    pub iters: u32,
    /// Device index (among the visible ones).
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// `warm`, or `flush` L2 before each sample (outside the timed region).
    #[arg(long, default_value = "warm", value_parser = ["warm", "flush"])]
    pub l2: String,
    /// Check correctness only.
    #[arg(long)]
    pub no_timing: bool,
    /// Keep sampling while the coefficient of variation is above this...
    #[arg(long, default_value_t = 0.01)]
    pub max_cv: f64,
    /// ...for at most this many seconds.
    #[arg(long, default_value_t = 5.0)]
    pub max_time: f64,
    /// `isolated`: one launch per sample, queued behind a hold so the host is not timed,
    /// with the timer's own cost subtracted (what Nsight Compute's gpu__time_duration
    /// measures). `graph`: the mean launch of a CUDA graph of back-to-back launches (the
    /// throughput of a graph replay; 0.6-0.7 µs less per launch on a 22 µs kernel on an
    /// H100). Under ncu, which serializes launches, use `graph`.
    #[arg(long, default_value = "isolated", value_parser = Method::NAMES)]
    pub method: String,
    /// Graph method: launches per sample (default: enough for a sample of at least 100 µs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub launches_per_sample: Option<u32>,
    /// The reference cubin (default `.repro/cubins/reference.cubin`).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// Write the inputs of every shape × seed (or the chosen ones) into DIR, with an
    /// `index.json`, and exit. Needs no GPU.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["cubin", "no_timing", "attributes"])]
    pub dump_inputs: Option<PathBuf>,
    /// Print the driver's attributes of --cubin's --entry as JSON (registers, smem, ...).
    #[arg(long, requires = "cubin")]
    pub attributes: bool,
    /// Print the GPUs this process sees as a JSON list (`GpuInfo`) and exit: how stages
    /// discover the GPUs of a cluster node through the executor.
    #[arg(long, conflicts_with_all = ["variant", "cubin", "dump_inputs", "attributes"])]
    pub query_devices: bool,
}

fn parse_recipe(s: &str) -> Result<Recipe, String> {
    Recipe::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Recipe::ALL.iter().map(|r| r.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::parse(s).ok_or_else(|| "expected fp16-pv or fp8-pv".to_string())
}

pub(super) fn parse_dims(s: &str) -> Result<Shape, String> {
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

pub fn main(global: &GlobalArgs, args: &ExecArgs) -> anyhow::Result<i32> {
    if args.query_devices {
        // The driver's view, never a cache: the node running this is not the one that
        // wrote `.repro/cache/gpu.json`.
        let gpus = super::probe()?;
        println!("{}", serde_json::to_string(&gpus)?);
        return Ok(0);
    }
    if args.attributes {
        // Needs no pipeline: the build stage calls this for any cubin.
        let (Some(cubin), Some(entry)) = (&args.cubin, &args.entry) else {
            bail!("--attributes needs --cubin PATH --entry NAME");
        };
        super::driver_library_loads()?;
        let _session = Session::open(args.device)?;
        let attrs = harness::attributes(cubin, entry)?;
        println!("{}", serde_json::to_string(&attrs)?);
        return Ok(0);
    }
    let root = root_of(&global.file);
    let pipeline = if global.file.exists() {
        Some(load_pipeline(&global.file)?)
    } else {
        None
    };
    let need_pipeline = || {
        pipeline.as_ref().with_context(|| {
            format!(
                "{} not found (needed for --variant, --shape and --dump-inputs; or use --cubin/--entry and --dims)",
                global.file.display()
            )
        })
    };
    if let Some(dir) = &args.dump_inputs {
        return dump_inputs(need_pipeline()?, args, dir);
    }
    if args.launches_per_sample.is_some() && args.method != "graph" {
        bail!(
            "--launches-per-sample applies to --method graph; the {} method times one launch per sample\nhelp: add `--method graph`, or drop --launches-per-sample",
            args.method
        );
    }
    super::driver_library_loads()?;
    let (cubin, entry) = match (&args.variant, &args.cubin, &args.entry) {
        (Some(v), _, _) => variant_cubin(need_pipeline()?, &global.file, v)?,
        (None, Some(c), Some(e)) => (c.clone(), e.clone()),
        _ => bail!("say what to run: --variant NAME, or --cubin PATH --entry NAME"),
    };
    let (shape_name, shape) = match (&args.shape, args.dims) {
        (Some(name), _) => (name.clone(), lookup_shape(need_pipeline()?, name)?),
        (None, Some(d)) => (format!("{},{},{},{}", d.B, d.H, d.S, d.D), d),
        (None, None) => bail!("say which shape: --shape NAME or --dims B,H,S,D"),
    };
    let gates = pipeline
        .as_ref()
        .and_then(|p| p.gates.correctness.clone())
        .unwrap_or_default();
    let (reference_cubin, reference_entry) =
        reference(pipeline.as_ref(), &root, args.reference.as_deref());
    let precision = args
        .precision
        .unwrap_or_else(|| match (&args.variant, &pipeline) {
            (Some(v), Some(p)) => p.precision_of(v),
            _ => Precision::default(),
        });
    let result = run(&Run {
        cubin: &cubin,
        entry: &entry,
        reference_cubin: &reference_cubin,
        reference_entry: &reference_entry,
        shape_name: &shape_name,
        shape,
        gates: &gates,
        precision,
        args,
    })?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(0)
}

/// A variant's cubin (`.repro/cubins/<VARIANT>.cubin` beside `file`) and entry point.
pub(super) fn variant_cubin(
    p: &Pipeline,
    file: &Path,
    v: &str,
) -> anyhow::Result<(PathBuf, String)> {
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
    Ok((
        root_of(file)
            .join(".repro/cubins")
            .join(format!("{v}.cubin")),
        kernel.entry.clone(),
    ))
}

/// The reference kernel's cubin (`chosen`, else `.repro/cubins/reference.cubin`) and entry.
pub(super) fn reference(
    pipeline: Option<&Pipeline>,
    root: &Path,
    chosen: Option<&Path>,
) -> (PathBuf, String) {
    let entry = pipeline
        .and_then(|p| p.workload.as_ref())
        .and_then(|w| w.reference.as_ref())
        .map_or("sdpa_reference_f32".to_string(), |r| r.entry.clone());
    let cubin = chosen.map_or_else(
        || root.join(".repro/cubins/reference.cubin"),
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

struct Run<'a> {
    cubin: &'a Path,
    entry: &'a str,
    reference_cubin: &'a Path,
    reference_entry: &'a str,
    shape_name: &'a str,
    shape: Shape,
    gates: &'a CorrectnessGates,
    precision: Precision,
    args: &'a ExecArgs,
}

fn run(r: &Run) -> anyhow::Result<BenchResult> {
    let args = r.args;
    let seed = args.seed.unwrap_or(0);
    let recipe = args.inputs.unwrap_or(Recipe::Gaussian);
    let inputs = Inputs::generate(r.shape, recipe, seed);
    let session = Session::open(args.device)?;
    let io = DeviceInputs::upload(&inputs)?;
    let reference = Reference::load(r.reference_cubin, r.reference_entry)
        .context("loading the reference kernel")?;
    let expected = session.run_reference(&reference, &io)?;
    let kernel = Kernel::load(r.cubin, r.entry, session.max_dynamic_smem)?;
    let accuracy = session.check(&kernel, &io, &expected, r.gates.max_abs_err)?;

    let mut out = blank_result(r.shape_name, &r.shape, seed, args.warmup, args.iters, "ok");
    out.inputs = recipe.name().to_string();
    out.device_index = Some(device_index(|k| std::env::var(k).ok(), args.device));
    out.device_name = Some(super::driver::Device::get(args.device)?.name()?);
    out.max_abs_err = Some(accuracy.max_abs_err);
    out.mean_abs_err = Some(accuracy.mean_abs_err);
    out.pct_bad = Some(accuracy.pct_bad);
    out.rel_l2_err = Some(accuracy.rel_l2_err);
    out.max_err_over_ref_std = Some(accuracy.max_err_over_ref_std);
    out.nan_count = Some(accuracy.nan_count);
    out.inf_count = Some(accuracy.inf_count);
    out.correctness_pass = Some(accuracy.passes(r.gates, r.precision, recipe == Recipe::Gaussian));
    if !args.no_timing {
        let cfg = TimingConfig {
            method: Method::parse(&args.method).context("--method must be isolated or graph")?,
            warmup: args.warmup,
            iters: args.iters.max(1),
            l2: L2Mode::parse(&args.l2).context("--l2 must be warm or flush")?,
            max_cv: args.max_cv,
            time_limit: Duration::from_secs_f64(args.max_time.max(0.0)),
            target_sample_us: 100.0,
            fixed_batch: args.launches_per_sample,
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

fn dump_inputs(p: &Pipeline, args: &ExecArgs, dir: &Path) -> anyhow::Result<i32> {
    let w = p
        .workload
        .as_ref()
        .context("pipeline.yaml has no `workload:` section")?;
    let shapes: Vec<(String, Shape)> = match (&args.shape, args.dims) {
        (Some(name), _) => vec![(name.clone(), lookup_shape(p, name)?)],
        (None, Some(d)) => vec![(format!("{},{},{},{}", d.B, d.H, d.S, d.D), d)],
        (None, None) => w.shapes.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    let seeds = args.seed.map_or_else(|| w.seeds.clone(), |s| vec![s]);
    let gates = p.gates.correctness.clone().unwrap_or_default();
    let mut entries = Vec::new();
    for (name, shape) in &shapes {
        let recipes = w.recipes(name);
        let chosen = args.inputs.map_or_else(|| recipes.clone(), |r| vec![r]);
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
    eprintln!(
        "wrote {} input set(s) to {}",
        index.entries.len(),
        dir.display()
    );
    Ok(0)
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
