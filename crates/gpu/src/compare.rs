//! `repro compare A B`: is A faster than B on this GPU, by how much, and how sure is that.
//! Both kernels are loaded into one process on one GPU, checked against the reference on
//! the same inputs, then timed by the isolated method interleaved sample by sample
//! ([`super::timing::time_interleaved`]); the answer is the ratio of their medians with a
//! bootstrap 95% confidence interval ([`repro_base::stats::ratio`]), as hyperfine says
//! "A ran 1.09 ± 0.01 times faster than B".

use super::client::{ExecRequest, ExecTarget};
use super::exec::{check, ready, Project};
use super::timing::{L2Mode, Method, TimingConfig};
use super::warm::Warm;
use anyhow::Context as _;
use repro_base::errors::UsageError;
use repro_base::{stats::ratio, stats::ratio::Ratio};
use repro_pipeline::workload::accuracy::larger;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::Pipeline;
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
    pub workload: String,
    pub shape: String,
    pub dims: Bindings,
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
    /// Entry point of a side given as a `.cubin` (default: the variant side's, else the one
    /// all kernels share).
    pub entry: Option<String>,
    /// The workload (default: the variant side's, or the pipeline's only one).
    pub workload: Option<String>,
    /// The defines a side given as a `.cubin` was compiled with (its launch may read them).
    pub defines: Bindings,
    /// A shape name or dimensions (default: the workload's primary shape).
    pub shape: Option<String>,
    pub seed: u64,
    pub warmup: u32,
    /// Pairs of samples, one launch of each side per pair.
    pub pairs: u32,
    pub l2: L2Mode,
    pub device: u32,
    /// The reference cubin (default the build's, of the workload and this GPU's arch).
    pub reference: Option<PathBuf>,
}

