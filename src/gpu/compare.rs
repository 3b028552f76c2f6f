//! `repro compare A B`: is A faster than B on this GPU, by how much, and how sure is that.
//! Both kernels are loaded into one process on one GPU, checked against the reference on
//! the same inputs, then timed by the isolated method interleaved sample by sample
//! ([`super::timing::time_interleaved`]); the answer is the ratio of their medians with a
//! bootstrap 95% confidence interval ([`crate::stats::ratio`]), as hyperfine says
//! "A ran 1.09 ± 0.01 times faster than B".

use super::exec::{device_arch, load_pipeline, lookup_shape, reference, root_of, variant_entry};
use super::harness::{DeviceInputs, Kernel, Reference, Session};
use super::timing::{L2Mode, Method, TimingConfig};
use super::workload::Inputs;
use crate::engine::runner::UsageError;
use crate::pipeline::{Pipeline, Precision, Recipe, Shape};
use crate::stats::ratio::{self, Ratio};
use anyhow::Context as _;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub name: String,
    pub cubin: String,
    pub entry: String,
    pub p50_us: f64,
    pub min_us: f64,
    pub p90_us: f64,
    pub correct: bool,
    pub max_abs_err: f64,
    pub samples_us: Vec<f64>,
}

/// What `repro compare` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub device: String,
    pub device_index: u32,
    pub shape: String,
    pub dims: Shape,
    pub seed: u64,
    pub method: &'static str,
    pub l2: String,
    pub timer_overhead_us: f64,
    pub a: Side,
    pub b: Side,
    pub ratio: Ratio,
    pub verdict: ratio::Verdict,
    pub sentence: String,
}

/// What to compare, and how (`repro compare`'s arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRequest {
    /// A variant of pipeline.yaml or a `.cubin` path.
    pub a: String,
    pub b: String,
    /// Entry point of a side given as a `.cubin` (default: the one all kernels share).
    pub entry: Option<String>,
    /// A shape name (default: the primary shape) or explicit dimensions.
    pub shape: Option<String>,
    pub dims: Option<Shape>,
    pub seed: u64,
    pub warmup: u32,
    /// Pairs of samples, one launch of each side per pair.
    pub pairs: u32,
    pub l2: L2Mode,
    pub device: u32,
    /// The reference cubin (default `.repro/cubins/reference.cubin`).
    pub reference: Option<PathBuf>,
}

/// `repro compare`: check both sides against the reference, time them interleaved, and
/// compare their medians. Bad names are [`UsageError`]s.
pub fn compare(file: &Path, args: &CompareRequest) -> anyhow::Result<Comparison> {
    let pipeline = if file.exists() {
        Some(load_pipeline(file)?)
    } else {
        None
    };
    let root = root_of(file);
    let a = resolve(pipeline.as_ref(), file, &args.a, args.entry.as_deref())?;
    let b = resolve(pipeline.as_ref(), file, &args.b, args.entry.as_deref())?;
    let (shape_name, shape) = pick_shape(pipeline.as_ref(), args)?;
    super::driver_library_loads()?;
    // The build's cubins (a variant's, the default reference) are those of this GPU's arch.
    let builds_needed = a.1.is_none() || b.1.is_none() || args.reference.is_none();
    let arch = match &pipeline {
        Some(p) if builds_needed => Some(device_arch(p, file, args.device)?),
        _ => None,
    };
    let located = |(name, cubin, entry): Named| -> Located {
        let cubin = cubin.unwrap_or_else(|| {
            root.join(crate::stages::build::cubin_path(
                &name,
                arch.as_deref().unwrap_or_default(),
            ))
        });
        (name, cubin, entry)
    };
    let c = measure(&Plan {
        pipeline: pipeline.as_ref(),
        root: &root,
        arch: arch.as_deref(),
        sides: [located(a), located(b)],
        shape_name,
        shape,
        args,
    })?;
    Ok(c)
}

/// A side as named on the command line: `(name, cubin, entry)`, the cubin `None` for a
/// variant (the build's cubin of the GPU's architecture, found once the GPU is known).
type Named = (String, Option<PathBuf>, String);
/// A side with its cubin.
type Located = (String, PathBuf, String);

/// A variant name or a `.cubin` path.
fn resolve(
    pipeline: Option<&Pipeline>,
    file: &Path,
    what: &str,
    entry: Option<&str>,
) -> anyhow::Result<Named> {
    if what.ends_with(".cubin") {
        let entry = match (entry, pipeline.map(shared_entry)) {
            (Some(e), _) => e.to_string(),
            (None, Some(Some(e))) => e,
            _ => {
                return Err(UsageError(format!(
                    "`{what}` is a cubin: say its entry point with --entry NAME"
                ))
                .into())
            }
        };
        return Ok((what.to_string(), Some(PathBuf::from(what)), entry));
    }
    let Some(p) = pipeline else {
        return Err(UsageError(format!(
            "`{what}` is not a .cubin path, and there is no {} to find a variant `{what}` in",
            file.display()
        ))
        .into());
    };
    let entry = variant_entry(p, file, what).map_err(|e| UsageError(format!("{e:#}")))?;
    Ok((what.to_string(), None, entry))
}

