//! The `bench` stage kind: every variant × shape × seed through `repro exec` child jobs
//! (one per GPU at a time, with a timeout each), then speedups against the control and the
//! baselines, and the correctness and performance gates. Writes
//! `artifacts/bench/<variant>.json` (schema::BenchFile).
//!
//! Options (besides the common keys): `warmup` (20), `iters` (100), `shapes` (default all
//! of `workload.shapes`), `l2` (`warm` | `flush`), `method` (`isolated` | `graph`, see
//! `gpu::timing`; baselines timed by another method get no speedup), `baselines` (names of
//! `artifacts/bench/baselines/<name>.json` to compare with; default every file there),
//! `allow_mixed_gpus` (false: the stage fails when its records come from more than one GPU
//! model). The common `timeout:` key is the limit for each `repro exec` (default 120 s).
//! Every record names the node and GPU that measured it.

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::executor::Executor;
use crate::gpu::client::{blank_result, exec_job, result_from_outcome, ExecRequest, ExecTarget};
use crate::gpu::timing::Method;
use crate::pipeline::{Pipeline, Precision, Recipe, Shape, StageSpec};
use crate::schema::{to_json_pretty, BenchFile, BenchResult, GateResult};
use crate::stages::gpu_nodes::{self, OneGpuModel, ALLOW_MIXED_GPUS};
use anyhow::Context as _;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Mutex};
use std::time::Duration;

pub struct BenchStage;

/// Where baseline records are read from (the shipped `baselines` stage writes them).
pub const BASELINE_DIR: &str = "artifacts/bench/baselines";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The stage's resolved options.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    warmup: u32,
    iters: u32,
    shapes: Vec<String>,
    l2: String,
    /// `repro exec --method`.
    method: String,
    timeout: Duration,
    /// `None`: every baseline file present.
    baselines: Option<Vec<String>>,
    /// Accept results measured on more than one GPU model.
    allow_mixed_gpus: bool,
}

fn option_error(key: &str, message: impl Into<String>) -> OptionError {
    OptionError {
        path: vec![key.to_string()],
        message: message.into(),
    }
}