/// `repro compare`: check both sides against the reference on the same case (the shape's
/// first recipe), time them interleaved, and compare their medians. Bad names are
/// [`UsageError`]s.
pub fn compare(file: &Path, args: &CompareRequest) -> anyhow::Result<Comparison> {
    let project = Project::load(file)?;
    // A `.cubin` side compared with a variant runs as the variant does, unless told otherwise.
    let partner = [&args.a, &args.b]
        .into_iter()
        .find(|w| !w.ends_with(".cubin"));
    let partner_entry = match (project.loaded(), partner) {
        (Some(p), Some(v)) => super::exec::variant_entry(p, file, v).ok(),
        _ => None,
    };
    let side = |what: &str| target(project.loaded(), file, what, args, partner_entry.as_deref());
    let (a, b) = (side(&args.a)?, side(&args.b)?);
    let settings = super::exec::ExecSettings {
        device: args.device,
        max_cv: 0.0,
        max_time: 0.0,
        launches_per_sample: None,
        reference: args.reference.clone(),
    };
    let usage = |e: anyhow::Error| anyhow::Error::from(UsageError(format!("{e:#}")));
    let workload = match (&args.workload, partner) {
        (Some(w), _) => Some(w.clone()),
        (None, Some(v)) => {
            let variant = exec_request(args, ExecTarget::Variant(v.clone()), None, String::new());
            Some(project.workload_of(&variant).map_err(usage)?.0.to_string())
        }
        (None, None) => None,
    };
    let request =
        |target: ExecTarget, shape: String| exec_request(args, target, workload.clone(), shape);
    let shape = match &args.shape {
        Some(s) => s.clone(),
        None => {
            let (_, decl) = project
                .workload_of(&request(a.clone(), String::new()))
                .map_err(usage)?;
            decl.primary.clone()
        }
    };
    super::driver_library_loads()?;
    let ra = project
        .resolve(&request(a, shape.clone()), &settings)
        .map_err(usage)?;
    let rb = project
        .resolve(&request(b, shape), &settings)
        .map_err(usage)?;
    if ra.workload != rb.workload {
        return Err(UsageError(format!(
            "`{}` runs workload `{}` and `{}` runs `{}`: compare kernels of one workload",
            args.a, ra.workload, args.b, rb.workload
        ))
        .into());
    }
    let mut warm = Warm::open(args.device)?;
    let sides = [(&args.a, &ra), (&args.b, &rb)];
    let mut readied = Vec::new();
    let mut checked = Vec::new();
    for (name, r) in sides {
        let ready = ready(&mut warm, &project, r, args.seed, true)
            .with_context(|| format!("loading `{name}` ({})", r.cubin.display()))?;
        checked.push(check(warm.session(), &project, r, &ready)?);
        readied.push(ready);
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
    let timing = warm
        .session()
        .time_pair(&readied[0].launch(), &readied[1].launch(), &cfg)?;
    let side = |i: usize, samples: Vec<f64>| -> anyhow::Result<Side> {
        let (name, r) = sides[i];
        let s = repro_base::stats::summarize(&samples)
            .context("the timing samples were empty or not finite")?;
        Ok(Side {
            name: name.clone(),
            cubin: r.cubin.display().to_string(),
            entry: r.entry.clone(),
            p50_us: s.p50,
            min_us: s.min,
            p90_us: s.p90,
            correct: checked[i].pass(),
            max_abs_err: checked[i]
                .checks
                .iter()
                .map(|c| c.accuracy.max_abs_err)
                .fold(0.0, larger),
            samples_us: samples,
        })
    };
    let a = side(0, timing.a)?;
    let b = side(1, timing.b)?;
    let r = ratio::ratio_of_medians(&a.samples_us, &b.samples_us, ratio::RESAMPLES, ratio::SEED)
        .context("the medians must be positive to compare them")?;
    Ok(Comparison {
        device: warm.device_name().to_string(),
        device_index: args.device,
        workload: ra.workload.clone(),
        shape: ra.shape.clone(),
        dims: ra.dims.clone(),
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

/// One side's timed run, as `args` asks for it.
fn exec_request(
    args: &CompareRequest,
    target: ExecTarget,
    workload: Option<String>,
    shape: String,
) -> ExecRequest {
    ExecRequest {
        target,
        workload,
        shape,
        inputs: None,
        precision: None,
        seed: args.seed,
        warmup: args.warmup,
        iters: args.pairs,
        l2: args.l2,
        method: Method::Isolated,
        timing: true,
        profile: None,
        check: true,
    }
}

/// A variant name or a `.cubin` path as a run's target. A cubin's entry point: `--entry`,
/// else `partner_entry` (the other side's, a variant), else the one all kernels share.
fn target(
    pipeline: Option<&Pipeline>,
    file: &Path,
    what: &str,
    args: &CompareRequest,
    partner_entry: Option<&str>,
) -> anyhow::Result<ExecTarget> {
    if what.ends_with(".cubin") {
        let shared = pipeline.and_then(shared_entry);
        let entry = match (&args.entry, partner_entry, shared) {
            (Some(e), _, _) => e.clone(),
            (None, Some(e), _) => e.to_string(),
            (None, None, Some(e)) => e,
            _ => {
                return Err(UsageError(format!(
                    "`{what}` is a cubin: say its entry point with --entry NAME"
                ))
                .into())
            }
        };
        return Ok(ExecTarget::Cubin {
            path: PathBuf::from(what),
            entry,
            defines: args.defines.clone(),
        });
    }
    let Some(p) = pipeline else {
        return Err(UsageError(format!(
            "`{what}` is not a .cubin path, and there is no {} to find a variant `{what}` in",
            file.display()
        ))
        .into());
    };
    super::exec::variant_entry(p, file, what).map_err(|e| UsageError(format!("{e:#}")))?;
    Ok(ExecTarget::Variant(what.to_string()))
}

/// The entry point all kernels of the pipeline share, if they do.
fn shared_entry(p: &Pipeline) -> Option<String> {
    let mut entries = p.kernels.values().map(|k| k.entry.as_str());
    let first = entries.next()?;
    entries.all(|e| e == first).then(|| first.to_string())
}

/// The comparison as text: what ran where, each side, then hyperfine's sentence.
pub fn render_text(c: &Comparison) -> String {
    let dims: Vec<String> = c.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let width = c.a.name.len().max(c.b.name.len());
    let mut out = format!(
        "{} (GPU {}), workload {}, shape {} ({}), seed {}\n\
         {} pairs, interleaved (A B, B A, …), isolated timing (timer's own {:.2} µs subtracted), L2 {}\n\n",
        c.device,
        c.device_index,
        c.workload,
        c.shape,
        dims.join(" "),
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
            entry: "rmsnorm_fwd".into(),
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
            workload: "rmsnorm".into(),
            shape: "mission".into(),
            dims: Bindings::from([("hidden".into(), 4096), ("rows".into(), 4096)]),
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
            "NVIDIA H100 80GB HBM3 (GPU 0), workload rmsnorm, shape mission (hidden=4096 rows=4096), seed 0\n\
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