/// The entry point all kernels of the pipeline share, if they do.
fn shared_entry(p: &Pipeline) -> Option<String> {
    let mut entries = p.kernels.values().map(|k| k.entry.as_str());
    let first = entries.next()?;
    entries.all(|e| e == first).then(|| first.to_string())
}

fn pick_shape(
    pipeline: Option<&Pipeline>,
    args: &CompareRequest,
) -> anyhow::Result<(String, Shape)> {
    if let Some(d) = args.dims {
        return Ok((format!("{},{},{},{}", d.B, d.H, d.S, d.D), d));
    }
    let p = pipeline.ok_or_else(|| {
        UsageError("say which shape: --dims B,H,S,D (there is no pipeline.yaml)".into())
    })?;
    let name = match &args.shape {
        Some(n) => n.clone(),
        None => p
            .workload
            .as_ref()
            .map(|w| w.primary.clone())
            .ok_or_else(|| UsageError("say which shape: --shape NAME or --dims B,H,S,D".into()))?,
    };
    let shape = lookup_shape(p, &name).map_err(|e| UsageError(format!("{e:#}")))?;
    Ok((name, shape))
}

struct Plan<'a> {
    pipeline: Option<&'a Pipeline>,
    root: &'a Path,
    /// The architecture of the build's cubins this GPU runs, when a pipeline names them.
    arch: Option<&'a str>,
    sides: [Located; 2],
    shape_name: String,
    shape: Shape,
    args: &'a CompareRequest,
}

/// The precision class whose thresholds judge a side: its variant's, or fp16-pv for a cubin.
fn precision_of(plan: &Plan, name: &str) -> Precision {
    plan.pipeline
        .map_or_else(Precision::default, |p| p.precision_of(name))
}

fn measure(plan: &Plan) -> anyhow::Result<Comparison> {
    let args = plan.args;
    let gates = plan
        .pipeline
        .and_then(|p| p.gates.correctness.clone())
        .unwrap_or_default();
    let session = Session::open(args.device)?;
    // Timed on the gaussian recipe, where every gate applies.
    let io = DeviceInputs::upload(&Inputs::generate(plan.shape, Recipe::Gaussian, args.seed))?;
    let (ref_cubin, ref_entry) = reference(
        plan.pipeline,
        plan.root,
        plan.arch,
        args.reference.as_deref(),
    );
    let reference =
        Reference::load(&ref_cubin, &ref_entry).context("loading the reference kernel")?;
    let expected = session.run_reference(&reference, &io)?;
    let mut kernels = Vec::new();
    let mut accuracy = Vec::new();
    for (name, cubin, entry) in &plan.sides {
        let k = Kernel::load(cubin, entry, session.max_dynamic_smem)
            .with_context(|| format!("loading `{name}` ({})", cubin.display()))?;
        accuracy.push(session.check(&k, &io, &expected, gates.max_abs_err)?);
        kernels.push(k);
    }
    let cfg = TimingConfig {
        method: Method::Isolated,
        warmup: args.warmup,
        iters: args.pairs,
        l2: args.l2,
        max_cv: 0.0,
        time_limit: Duration::ZERO,
        target_sample_us: 100.0,
        fixed_batch: None,
    };
    let timing = session.time_pair(&kernels[0], &kernels[1], &io, &cfg)?;
    let side = |i: usize, samples: Vec<f64>| -> anyhow::Result<Side> {
        let (name, cubin, entry) = &plan.sides[i];
        let s = crate::stats::summarize(&samples)
            .context("the timing samples were empty or not finite")?;
        Ok(Side {
            name: name.clone(),
            cubin: cubin.display().to_string(),
            entry: entry.clone(),
            p50_us: s.p50,
            min_us: s.min,
            p90_us: s.p90,
            correct: accuracy[i].passes(&gates, precision_of(plan, name), true),
            max_abs_err: accuracy[i].max_abs_err,
            samples_us: samples,
        })
    };
    let a = side(0, timing.a)?;
    let b = side(1, timing.b)?;
    let r = ratio::ratio_of_medians(&a.samples_us, &b.samples_us, ratio::RESAMPLES, ratio::SEED)
        .context("the medians must be positive to compare them")?;
    Ok(Comparison {
        device: super::driver::Device::get(args.device)?.name()?,
        device_index: args.device,
        shape: plan.shape_name.clone(),
        dims: plan.shape,
        seed: args.seed,
        method: "isolated",
        l2: args.l2.name().into(),
        timer_overhead_us: timing.timer_overhead_us,
        verdict: r.verdict(),
        sentence: r.sentence(&a.name, &b.name),
        a,
        b,
        ratio: r,
    })
}