/// `90`, `90s`, `10m`, `2h` → a duration.
fn parse_duration(v: &serde_yaml::Value) -> Option<Duration> {
    if let Some(n) = v.as_u64() {
        return Some(Duration::from_secs(n));
    }
    let s = v.as_str()?.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

fn options(spec: &StageSpec, pipeline: &Pipeline) -> Result<Options, OptionError> {
    let all_shapes: Vec<String> = pipeline
        .workload
        .as_ref()
        .map(|w| w.shapes.keys().cloned().collect())
        .unwrap_or_default();
    let mut o = Options {
        warmup: 20,
        iters: 100,
        shapes: all_shapes.clone(),
        l2: "warm".into(),
        method: "isolated".into(),
        timeout: DEFAULT_TIMEOUT,
        baselines: None,
        allow_mixed_gpus: false,
    };
    if pipeline.workload.is_none() {
        return Err(OptionError {
            path: vec![],
            message: "the bench stage needs a `workload:` section with shapes".into(),
        });
    }
    let names = |key: &str, v: &serde_yaml::Value| -> Result<Vec<String>, OptionError> {
        v.as_sequence()
            .and_then(|s| s.iter().map(|x| x.as_str().map(String::from)).collect())
            .ok_or_else(|| option_error(key, "expected a list of names, e.g. [mission, long]"))
    };
    for (k, v) in &spec.options {
        let key = k.as_str().unwrap_or("");
        match key {
            "warmup" | "iters" => {
                let n = v
                    .as_u64()
                    .filter(|&n| n <= u32::MAX as u64 && (key == "warmup" || n > 0))
                    .ok_or_else(|| option_error(key, "expected a positive integer"))?;
                if key == "warmup" {
                    o.warmup = n as u32
                } else {
                    o.iters = n as u32
                }
            }
            "shapes" => {
                o.shapes = names(key, v)?;
                if let Some(bad) = o.shapes.iter().find(|s| !all_shapes.contains(s)) {
                    return Err(option_error(
                        key,
                        format!(
                            "no shape `{bad}` under workload.shapes (shapes: {})",
                            all_shapes.join(", ")
                        ),
                    ));
                }
            }
            "l2" => match v.as_str() {
                Some(m @ ("warm" | "flush")) => o.l2 = m.into(),
                _ => return Err(option_error(key, "expected `warm` or `flush`")),
            },
            "method" => match v.as_str().filter(|m| Method::parse(m).is_some()) {
                Some(m) => o.method = m.into(),
                None => return Err(option_error(key, "expected `isolated` or `graph`")),
            },
            "baselines" => o.baselines = Some(names(key, v)?),
            ALLOW_MIXED_GPUS => {
                o.allow_mixed_gpus =
                    gpu_nodes::parse_allow_mixed(v).map_err(|m| option_error(key, m))?
            }
            _ => {
                return Err(option_error(
                    key,
                    format!("unknown option `{key}` for a bench stage (expected warmup, iters, shapes, l2, method, baselines, {ALLOW_MIXED_GPUS})"),
                ))
            }
        }
    }
    if let Some(t) = &spec.timeout {
        o.timeout = parse_duration(t).ok_or_else(|| {
            option_error(
                "timeout",
                "expected seconds or a duration like 90s, 10m, 2h",
            )
        })?;
    }
    Ok(o)
}

/// The baseline names to read: the declared ones, or every `*.json` in the baseline folder.
fn baseline_names(o: &Options, root: &Path) -> Vec<String> {
    if let Some(names) = &o.baselines {
        return names.clone();
    }
    let mut found: Vec<String> = std::fs::read_dir(root.join(BASELINE_DIR))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".json").map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

fn cubin_path(name: &str) -> PathBuf {
    PathBuf::from(".repro/cubins").join(format!("{name}.cubin"))
}

impl StageKind for BenchStage {
    fn kind(&self) -> &'static str {
        "bench"
    }

    fn validate(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<(), OptionError> {
        options(spec, pipeline).map(|_| ())
    }

    fn outputs(&self, _name: &str, _spec: &StageSpec, pipeline: &Pipeline) -> Outputs {
        pipeline
            .variants
            .keys()
            .map(|v| PathBuf::from(format!("artifacts/bench/{v}.json")))
            .collect()
    }

    fn inputs(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs> {
        let o = options(spec, pipeline).map_err(|e| anyhow::anyhow!(e.message))?;
        let mut files: Vec<PathBuf> = pipeline.variants.keys().map(|v| cubin_path(v)).collect();
        files.push(cubin_path("reference"));
        for b in baseline_names(&o, root) {
            let f = PathBuf::from(BASELINE_DIR).join(format!("{b}.json"));
            if root.join(&f).exists() {
                files.push(f);
            }
        }
        let w = pipeline.workload.as_ref();
        let params = BTreeMap::from([
            ("warmup".into(), o.warmup.to_string()),
            ("iters".into(), o.iters.to_string()),
            ("shapes".into(), o.shapes.join(",")),
            ("l2".into(), o.l2.clone()),
            ("method".into(), o.method.clone()),
            ("seeds".into(), format!("{:?}", w.map(|w| &w.seeds))),
            ("inputs".into(), format!("{:?}", w.map(|w| &w.inputs))),
            (
                "precision".into(),
                pipeline
                    .variants
                    .keys()
                    .map(|v| format!("{v}={}", pipeline.precision_of(v).name()))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "primary".into(),
                w.map(|w| w.primary.clone()).unwrap_or_default(),
            ),
            (
                "control".into(),
                pipeline.control.clone().unwrap_or_default(),
            ),
            ("gates".into(), serde_json::to_string(&pipeline.gates)?),
        ]);
        let hardware = Some(gpu_nodes::hardware(pipeline, spec, root));
        Ok(StageInputs {
            files,
            params,
            hardware,
            ..StageInputs::default()
        })
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let o = options(ctx.spec, ctx.pipeline).map_err(|e| anyhow::anyhow!(e.message))?;
        let out_dir = ctx.staging.join("artifacts/bench");
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let gpus = match gpu_nodes::stage_gpus(ctx) {
            Ok(g) => g,
            Err(no) => {
                for (name, spec) in &ctx.pipeline.variants {
                    let file = BenchFile {
                        name: name.clone(),
                        kind: "variant".into(),
                        status: "skipped".into(),
                        reason: Some(no.0.clone()),
                        defines: defines_of(&spec.defines),
                        nvcc_version: None,
                        precision: None,
                        results: vec![],
                        gates: vec![],
                    };
                    write(&out_dir, &file)?;
                }
                return Ok(StageOutcome::Skipped {
                    reason: no.0,
                    fix: gpu_nodes::no_gpu_fix(ctx.executor, "run the bench stage"),
                });
            }
        };
        // A variant that did not compile has no cubin: it fails alone, with the reason.
        let (built, unbuilt): (Vec<&String>, Vec<&String>) = ctx
            .pipeline
            .variants
            .keys()
            .partition(|v| ctx.root.join(cubin_path(v)).is_file());
        let mut failed_gates = Vec::new();
        for name in unbuilt {
            let file = BenchFile {
                name: name.clone(),
                kind: "variant".into(),
                status: "failed".into(),
                reason: Some(format!(
                    "not built: {} is missing; the build stage's record artifacts/build/{name}.json says why",
                    cubin_path(name).display()
                )),
                defines: defines_of(&ctx.pipeline.variants[name].defines),
                nvcc_version: None,
                precision: None,
                results: vec![],
                gates: vec![],
            };
            write(&out_dir, &file)?;
            failed_gates.push(format!("{name}: not built"));
        }
        let jobs = plan(ctx.pipeline, &built, &o);
        let slots = gpu_nodes::gpu_slots(ctx.executor, &gpus);
        let results = run_jobs(ctx, &o, &jobs, slots)?;
        OneGpuModel::new(o.allow_mixed_gpus)
            .admit(&results)
            .map_err(anyhow::Error::msg)?;

        let mut by_variant: BTreeMap<String, Vec<BenchResult>> = BTreeMap::new();
        for (job, r) in jobs.iter().zip(results) {
            by_variant.entry(job.variant.clone()).or_default().push(r);
        }
        let mut baselines: Vec<(String, Option<BenchFile>)> = Vec::new();
        for b in baseline_names(&o, ctx.root) {
            let file = match read_baseline(ctx.root, &b, &o.method) {
                Ok(file) => Some(file),
                Err(why) => {
                    append_to_log(ctx.log, &format!("no speedups vs {b}: {why}"))?;
                    None
                }
            };
            baselines.push((b, file));
        }
        let control = ctx.pipeline.control.clone();
        let control_results = control.as_ref().and_then(|c| by_variant.get(c)).cloned();
        for results in by_variant.values_mut() {
            for (name, file) in &baselines {
                attach_speedup(
                    results,
                    &format!("speedup_vs_{name}"),
                    file.as_ref().map(|f| &f.results[..]),
                );
            }
            if let Some(c) = &control_results {
                attach_speedup(results, "speedup_vs_control", Some(c));
            }
        }

        let correctness = ctx.pipeline.gates.correctness.clone().unwrap_or_default();
        let mut gates: BTreeMap<String, Vec<GateResult>> = by_variant
            .iter()
            .map(|(v, rs)| {
                let precision = ctx.pipeline.precision_of(v);
                (v.clone(), correctness_gates(rs, &correctness, precision))
            })
            .collect();
        let primary = ctx
            .pipeline
            .workload
            .as_ref()
            .map(|w| w.primary.clone())
            .unwrap_or_default();
        for (variant, gate) in performance_gates(
            &by_variant,
            control.as_deref(),
            &primary,
            ctx.pipeline,
            &baselines,
        ) {
            gates.entry(variant).or_default().push(gate);
        }

        for (name, results) in by_variant {
            let spec = &ctx.pipeline.variants[&name];
            let file_gates = gates.remove(&name).unwrap_or_default();
            failed_gates.extend(
                file_gates
                    .iter()
                    .filter(|g| !g.pass)
                    .map(|g| format!("{name}: {} {}", g.gate, g.subject)),
            );
            let file = BenchFile {
                status: if results.iter().all(|r| r.status == "ok") {
                    "ok"
                } else {
                    "failed"
                }
                .into(),
                nvcc_version: crate::stages::build::recorded_nvcc(ctx.root, &name),
                precision: Some(ctx.pipeline.precision_of(&name).name().into()),
                name,
                kind: "variant".into(),
                reason: None,
                defines: defines_of(&spec.defines),
                results,
                gates: file_gates,
            };
            write(&out_dir, &file)?;
        }
        Ok(if failed_gates.is_empty() {
            StageOutcome::Passed
        } else {
            let more = failed_gates.len().saturating_sub(3);
            let mut summary = failed_gates
                .into_iter()
                .take(3)
                .collect::<Vec<_>>()
                .join("; ");
            if more > 0 {
                summary.push_str(&format!(" (and {more} more)"));
            }
            StageOutcome::GateFailed(summary)
        })
    }
}

fn defines_of(d: &crate::pipeline::Defines) -> BTreeMap<String, String> {
    d.iter()
        .map(|(k, v)| {
            let s = match v {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            (k.clone(), s)
        })
        .collect()
}

fn write(dir: &Path, file: &BenchFile) -> anyhow::Result<()> {
    let path = dir.join(format!("{}.json", file.name));
    std::fs::write(&path, to_json_pretty(file))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A baseline to compare with: one that ran, timed by the variants' `method` (a speedup
/// across methods would compare different things). `Err`: why not.
fn read_baseline(root: &Path, name: &str, method: &str) -> Result<BenchFile, String> {
    let path = root.join(BASELINE_DIR).join(format!("{name}.json"));
    let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let file: BenchFile = serde_json::from_slice(&text)
        .map_err(|e| format!("{} is not a bench file: {e}", path.display()))?;
    if file.status == "skipped" {
        return Err(format!(
            "it was skipped ({})",
            file.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    let family = |m: &str| if m == "isolated" { "isolated" } else { "graph" };
    match file.results.iter().find_map(|r| r.timing_mode.as_ref()) {
        Some(t) if family(&t.method) != method => Err(format!(
            "it was timed by the {} method and the variants by the {method} method; \
             give both the same `--method`",
            family(&t.method)
        )),
        _ => Ok(file),
    }
}

fn append_to_log(log: &Path, line: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open the stage log {}", log.display()))?;
    writeln!(f, "{line}").with_context(|| format!("cannot write {}", log.display()))
}

/// One `repro exec` of the bench stage.
#[derive(Debug, Clone, PartialEq)]
struct BenchJob {
    variant: String,
    shape: String,
    inputs: Recipe,
    seed: u64,
    /// Only a shape's first recipe is timed; the others are checked for correctness.
    timed: bool,
}

/// Every (variant, shape, recipe, seed), variant-major.
fn plan(p: &Pipeline, variants: &[&String], o: &Options) -> Vec<BenchJob> {
    let Some(w) = p.workload.as_ref() else {
        return vec![];
    };
    let mut jobs = Vec::new();
    for &v in variants {
        for s in &o.shapes {
            for (i, recipe) in w.recipes(s).into_iter().enumerate() {
                for &seed in &w.seeds {
                    jobs.push(BenchJob {
                        variant: v.clone(),
                        shape: s.clone(),
                        inputs: recipe,
                        seed,
                        timed: i == 0,
                    });
                }
            }
        }
    }
    jobs
}

/// Run every job, one at a time per GPU slot (one thread each), and return the results in
/// job order. A job the executor could not even start is a `failed` record too.
fn run_jobs(
    ctx: &RunCtx,
    o: &Options,
    jobs: &[BenchJob],
    slots: u32,
) -> anyhow::Result<Vec<BenchResult>> {
    let shapes = &ctx
        .pipeline
        .workload
        .as_ref()
        .context("no workload")?
        .shapes;
    let queue = Mutex::new(jobs.iter().enumerate().collect::<VecDeque<_>>());
    let executor: &dyn Executor = ctx.executor;
    // Children read the project's pipeline.yaml (as the profile stage's do).
    let pipeline_file = ctx.pipeline_file.to_path_buf();
    let pipeline_file = pipeline_file.as_path();
    let (cancel, repro_exe, root, log) = (ctx.cancel, ctx.repro_exe, ctx.root, ctx.log);
    let (tx, rx) = mpsc::channel::<(usize, BenchResult)>();
    let mut results: Vec<Option<BenchResult>> = vec![None; jobs.len()];
    std::thread::scope(|scope| {
        for gpu in 0..slots {
            let tx = tx.clone();
            let queue = &queue;
            scope.spawn(move || loop {
                if cancel.load(Ordering::SeqCst) {
                    return;
                }
                let Some((i, job)) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let shape = shapes[&job.shape];
                let req = ExecRequest {
                    target: ExecTarget::Variant(job.variant.clone()),
                    shape: job.shape.clone(),
                    inputs: job.inputs,
                    precision: None,
                    seed: job.seed,
                    warmup: o.warmup,
                    iters: o.iters,
                    l2: o.l2.as_str().into(),
                    method: o.method.as_str().into(),
                    timing: job.timed,
                };
                let mut job = exec_job(repro_exe, pipeline_file, root, &req, Some(gpu), o.timeout);
                job.log = Some(log.to_path_buf());
                let result = match executor.run(&job, cancel) {
                    Ok(outcome) => result_from_outcome(&req, &shape, &outcome),
                    Err(err) => {
                        failed(&req, &shape, format!("could not start repro exec: {err:#}"))
                    }
                };
                if tx.send((i, result)).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for (done, (i, r)) in rx.iter().enumerate() {
            let j = &jobs[i];
            (ctx.progress)(&format!(
                "{}/{} {} {} {} seed {}: {}",
                done + 1,
                jobs.len(),
                j.variant,
                j.shape,
                j.inputs,
                j.seed,
                describe(&r)
            ));
            results[i] = Some(r);
        }
    });
    if ctx.cancel.load(Ordering::SeqCst) {
        anyhow::bail!("interrupted");
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every job reports"))
        .collect())
}

fn failed(req: &ExecRequest, shape: &Shape, reason: String) -> BenchResult {
    let mut r = blank_result(&req.shape, shape, req.seed, req.warmup, req.iters, "failed");
    r.error = Some(reason);
    r
}

fn describe(r: &BenchResult) -> String {
    let verdict = |pass: bool| if pass { "✓" } else { "✗ incorrect" };
    match (&r.status[..], r.p50_us, r.correctness_pass) {
        ("ok", Some(p50), Some(pass)) => format!("{p50:.2} µs {}", verdict(pass)),
        ("ok", None, Some(pass)) => format!("checked {}", verdict(pass)),
        _ => format!("{} ({})", r.status, r.error.as_deref().unwrap_or("")),
    }
}

/// Set `key` = other p50 / this p50 on every record with a matching (shape, seed) in
/// `other`; `None` (n/a) where either side is missing or did not run.
fn attach_speedup(results: &mut [BenchResult], key: &str, other: Option<&[BenchResult]>) {
    for r in results.iter_mut() {
        let theirs = other.and_then(|o| {
            o.iter()
                .find(|b| {
                    b.shape == r.shape
                        && b.inputs == r.inputs
                        && b.seed == r.seed
                        && b.status == "ok"
                })
                .and_then(|b| b.p50_us)
        });
        let speedup = match (theirs, r.p50_us) {
            (Some(t), Some(mine)) if r.status == "ok" && mine > 0.0 => Some(t / mine),
            _ => None,
        };
        r.speedups.insert(key.to_string(), speedup);
    }
}

/// Correctness gates per (shape, recipe, seed): the absolute ones on gaussian runs, the
/// normalized ones on every run at the thresholds of the variant's precision class. A run
/// that did not complete fails `correctness.completed`.
pub fn correctness_gates(
    results: &[BenchResult],
    g: &crate::pipeline::CorrectnessGates,
    precision: Precision,
) -> Vec<GateResult> {
    let mut gates = Vec::new();
    for r in results {
        let subject = r.run_subject();
        let measured = (r.max_abs_err, r.mean_abs_err, r.pct_bad, r.status.as_str());
        let (Some(max), Some(mean), Some(bad), "ok") = measured else {
            gates.push(GateResult::at_least(
                "correctness.completed",
                &subject,
                0.0,
                1.0,
            ));
            continue;
        };
        let mut at_most = |gate: &str, measured: f64, threshold: f64| {
            gates.push(GateResult::at_most(gate, &subject, measured, threshold))
        };
        let nonfinite = r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0);
        at_most("correctness.nonfinite", nonfinite as f64, 0.0);
        // The absolute gates are in the output's units, set for the gaussian recipe.
        if r.inputs == Recipe::Gaussian.name() {
            at_most("correctness.max_abs_err", max, g.max_abs_err);
            at_most("correctness.mean_abs_err", mean, g.mean_abs_err);
            at_most("correctness.max_pct_bad", bad, g.max_pct_bad);
        }
        // Records from before the normalized errors existed carry none: not gated.
        if let Some(e) = r.max_err_over_ref_std {
            let t = g.max_err_over_ref_std.get(precision);
            at_most("correctness.max_err_over_ref_std", e, t);
        }
        if let Some(e) = r.rel_l2_err {
            at_most(
                "correctness.max_rel_l2_err",
                e,
                g.max_rel_l2_err.get(precision),
            );
        }
    }
    gates
}

/// A variant's time on the primary shape: the median over seeds of its p50s (the timed
/// recipe's), `None` unless every primary record, of every recipe, ran and passed
/// correctness.
fn primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(results.iter().filter(|r| r.shape == primary))
}

/// A baseline's time on the primary shape: as [`primary_time`], but only its timed records
/// must pass. PyTorch computes on fp16 copies of K and V, another precision than any
/// variant's; its errors on the other recipes are recorded, not held against its speed.
fn baseline_primary_time(results: &[BenchResult], primary: &str) -> Option<f64> {
    primary_time_of(
        results
            .iter()
            .filter(|r| r.shape == primary && (r.p50_us.is_some() || r.status != "ok")),
    )
}

fn primary_time_of<'a>(records: impl Iterator<Item = &'a BenchResult>) -> Option<f64> {
    let rs: Vec<&BenchResult> = records.collect();
    if rs.is_empty()
        || rs
            .iter()
            .any(|r| r.status != "ok" || r.correctness_pass != Some(true))
    {
        return None;
    }
    let p50s: Vec<f64> = rs.iter().filter_map(|r| r.p50_us).collect();
    crate::stats::summarize(&p50s).map(|s| s.p50)
}

/// The performance gates, each with the variant whose file records it: the best
/// non-control variant against the control, and the best variant against each baseline
/// with a declared minimum (a skipped or missing baseline is not evaluated: n/a).
fn performance_gates(
    by_variant: &BTreeMap<String, Vec<BenchResult>>,
    control: Option<&str>,
    primary: &str,
    p: &Pipeline,
    baselines: &[(String, Option<BenchFile>)],
) -> Vec<(String, GateResult)> {
    let Some(perf) = p.gates.performance.as_ref() else {
        return vec![];
    };
    let times: BTreeMap<&str, f64> = by_variant
        .iter()
        .filter_map(|(v, rs)| primary_time(rs, primary).map(|t| (v.as_str(), t)))
        .collect();
    let best_of = |candidates: &mut dyn Iterator<Item = (&&str, &f64)>| {
        candidates
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(v, t)| (v.to_string(), *t))
    };
    let mut gates = Vec::new();
    if let (Some(min), Some(control)) = (perf.min_speedup_vs_control, control) {
        let best = best_of(&mut times.iter().filter(|(v, _)| **v != control));
        let owner = best.as_ref().map_or(control.to_string(), |b| b.0.clone());
        let (measured, subject) = match (times.get(control), &best) {
            (Some(c), Some((v, t))) => (c / t, format!("{v} vs {control} on {primary}")),
            (None, _) => (
                0.0,
                format!("control {control} has no correct {primary} result"),
            ),
            (_, None) => (
                0.0,
                format!("no correct variant besides {control} on {primary}"),
            ),
        };
        gates.push((
            owner,
            GateResult::at_least(
                "performance.min_speedup_vs_control",
                &subject,
                measured,
                min,
            ),
        ));
    }
    for (name, min) in &perf.min_speedup_vs_baseline {
        let Some(Some(file)) = baselines.iter().find(|(b, _)| b == name).map(|(_, f)| f) else {
            continue;
        };
        let Some(base) = baseline_primary_time(&file.results, primary) else {
            continue;
        };
        if let Some((v, t)) = best_of(&mut times.iter()) {
            let subject = format!("{v} vs {name} on {primary}");
            gates.push((
                v,
                GateResult::at_least(
                    &format!("performance.min_speedup_vs_{name}"),
                    &subject,
                    base / t,
                    *min,
                ),
            ));
        }
    }
    gates
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small:   {B: 1, H: 1, S: 32, D: 64}
    mission: {B: 2, H: 8, S: 512, D: 64}
  primary: mission
  seeds: [0, 1]
kernels:
  k: {source: kernels/k.cu, entry: sdpa_fp8_fwd}
variants:
  ctrl: {kernel: k}
  fast: {kernel: k, defines: {X: 1}}
  faster-but-wrong: {kernel: k, defines: {X: 2}}
control: ctrl
gates:
  correctness: {max_abs_err: 0.06, mean_abs_err: 0.02, max_pct_bad: 1.0}
  performance: {min_speedup_vs_control: 1.10, min_speedup_vs_baseline: {torch-sdpa-best: 1.0}}
stages:
  bench: {uses: bench, warmup: 5, iters: 50, shapes: [mission], l2: flush, timeout: 30s}
"#;

    fn pipeline() -> Pipeline {
        serde_yaml::from_str(YAML).unwrap()
    }

    /// A recorded-style result: `p50` µs, correct or not.
    fn rec(shape: &str, seed: u64, p50: f64, max_err: f64) -> BenchResult {
        let s = Shape {
            B: 2,
            H: 8,
            S: 512,
            D: 64,
        };
        let mut r = blank_result(shape, &s, seed, 20, 100, "ok");
        r.p50_us = Some(p50);
        r.max_abs_err = Some(max_err);
        r.mean_abs_err = Some(max_err / 10.0);
        r.pct_bad = Some(if max_err > 0.06 { 5.0 } else { 0.0 });
        r.nan_count = Some(0);
        r.inf_count = Some(0);
        r.correctness_pass = Some(max_err <= 0.06);
        r
    }

    #[test]
    fn options_parse_and_reject_unknown_keys() {
        let p = pipeline();
        let o = options(&p.stages["bench"], &p).unwrap();
        assert_eq!((o.warmup, o.iters, o.l2.as_str()), (5, 50, "flush"));
        assert_eq!(o.shapes, vec!["mission"]);
        assert_eq!(o.timeout, Duration::from_secs(30));
        let mut spec = p.stages["bench"].clone();
        spec.options.insert("itres".into(), 3.into());
        let err = options(&spec, &p).unwrap_err();
        assert_eq!(err.path, vec!["itres"]);
        assert!(err.message.contains("unknown option"));
        let mut spec = p.stages["bench"].clone();
        spec.options
            .insert("shapes".into(), serde_yaml::from_str("[huge]").unwrap());
        assert!(options(&spec, &p)
            .unwrap_err()
            .message
            .contains("no shape `huge`"));
        let mut spec = p.stages["bench"].clone();
        spec.options.insert("l2".into(), "cold".into());
        assert_eq!(options(&spec, &p).unwrap_err().path, vec!["l2"]);
        assert_eq!(o.method, "isolated", "the ncu-comparable method by default");
        let mut spec = p.stages["bench"].clone();
        spec.options.insert("method".into(), "graph".into());
        assert_eq!(options(&spec, &p).unwrap().method, "graph");
        spec.options.insert("method".into(), "cuda_graph".into());
        assert_eq!(options(&spec, &p).unwrap_err().path, vec!["method"]);
        assert!(!o.allow_mixed_gpus, "one GPU model per result by default");
        let mut spec = p.stages["bench"].clone();
        spec.options.insert("allow_mixed_gpus".into(), true.into());
        assert!(options(&spec, &p).unwrap().allow_mixed_gpus);
        spec.options
            .insert("allow_mixed_gpus".into(), "sure".into());
        assert_eq!(
            options(&spec, &p).unwrap_err().path,
            vec!["allow_mixed_gpus"]
        );
    }

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration(&serde_yaml::from_str(s).unwrap());
        assert_eq!(d("90"), Some(Duration::from_secs(90)));
        assert_eq!(d("90s"), Some(Duration::from_secs(90)));
        assert_eq!(d("10m"), Some(Duration::from_secs(600)));
        assert_eq!(d("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(d("soon"), None);
    }

    #[test]
    fn plan_covers_variant_shape_seed() {
        let p = pipeline();
        let o = options(&p.stages["bench"], &p).unwrap();
        let variants: Vec<&String> = p.variants.keys().collect();
        let jobs = plan(&p, &variants, &o);
        assert_eq!(jobs.len(), 3 * 2);
        let first = &jobs[0];
        assert_eq!(
            (first.variant.as_str(), first.shape.as_str(), first.seed),
            ("ctrl", "mission", 0)
        );
        assert_eq!((first.inputs, first.timed), (Recipe::Gaussian, true));
    }

    #[test]
    fn every_recipe_of_a_shape_is_checked_and_only_the_first_timed() {
        let mut p = pipeline();
        p.workload.as_mut().unwrap().inputs = BTreeMap::from([(
            "mission".to_string(),
            vec![Recipe::Gaussian, Recipe::Sink, Recipe::Sharp],
        )]);
        let o = options(&p.stages["bench"], &p).unwrap();
        let ctrl = "ctrl".to_string();
        let jobs = plan(&p, &[&ctrl], &o);
        let seen: Vec<(Recipe, u64, bool)> =
            jobs.iter().map(|j| (j.inputs, j.seed, j.timed)).collect();
        assert_eq!(
            seen,
            vec![
                (Recipe::Gaussian, 0, true),
                (Recipe::Gaussian, 1, true),
                (Recipe::Sink, 0, false),
                (Recipe::Sink, 1, false),
                (Recipe::Sharp, 0, false),
                (Recipe::Sharp, 1, false),
            ]
        );
    }

    #[test]
    fn an_incorrect_untimed_recipe_voids_a_variants_time_but_not_a_baselines() {
        let mut sink = rec("mission", 0, 10.0, 0.01);
        sink.inputs = "sink".into();
        sink.p50_us = None;
        sink.correctness_pass = Some(false);
        let rs = vec![rec("mission", 0, 10.0, 0.01), sink];
        assert_eq!(primary_time(&rs, "mission"), None);
        assert_eq!(baseline_primary_time(&rs, "mission"), Some(10.0));
        let g = correctness_gates(&rs, &Default::default(), Precision::Fp16Pv);
        assert!(g.iter().any(|x| x.subject == "mission/sink/seed0"));
    }

    #[test]
    fn speedups_match_shape_and_seed_and_say_na_when_missing() {
        let mut mine = vec![rec("mission", 0, 10.0, 0.01), rec("mission", 1, 10.0, 0.01)];
        let base = vec![rec("mission", 0, 15.0, 0.01)];
        attach_speedup(&mut mine, "speedup_vs_torch", Some(&base));
        assert_eq!(mine[0].speedups["speedup_vs_torch"], Some(1.5));
        assert_eq!(mine[1].speedups["speedup_vs_torch"], None);
        attach_speedup(&mut mine, "speedup_vs_gone", None);
        assert_eq!(mine[0].speedups["speedup_vs_gone"], None);
        let json = serde_json::to_value(&mine[0]).unwrap();
        assert_eq!(json["speedup_vs_torch"], 1.5);
        assert!(json["speedup_vs_gone"].is_null());
    }

    #[test]
    fn correctness_gates_fail_on_errors_nan_and_crashes() {
        let g = crate::pipeline::CorrectnessGates::default();
        let ok = correctness_gates(&[rec("mission", 0, 10.0, 0.01)], &g, Precision::Fp16Pv);
        assert!(ok.iter().all(|x| x.pass));
        let planted = correctness_gates(&[rec("mission", 1, 10.0, 0.25)], &g, Precision::Fp16Pv);
        assert!(planted
            .iter()
            .any(|x| x.gate == "correctness.max_abs_err" && !x.pass));
        assert_eq!(planted[0].subject, "mission/seed1");
        let mut nan = rec("mission", 0, 10.0, 0.0);
        nan.nan_count = Some(3);
        assert!(correctness_gates(&[nan], &g, Precision::Fp16Pv)
            .iter()
            .any(|x| x.gate == "correctness.nonfinite" && !x.pass));
        let mut crashed = rec("mission", 0, 10.0, 0.0);
        crashed.status = "failed".into();
        let c = correctness_gates(&[crashed], &g, Precision::Fp16Pv);
        assert_eq!(
            (c.len(), c[0].gate.as_str(), c[0].pass),
            (1, "correctness.completed", false)
        );
    }

    fn variants(ctrl: f64, fast: f64, wrong: f64) -> BTreeMap<String, Vec<BenchResult>> {
        BTreeMap::from([
            (
                "ctrl".into(),
                vec![rec("mission", 0, ctrl, 0.01), rec("mission", 1, ctrl, 0.01)],
            ),
            (
                "fast".into(),
                vec![
                    rec("mission", 0, fast, 0.01),
                    rec("mission", 1, fast + 0.2, 0.01),
                ],
            ),
            (
                "faster-but-wrong".into(),
                vec![rec("mission", 0, wrong, 0.3), rec("mission", 1, wrong, 0.3)],
            ),
        ])
    }

    #[test]
    fn performance_gate_uses_the_best_correct_variant() {
        let p = pipeline();
        let gates = performance_gates(&variants(12.0, 10.0, 1.0), Some("ctrl"), "mission", &p, &[]);
        assert_eq!(
            gates.len(),
            1,
            "the baseline gate is n/a without the baseline"
        );
        let (owner, g) = &gates[0];
        assert_eq!(owner, "fast");
        assert_eq!(g.subject, "fast vs ctrl on mission");
        assert!((g.measured - 12.0 / 10.1).abs() < 1e-12, "{}", g.measured);
        assert!(g.pass);
        let slow = performance_gates(&variants(10.5, 10.0, 1.0), Some("ctrl"), "mission", &p, &[]);
        assert!(!slow[0].1.pass);
    }

    #[test]
    fn baseline_gate_and_missing_control() {
        let p = pipeline();
        let base = BenchFile {
            name: "torch-sdpa-best".into(),
            kind: "baseline".into(),
            status: "ok".into(),
            reason: None,
            defines: BTreeMap::new(),
            nvcc_version: None,
            precision: None,
            results: vec![
                rec("mission", 0, 20.0, 0.001),
                rec("mission", 1, 20.0, 0.001),
            ],
            gates: vec![],
        };
        let gates = performance_gates(
            &variants(12.0, 10.0, 1.0),
            Some("ctrl"),
            "mission",
            &p,
            &[("torch-sdpa-best".into(), Some(base))],
        );
        let b = &gates[1].1;
        assert_eq!(b.gate, "performance.min_speedup_vs_torch-sdpa-best");
        assert!((b.measured - 20.0 / 10.1).abs() < 1e-12);
        let mut v = variants(12.0, 10.0, 1.0);
        v.get_mut("ctrl").unwrap()[0].status = "failed".into();
        let g = performance_gates(&v, Some("ctrl"), "mission", &p, &[]);
        assert!(!g[0].1.pass);
        assert!(g[0]
            .1
            .subject
            .contains("control ctrl has no correct mission result"));
    }

    #[test]
    fn a_baseline_timed_by_another_method_is_not_compared() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(BASELINE_DIR)).unwrap();
        // The recorded baseline was timed with CUDA graphs.
        let recorded = include_str!("../../tests/fixtures/bench/torch-sdpa-best.json");
        let path = dir.path().join(BASELINE_DIR).join("torch-sdpa-best.json");
        std::fs::write(&path, recorded).unwrap();
        let root = dir.path();
        assert!(read_baseline(root, "torch-sdpa-best", "graph").is_ok());
        let why = read_baseline(root, "torch-sdpa-best", "isolated").unwrap_err();
        assert!(
            why.contains("timed by the graph method and the variants by the isolated method"),
            "{why}"
        );
        let isolated = recorded.replace("\"cuda_graph\"", "\"isolated\"");
        std::fs::write(&path, isolated).unwrap();
        assert!(read_baseline(root, "torch-sdpa-best", "isolated").is_ok());
        let skipped = r#"{"name": "torch-sdpa-best", "kind": "baseline", "status": "skipped",
            "reason": "PyTorch is not installed", "results": [], "gates": []}"#;
        std::fs::write(&path, skipped).unwrap();
        let why = read_baseline(root, "torch-sdpa-best", "isolated").unwrap_err();
        assert_eq!(why, "it was skipped (PyTorch is not installed)");
        assert!(read_baseline(root, "torch-sdpa-default", "isolated")
            .unwrap_err()
            .starts_with("cannot read"));
    }

    #[test]
    fn bench_files_round_trip_through_json() {
        let mut r = rec("mission", 0, 10.0, 0.01);
        r.speedups
            .insert("speedup_vs_torch-sdpa-default".into(), Some(2.0));
        r.speedups.insert("speedup_vs_torch-sdpa-best".into(), None);
        let file = BenchFile {
            name: "fast".into(),
            kind: "variant".into(),
            status: "ok".into(),
            reason: None,
            defines: BTreeMap::from([("X".into(), "1".into())]),
            nvcc_version: None,
            precision: None,
            results: vec![r],
            gates: correctness_gates(
                &[rec("mission", 0, 10.0, 0.01)],
                &Default::default(),
                Precision::Fp16Pv,
            ),
        };
        let text = to_json_pretty(&file);
        let back: BenchFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, file);
    }

    /// Results recorded on an H100 (docs/PERFORMANCE.md): `repro exec` lines for three
    /// variants × small/mission/long × seeds 0-2, and the baseline script's output.
    #[test]
    fn gates_and_speedups_on_results_recorded_on_an_h100() {
        let records: Vec<BenchResult> = include_str!("../../tests/fixtures/bench/h100-exec.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.len(), 27);
        let names = ["stage2-baseline", "stage5-ws-p1", "stage5-ws-p2"];
        let mut by_variant: BTreeMap<String, Vec<BenchResult>> = names
            .iter()
            .zip(records.chunks(9))
            .map(|(n, rs)| (n.to_string(), rs.to_vec()))
            .collect();
        let best: BenchFile = serde_json::from_str(include_str!(
            "../../tests/fixtures/bench/torch-sdpa-best.json"
        ))
        .unwrap();
        assert_eq!(best.defines["backend"], "cudnn");
        for rs in by_variant.values_mut() {
            attach_speedup(rs, "speedup_vs_torch-sdpa-best", Some(&best.results));
            let g = correctness_gates(rs, &Default::default(), Precision::Fp16Pv);
            assert!(g.iter().all(|x| x.pass), "{g:?}");
        }
        let ws1_mission0 = &by_variant["stage5-ws-p1"][3];
        assert_eq!(
            (ws1_mission0.shape.as_str(), ws1_mission0.seed),
            ("mission", 0)
        );
        let s = ws1_mission0.speedups["speedup_vs_torch-sdpa-best"].unwrap();
        assert!((s - 9.3293 / 21.296).abs() < 1e-3, "{s}");

        let p = pipeline();
        let gates = performance_gates(
            &by_variant,
            Some("stage2-baseline"),
            "mission",
            &p,
            &[("torch-sdpa-best".into(), Some(best))],
        );
        let (owner, control_gate) = &gates[0];
        assert_eq!(owner, "stage5-ws-p1");
        assert!(
            (control_gate.measured - 23.5838 / 21.2856).abs() < 1e-3,
            "{}",
            control_gate.measured
        );
        assert!(control_gate.pass, "1.108× >= 1.10×");
        let (_, baseline_gate) = &gates[1];
        assert!(
            !baseline_gate.pass,
            "cuDNN is faster: {}",
            baseline_gate.measured
        );
    }
}