/// The comparison as text: what ran where, each side, then hyperfine's sentence.
pub fn render_text(c: &Comparison) -> String {
    let d = &c.dims;
    let width = c.a.name.len().max(c.b.name.len());
    let mut out = format!(
        "{} (GPU {}), shape {} (B={} H={} S={} D={}), seed {}\n\
         {} pairs, interleaved (A B, B A, …), isolated timing (timer's own {:.2} µs subtracted), L2 {}\n\n",
        c.device,
        c.device_index,
        c.shape,
        d.B,
        d.H,
        d.S,
        d.D,
        c.seed,
        c.ratio.pairs,
        c.timer_overhead_us,
        c.l2
    );
    for (tag, s) in [("A", &c.a), ("B", &c.b)] {
        let check = if s.correct {
            format!("✅ correct (max abs err {:.6})", s.max_abs_err)
        } else {
            format!("❌ INCORRECT (max abs err {:.6})", s.max_abs_err)
        };
        out.push_str(&format!(
            "  {tag}  {:width$}  p50 {:>9.3} µs   min {:>9.3}   p90 {:>9.3}   {check}\n",
            s.name, s.p50_us, s.min_us, s.p90_us
        ));
    }
    out.push_str(&format!(
        "\n{}\n  ratio of medians {:.4} (B ÷ A); 95% CI by a paired bootstrap of the {} pairs ({} resamples)\n",
        c.sentence, c.ratio.ratio, c.ratio.pairs, c.ratio.resamples
    ));
    for s in [&c.a, &c.b].into_iter().filter(|s| !s.correct) {
        out.push_str(&format!(
            "warning: `{}` fails the correctness check; its timing is not a result\n",
            s.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(name: &str, p50: f64, correct: bool) -> Side {
        Side {
            name: name.into(),
            cubin: format!(".repro/cubins/{name}.cubin"),
            entry: "sdpa_fp8_fwd".into(),
            p50_us: p50,
            min_us: p50 * 0.99,
            p90_us: p50 * 1.01,
            correct,
            max_abs_err: 0.000159,
            samples_us: vec![],
        }
    }

    fn comparison(b_correct: bool) -> Comparison {
        let r = Ratio {
            pairs: 1000,
            median_a: 22.06,
            median_b: 24.10,
            ratio: 24.10 / 22.06,
            ci95_low: 1.088,
            ci95_high: 1.097,
            resamples: 2000,
        };
        Comparison {
            device: "NVIDIA H100 80GB HBM3".into(),
            device_index: 0,
            shape: "mission".into(),
            dims: Shape {
                B: 2,
                H: 8,
                S: 512,
                D: 64,
            },
            seed: 0,
            method: "isolated",
            l2: "warm".into(),
            timer_overhead_us: 1.28,
            a: side("stage5-ws-p1", 22.06, true),
            b: side("stage2-baseline", 24.10, b_correct),
            verdict: r.verdict(),
            sentence: r.sentence("stage5-ws-p1", "stage2-baseline"),
            ratio: r,
        }
    }

    #[test]
    fn text_names_the_device_the_method_each_side_and_the_ratio() {
        let text = render_text(&comparison(true));
        assert_eq!(
            text,
            "NVIDIA H100 80GB HBM3 (GPU 0), shape mission (B=2 H=8 S=512 D=64), seed 0\n\
             1000 pairs, interleaved (A B, B A, …), isolated timing (timer's own 1.28 µs subtracted), L2 warm\n\
             \n  \
             A  stage5-ws-p1     p50    22.060 µs   min    21.839   p90    22.281   ✅ correct (max abs err 0.000159)\n  \
             B  stage2-baseline  p50    24.100 µs   min    23.859   p90    24.341   ✅ correct (max abs err 0.000159)\n\
             \n\
             stage5-ws-p1 ran 1.092× faster than stage2-baseline (95% CI 1.088–1.097)\n  \
             ratio of medians 1.0925 (B ÷ A); 95% CI by a paired bootstrap of the 1000 pairs (2000 resamples)\n"
        );
    }

    #[test]
    fn an_incorrect_side_is_flagged() {
        let text = render_text(&comparison(false));
        assert!(text.contains("❌ INCORRECT"), "{text}");
        assert!(
            text.ends_with(
                "warning: `stage2-baseline` fails the correctness check; its timing is not a result\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_shared_entry_point_is_found_only_when_all_kernels_agree() {
        let p: Pipeline = serde_yaml::from_str(
            "version: 1\nkernels:\n  a: {source: a.cu, entry: f}\n  b: {source: b.cu, entry: f}\nstages: {}\n",
        )
        .unwrap();
        assert_eq!(shared_entry(&p).as_deref(), Some("f"));
        let q: Pipeline = serde_yaml::from_str(
            "version: 1\nkernels:\n  a: {source: a.cu, entry: f}\n  b: {source: b.cu, entry: g}\nstages: {}\n",
        )
        .unwrap();
        assert_eq!(shared_entry(&q), None);
    }
}
