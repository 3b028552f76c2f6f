//! The `profile` stage kind: Nsight Compute on `repro exec` for each target (the control,
//! named variants, the tune elite), one warm launch of the kernel's entry, `--csv --page raw`
//! with an explicit metric list. Writes ncu's output as printed to
//! `artifacts/ncu/<target>.csv` and the named metrics to `artifacts/ncu/summary.json`.
//!
//! Degrades honestly: no ncu → `skipped` with the install hint; `ERR_NVGPUCTRPERM` →
//! `skipped` with the fix; a target whose program crashes or times out is `failed` with
//! ncu's last lines, and the others still run.

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::executor::{ExitKind, Job};
use crate::gpu::client::{ExecRequest, ExecTarget};
use crate::gpu::timing::{L2Mode, Method};
use crate::ncu::metrics::{self, Arch};
use crate::ncu::{self as ncu_mod, parse};
use crate::pipeline::{Pipeline, Recipe, Shape, StageSpec};
use crate::schema::{to_json_pretty, NcuSummary, NcuTarget};
use anyhow::Context;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the stage writes; the folder is its one declared output.
const OUT_DIR: &str = "artifacts/ncu";
const TOPK_FILE: &str = "artifacts/tune/topk.json";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

pub struct Profile;

/// The stage's own keys in pipeline.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileOptions {
    /// `control`, `topk` (every member of the tune elite) or variant names.
    pub targets: Vec<String>,
    /// Metrics to collect besides the built-in list (kept in `raw` of the summary).
    pub metrics: Vec<String>,
    /// Also save a full-set `.repro/ncu/<target>.ncu-rep` (not committed).
    pub keep_report: bool,
    /// `repro exec --warmup`: launches before the timed ones.
    pub warmup: u32,
    /// `repro exec --iters`.
    pub iters: u32,
    /// Launches of the entry to skip before the profiled one (default: `warmup`).
    pub launch_skip: u32,
    /// ncu `--clock-control`: `base` (ncu's default: clocks locked to base) or `none`.
    pub clock_control: String,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            targets: vec!["control".into(), "topk".into()],
            metrics: Vec::new(),
            keep_report: false,
            warmup: 5,
            iters: 1,
            launch_skip: 5,
            clock_control: "base".into(),
        }
    }
}

fn option<T: DeserializeOwned>(key: &str, v: &serde_yaml::Value) -> Result<T, OptionError> {
    serde_yaml::from_value(v.clone()).map_err(|e| OptionError {
        path: vec![key.to_string()],
        message: format!("invalid value: {e}"),
    })
}

impl ProfileOptions {
    /// Read and check the stage's options against the pipeline.
    pub fn from_spec(spec: &StageSpec, pipeline: &Pipeline) -> Result<Self, OptionError> {
        let mut o = ProfileOptions::default();
        let mut launch_skip = None;
        for (k, v) in &spec.options {
            let key = k.as_str().unwrap_or("");
            match key {
                "targets" => o.targets = option(key, v)?,
                "metrics" => o.metrics = option(key, v)?,
                "keep_report" => o.keep_report = option(key, v)?,
                "warmup" => o.warmup = option(key, v)?,
                "iters" => o.iters = option(key, v)?,
                "launch_skip" => launch_skip = Some(option(key, v)?),
                "clock_control" => o.clock_control = option(key, v)?,
                _ => {
                    return Err(OptionError {
                        path: vec![k.as_str().map_or_else(|| format!("{k:?}"), str::to_string)],
                        message: "unknown key; expected one of targets, metrics, keep_report, \
                                  warmup, iters, launch_skip, clock_control"
                            .into(),
                    })
                }
            }
        }
        o.launch_skip = launch_skip.unwrap_or(o.warmup);
        if !["base", "none"].contains(&o.clock_control.as_str()) {
            return Err(OptionError {
                path: vec!["clock_control".into()],
                message: format!(
                    "`{}` is not a clock-control mode; expected `base` (ncu's default: lock \
                     clocks to base) or `none` (leave them alone)",
                    o.clock_control
                ),
            });
        }
        if o.iters == 0 {
            return Err(OptionError {
                path: vec!["iters".into()],
                message: "must be at least 1".into(),
            });
        }
        if o.targets.is_empty() {
            return Err(OptionError {
                path: vec!["targets".into()],
                message: "name at least one target: `control`, `topk` or a variant".into(),
            });
        }
        if let Err(e) = primary_shape(pipeline) {
            return Err(OptionError {
                path: vec![],
                message: format!("{e:#}"),
            });
        }
        for (i, t) in o.targets.iter().enumerate() {
            // `topk` profiles tune cubins of the control's kernel.
            let known = ((t == "topk" || t == "control") && pipeline.control.is_some())
                || pipeline.variants.contains_key(t);
            if !known {
                let hint = if t == "control" || t == "topk" {
                    "the pipeline names no `control:` variant".to_string()
                } else {
                    let names: Vec<&str> = pipeline.variants.keys().map(String::as_str).collect();
                    format!(
                        "expected `control`, `topk` or a variant ({})",
                        names.join(", ")
                    )
                };
                return Err(OptionError {
                    path: vec!["targets".into(), i.to_string()],
                    message: format!("unknown target `{t}`: {hint}"),
                });
            }
        }
        if let Some(t) = &spec.timeout {
            timeout_of(t).map_err(|message| OptionError {
                path: vec!["timeout".into()],
                message,
            })?;
        }
        Ok(o)
    }
}

/// `600`, `"90s"`, `"10m"`, `"2h"` → a duration.
pub fn timeout_of(v: &serde_yaml::Value) -> Result<Duration, String> {
    let bad = || format!("expected seconds or a duration like `90s`, `10m`, `2h`; found {v:?}");
    if let Some(s) = v.as_u64() {
        return Ok(Duration::from_secs(s));
    }
    let text = v.as_str().ok_or_else(bad)?.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: u64 = text[..split].parse().map_err(|_| bad())?;
    let unit = match &text[split..] {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(n * unit))
}

/// What one target profiles.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    Variant(String),
    Cubin { path: PathBuf },
}

/// One resolved target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `control`, a variant name, or `top<k>`: the CSV's file name and the summary's `target`.
    pub label: String,
    pub variant: String,
    pub entry: String,
    pub program: Program,
}

/// The entry point of a variant's kernel.
fn entry_of(pipeline: &Pipeline, variant: &str) -> Option<String> {
    let v = pipeline.variants.get(variant)?;
    Some(pipeline.kernels.get(&v.kernel)?.entry.clone())
}

/// Resolve the options' targets. Targets that cannot run yet (no tune elite) come back as
/// skipped records instead.
pub fn resolve_targets(
    opts: &ProfileOptions,
    pipeline: &Pipeline,
    root: &Path,
) -> (Vec<Target>, Vec<NcuTarget>) {
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    let control = pipeline.control.clone().unwrap_or_default();
    for t in &opts.targets {
        if t == "topk" {
            match elite_ranks(root) {
                Ok(ranks) => {
                    // The tune stage searches the control's kernel.
                    let entry = entry_of(pipeline, &control).unwrap_or_default();
                    for k in ranks {
                        let label = format!("top{k}");
                        let cubin = root.join(format!(".repro/cubins/tune-{label}.cubin"));
                        if cubin.is_file() {
                            run.push(Target {
                                variant: format!("tune-{label}"),
                                label,
                                entry: entry.clone(),
                                program: Program::Cubin { path: cubin },
                            });
                        } else {
                            let reason =
                                format!("{} is missing; run the tune stage", cubin.display());
                            skipped.push(skipped_target(
                                &label,
                                &format!("tune-{label}"),
                                &entry,
                                reason,
                            ));
                        }
                    }
                }
                Err(reason) => skipped.push(skipped_target("topk", "", "", reason)),
            }
            continue;
        }
        let variant = if t == "control" {
            control.clone()
        } else {
            t.clone()
        };
        let entry = entry_of(pipeline, &variant).unwrap_or_default();
        run.push(Target {
            label: t.clone(),
            variant: variant.clone(),
            entry,
            program: Program::Variant(variant),
        });
    }
    (run, skipped)
}

/// Ranks listed in `artifacts/tune/topk.json` (an array of elite entries).
fn elite_ranks(root: &Path) -> Result<Vec<u32>, String> {
    #[derive(serde::Deserialize)]
    struct Rank {
        rank: u32,
    }
    let path = root.join(TOPK_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("no tune elite: cannot read {TOPK_FILE} ({e}); run the tune stage"))?;
    let entries: Vec<Rank> = serde_json::from_str(&text)
        .map_err(|e| format!("{TOPK_FILE} is not a list of elite entries: {e}"))?;
    if entries.is_empty() {
        return Err(format!("{TOPK_FILE} lists no elite"));
    }
    Ok(entries.into_iter().map(|e| e.rank).collect())
}

fn skipped_target(label: &str, variant: &str, entry: &str, reason: String) -> NcuTarget {
    status_target(label, variant, entry, "skipped", reason)
}

fn status_target(
    label: &str,
    variant: &str,
    entry: &str,
    status: &str,
    reason: String,
) -> NcuTarget {
    NcuTarget {
        target: label.into(),
        variant: variant.into(),
        kernel: entry.into(),
        status: status.into(),
        reason: Some(reason),
        sm_util_pct: None,
        tensor_core_util_pct: None,
        achieved_occupancy_pct: None,
        registers_per_thread: None,
        l2_hit_rate_pct: None,
        dram_bw_pct_peak: None,
        kernel_time_us: None,
        metric_names: Default::default(),
        raw: Default::default(),
        top_stalls: Vec::new(),
    }
}

/// The workload's primary shape (name and dimensions).
fn primary_shape(pipeline: &Pipeline) -> anyhow::Result<(String, Shape)> {
    let w = pipeline
        .workload
        .as_ref()
        .context("the profile stage needs a `workload:` with shapes and a `primary:` shape")?;
    let shape = w.shapes.get(&w.primary).with_context(|| {
        format!(
            "workload.primary names `{}`, which is not among workload.shapes",
            w.primary
        )
    })?;
    Ok((w.primary.clone(), *shape))
}

/// Everything one ncu invocation needs besides the target.
pub struct NcuCall<'a> {
    pub ncu: &'a Path,
    pub repro_exe: &'a Path,
    pub pipeline_file: &'a Path,
    pub shape: &'a str,
    pub metrics: &'a [String],
    pub opts: &'a ProfileOptions,
}

impl NcuCall<'_> {
    /// `ncu <profiling flags> <extra> <repro> -f <pipeline> exec ...`.
    pub fn argv(&self, target: &Target, extra: &[String]) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let mut argv = vec![self.ncu.to_string_lossy().into_owned()];
        argv.extend(extra.iter().cloned());
        argv.extend([
            s("--metrics"),
            self.metrics.join(","),
            s("-k"),
            format!("regex:^{}$", regex_escape(&target.entry)),
            s("--launch-skip"),
            self.opts.launch_skip.to_string(),
            s("--launch-count"),
            s("1"),
            s("--clock-control"),
            self.opts.clock_control.clone(),
            self.repro_exe.to_string_lossy().into_owned(),
            s("-f"),
            self.pipeline_file.to_string_lossy().into_owned(),
            s("exec"),
        ]);
        let request = ExecRequest {
            target: match &target.program {
                Program::Variant(v) => ExecTarget::Variant(v.clone()),
                Program::Cubin { path } => ExecTarget::Cubin {
                    path: path.clone(),
                    entry: target.entry.clone(),
                },
            },
            shape: s(self.shape),
            inputs: Recipe::Gaussian,
            precision: None,
            seed: 0,
            warmup: self.opts.warmup,
            iters: self.opts.iters,
            l2: L2Mode::Warm,
            // ncu serializes launches, so the isolated method's hold would wait for a
            // release that comes only after it: launch plainly (ncu times each alone).
            method: Method::Graph,
            timing: true,
        };
        argv.extend(request.argv());
        argv
    }
}

fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// The metric list for the GPU this machine has (every architecture's names when unknown).
fn request_metrics(root: &Path, extra: &[String]) -> Vec<String> {
    metrics::request_list(detected_arch(root), extra)
}

fn detected_arch(root: &Path) -> Option<Arch> {
    let gpus = crate::gpu::probe_cached(root).ok()?;
    Arch::from_sm(&gpus.first()?.arch())
}

/// How one target's ncu run ended.
enum RunResult {
    Done(Box<NcuTarget>),
    /// ncu was refused the performance counters: the whole stage is skipped.
    NoPermission(String),
}

impl StageKind for Profile {
    fn kind(&self) -> &'static str {
        "profile"
    }

    /// The metric names follow the architecture of the GPU present.
    fn machine_params(&self) -> &'static [&'static str] {
        &["metrics"]
    }

    fn validate(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<(), OptionError> {
        ProfileOptions::from_spec(spec, pipeline).map(|_| ())
    }

    fn outputs(&self, _name: &str, _spec: &StageSpec, _pipeline: &Pipeline) -> Outputs {
        vec![PathBuf::from(OUT_DIR)]
    }

    fn inputs(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs> {
        let opts = ProfileOptions::from_spec(spec, pipeline)
            .map_err(|e| anyhow::anyhow!("{}: {}", e.path.join("."), e.message))?;
        let mut inputs = StageInputs::default();
        let p = &mut inputs.params;
        p.insert("targets".into(), opts.targets.join(","));
        p.insert(
            "metrics".into(),
            request_metrics(root, &opts.metrics).join(","),
        );
        p.insert("keep_report".into(), opts.keep_report.to_string());
        p.insert("warmup".into(), opts.warmup.to_string());
        p.insert("iters".into(), opts.iters.to_string());
        p.insert("launch_skip".into(), opts.launch_skip.to_string());
        p.insert("clock_control".into(), opts.clock_control.clone());
        if let Ok((name, s)) = primary_shape(pipeline) {
            p.insert(
                "shape".into(),
                format!("{name}={},{},{},{}", s.B, s.H, s.S, s.D),
            );
        }
        let ncu_version = ncu_mod::find_ncu()
            .and_then(|n| ncu_mod::version(root, &n))
            .unwrap_or_else(|| "not found".into());
        inputs.tools.insert("ncu".into(), ncu_version);
        // Under Slurm the request (partition, gres): this machine may not be a GPU node.
        inputs.hardware = crate::stages::gpu_nodes::slurm_request(pipeline, spec).or_else(|| {
            let gpus = crate::gpu::probe_cached(root).ok()?;
            let first = gpus.first()?;
            Some(crate::stages::gpu_nodes::gpu_identity(
                std::slice::from_ref(first),
            ))
        });
        Ok(inputs)
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let opts = ProfileOptions::from_spec(ctx.spec, ctx.pipeline)
            .map_err(|e| anyhow::anyhow!("{}: {}", e.path.join("."), e.message))?;
        let out_dir = ctx.staging.join(OUT_DIR);
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let (targets, skipped) = resolve_targets(&opts, ctx.pipeline, ctx.root);
        let mut summary = NcuSummary {
            ncu_version: None,
            clock_control: opts.clock_control.clone(),
            targets: Vec::new(),
        };
        let skip_all = |summary: &mut NcuSummary, reason: &str, fix: &str| {
            summary.targets = targets
                .iter()
                .map(|t| skipped_target(&t.label, &t.variant, &t.entry, reason.to_string()))
                .collect();
            StageOutcome::Skipped {
                reason: reason.to_string(),
                fix: fix.to_string(),
            }
        };

        let Some(ncu) = ncu_mod::find_ncu() else {
            let outcome = skip_all(
                &mut summary,
                "Nsight Compute (ncu) was not found on PATH, in $NCU, /usr/local/cuda/bin or /opt/nvidia/nsight-compute",
                ncu_mod::INSTALL_HINT,
            );
            return finish(&out_dir, summary, skipped, outcome);
        };
        summary.ncu_version = ncu_mod::version(ctx.root, &ncu);
        let (shape, _) = primary_shape(ctx.pipeline)?;
        let metric_list = request_metrics(ctx.root, &opts.metrics);
        let pipeline_file = ctx.pipeline_file.to_path_buf();
        let call = NcuCall {
            ncu: &ncu,
            repro_exe: ctx.repro_exe,
            pipeline_file: &pipeline_file,
            shape: &shape,
            metrics: &metric_list,
            opts: &opts,
        };
        let timeout = match &ctx.spec.timeout {
            Some(t) => timeout_of(t).map_err(anyhow::Error::msg)?,
            None => DEFAULT_TIMEOUT,
        };
        let arch = detected_arch(ctx.root);
        for (i, target) in targets.iter().enumerate() {
            (ctx.progress)(&format!(
                "ncu {} ({}/{})",
                target.label,
                i + 1,
                targets.len()
            ));
            let job = profile_job(ctx, &call, target, timeout, &["--csv", "--page", "raw"]);
            let outcome = ctx.executor.run(&job, ctx.cancel)?;
            if outcome.exit == ExitKind::Cancelled {
                anyhow::bail!("interrupted while profiling {}", target.label);
            }
            let stdout = String::from_utf8_lossy(&outcome.stdout).into_owned();
            match read_target(target, &outcome, &stdout, arch, &opts.metrics) {
                RunResult::NoPermission(line) => {
                    let reason = format!("ncu may not read the GPU performance counters: {line}");
                    let outcome = skip_all(&mut summary, &reason, ncu_mod::PERMISSION_FIX);
                    return finish(&out_dir, summary, skipped, outcome);
                }
                RunResult::Done(mut record) => {
                    let csv = out_dir.join(format!("{}.csv", target.label));
                    std::fs::write(&csv, &outcome.stdout)
                        .with_context(|| format!("cannot write {}", csv.display()))?;
                    if opts.keep_report && record.status == "ok" {
                        if let Err(why) = keep_report(ctx, &call, target, timeout) {
                            record.reason = Some(format!("report not kept: {why}"));
                        }
                    }
                    summary.targets.push(*record);
                }
            }
        }
        let failed: Vec<String> = summary
            .targets
            .iter()
            .filter(|t| t.status == "failed")
            .map(|t| t.target.clone())
            .collect();
        let outcome = if failed.is_empty() {
            StageOutcome::Passed
        } else {
            StageOutcome::GateFailed(format!("ncu failed for {}", failed.join(", ")))
        };
        finish(&out_dir, summary, skipped, outcome)
    }
}

/// The ncu job for one target; `page` are the flags that choose the output.
fn profile_job(
    ctx: &RunCtx,
    call: &NcuCall,
    target: &Target,
    timeout: Duration,
    page: &[&str],
) -> Job {
    let extra: Vec<String> = page.iter().map(|s| s.to_string()).collect();
    let mut job = Job::new(
        format!("profile:{}", target.label),
        call.argv(target, &extra),
        ctx.root,
    );
    job.timeout = Some(timeout);
    job.log = Some(ctx.log.to_path_buf());
    job.capture_stdout = true;
    job.gpu = Some(0);
    job.env = ctx.spec.env.clone().into_iter().collect();
    job
}

/// Save a full-set report to `.repro/ncu/<target>.ncu-rep` (outside the staged outputs).
fn keep_report(
    ctx: &RunCtx,
    call: &NcuCall,
    target: &Target,
    timeout: Duration,
) -> Result<(), String> {
    let dir = ctx.root.join(".repro/ncu");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let report = dir.join(&target.label);
    let flags = ["--set", "full", "-f", "-o", &report.to_string_lossy()].map(str::to_string);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let job = profile_job(ctx, call, target, timeout, &flags);
    let outcome = ctx
        .executor
        .run(&job, ctx.cancel)
        .map_err(|e| e.to_string())?;
    if outcome.success() {
        Ok(())
    } else {
        Err(format!(
            "ncu ended with {:?}: {}",
            outcome.exit,
            last_lines(&outcome.tail, 5)
        ))
    }
}

/// Turn one ncu run into the target's record.
fn read_target(
    target: &Target,
    outcome: &crate::executor::JobOutcome,
    stdout: &str,
    arch: Option<Arch>,
    extra: &[String],
) -> RunResult {
    let everything = format!("{stdout}\n{}", outcome.tail);
    if ncu_mod::is_permission_error(&everything) {
        let line = everything
            .lines()
            .find(|l| l.contains("ERR_NVGPUCTRPERM"))
            .unwrap_or("ERR_NVGPUCTRPERM")
            .trim()
            .to_string();
        return RunResult::NoPermission(line);
    }
    let failed = |reason: String| {
        RunResult::Done(Box::new(status_target(
            &target.label,
            &target.variant,
            &target.entry,
            "failed",
            reason,
        )))
    };
    let context = failure_context(stdout, &outcome.tail);
    match &outcome.exit {
        ExitKind::Code(0) => {}
        ExitKind::TimedOut => return failed(format!("ncu timed out; last output:\n{context}")),
        other => return failed(format!("ncu ended with {other:?}:\n{context}")),
    }
    let export = match parse::parse(stdout) {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot read ncu's CSV: {e}")),
    };
    let launch = export
        .launches
        .iter()
        .find(|l| l.function_name() == target.entry)
        .unwrap_or(&export.launches[0]);
    let record = metrics::summarize(
        launch,
        arch,
        extra,
        metrics::TargetId {
            target: &target.label,
            variant: &target.variant,
            kernel: &target.entry,
        },
    );
    if record.kernel_time_us.is_none() {
        return failed(format!(
            "ncu listed launch {} of {} but measured nothing (did the kernel fail?):\n{context}",
            launch.id, launch.kernel
        ));
    }
    RunResult::Done(Box::new(record))
}

/// What to show when a target fails: ncu's messages and the program's own lines (its
/// stderr included, from the job's tail), without the CSV records, the last 15, each cut
/// to 300 characters.
fn failure_context(stdout: &str, tail: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in stdout.lines().chain(tail.lines()) {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('"') || lines.iter().any(|l| l == line) {
            continue;
        }
        lines.push(line.chars().take(300).collect());
    }
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Write `summary.json` (targets in the order they were profiled, then the skipped ones).
fn finish(
    out_dir: &Path,
    mut summary: NcuSummary,
    skipped: Vec<NcuTarget>,
    outcome: StageOutcome,
) -> anyhow::Result<StageOutcome> {
    summary.targets.extend(skipped);
    let path = out_dir.join("summary.json");
    std::fs::write(&path, to_json_pretty(&summary))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline(stage: &str) -> Pipeline {
        let yaml = format!(
            "version: 1\nworkload:\n  op: sdpa_fp8\n  shapes: {{mission: {{B: 2, H: 8, S: 512, D: 64}}}}\n  primary: mission\nkernels:\n  sdpa: {{source: kernels/sdpa.cu, entry: sdpa_fp8_fwd}}\nvariants:\n  base: {{kernel: sdpa}}\n  ws: {{kernel: sdpa}}\ncontrol: base\nstages:\n  prof: {stage}\n"
        );
        serde_yaml::from_str(&yaml).unwrap()
    }

    fn options(stage: &str) -> Result<ProfileOptions, OptionError> {
        let p = pipeline(stage);
        ProfileOptions::from_spec(&p.stages["prof"], &p)
    }

    #[test]
    fn defaults_follow_ncu_and_warmup() {
        let o = options("{uses: profile}").unwrap();
        assert_eq!(o.targets, ["control", "topk"]);
        assert_eq!(o.clock_control, "base");
        assert_eq!(o.launch_skip, o.warmup);
        let o = options("{uses: profile, warmup: 9, targets: [ws], clock_control: none}").unwrap();
        assert_eq!((o.launch_skip, o.clock_control.as_str()), (9, "none"));
    }

    #[test]
    fn bad_options_name_their_key() {
        let e = options("{uses: profile, tragets: [control]}").unwrap_err();
        assert_eq!(e.path, ["tragets"]);
        let e = options("{uses: profile, targets: [control, nope]}").unwrap_err();
        assert_eq!(e.path, ["targets", "1"]);
        assert!(e.message.contains("base, ws"), "{}", e.message);
        let e = options("{uses: profile, clock_control: fast}").unwrap_err();
        assert_eq!(e.path, ["clock_control"]);
        let e = options("{uses: profile, keep_report: maybe}").unwrap_err();
        assert_eq!(e.path, ["keep_report"]);
        let e = options("{uses: profile, targets: []}").unwrap_err();
        assert_eq!(e.path, ["targets"]);
        let e = options("{uses: profile, timeout: soon}").unwrap_err();
        assert_eq!(e.path, ["timeout"]);
    }

    #[test]
    fn failure_context_keeps_messages_and_program_lines_not_csv() {
        let stdout = "app: start\n==ERROR== LaunchFailed\n\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n";
        let tail = "==ERROR== LaunchFailed\nerror: CUDA_ERROR_ILLEGAL_ADDRESS in sdpa_fp8_fwd\n";
        assert_eq!(
            failure_context(stdout, tail),
            "app: start\n==ERROR== LaunchFailed\nerror: CUDA_ERROR_ILLEGAL_ADDRESS in sdpa_fp8_fwd"
        );
    }

    #[test]
    fn timeouts() {
        let v = |s: &str| serde_yaml::from_str::<serde_yaml::Value>(s).unwrap();
        assert_eq!(timeout_of(&v("90")), Ok(Duration::from_secs(90)));
        assert_eq!(timeout_of(&v("90s")), Ok(Duration::from_secs(90)));
        assert_eq!(timeout_of(&v("10m")), Ok(Duration::from_secs(600)));
        assert_eq!(timeout_of(&v("2h")), Ok(Duration::from_secs(7200)));
        assert!(timeout_of(&v("2d")).is_err());
    }

    #[test]
    fn ncu_command_line() {
        let opts = options("{uses: profile, warmup: 3, iters: 2, clock_control: none}").unwrap();
        let metrics = vec![
            "gpu__time_duration.sum".to_string(),
            "launch__registers_per_thread".to_string(),
        ];
        let call = NcuCall {
            ncu: Path::new("/usr/local/cuda/bin/ncu"),
            repro_exe: Path::new("/bin/repro"),
            pipeline_file: Path::new("/p/pipeline.yaml"),
            shape: "mission",
            metrics: &metrics,
            opts: &opts,
        };
        let variant = Target {
            label: "control".into(),
            variant: "base".into(),
            entry: "sdpa_fp8_fwd".into(),
            program: Program::Variant("base".into()),
        };
        let page = vec!["--csv".to_string(), "--page".into(), "raw".into()];
        assert_eq!(
            call.argv(&variant, &page).join(" "),
            "/usr/local/cuda/bin/ncu --csv --page raw --metrics gpu__time_duration.sum,launch__registers_per_thread \
             -k regex:^sdpa_fp8_fwd$ --launch-skip 3 --launch-count 1 --clock-control none \
             /bin/repro -f /p/pipeline.yaml exec --variant base --shape mission --seed 0 --warmup 3 --iters 2 --l2 warm --method graph --inputs gaussian"
        );
        let elite = Target {
            label: "top1".into(),
            variant: "tune-top1".into(),
            entry: "sdpa_fp8_fwd".into(),
            program: Program::Cubin {
                path: "/p/.repro/cubins/tune-top1.cubin".into(),
            },
        };
        let argv = call.argv(&elite, &page).join(" ");
        assert!(
            argv.contains(
                "exec --cubin /p/.repro/cubins/tune-top1.cubin --entry sdpa_fp8_fwd --shape"
            ),
            "{argv}"
        );
        assert_eq!(regex_escape("a.b$"), "a\\.b\\$");
    }

    #[test]
    fn topk_without_tune_results_is_skipped_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = pipeline("{uses: profile, targets: [control, topk]}");
        let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
        let (run, skipped) = resolve_targets(&opts, &p, dir.path());
        assert_eq!(run.len(), 1);
        assert_eq!(run[0].variant, "base");
        assert_eq!(run[0].entry, "sdpa_fp8_fwd");
        assert_eq!(skipped[0].status, "skipped");
        assert!(skipped[0]
            .reason
            .as_ref()
            .unwrap()
            .contains("run the tune stage"));

        std::fs::create_dir_all(dir.path().join("artifacts/tune")).unwrap();
        std::fs::create_dir_all(dir.path().join(".repro/cubins")).unwrap();
        std::fs::write(dir.path().join(TOPK_FILE), r#"[{"rank": 1}, {"rank": 2}]"#).unwrap();
        std::fs::write(dir.path().join(".repro/cubins/tune-top1.cubin"), "").unwrap();
        let (run, skipped) = resolve_targets(&opts, &p, dir.path());
        assert_eq!(
            run.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(),
            ["control", "top1"]
        );
        assert_eq!(skipped[0].target, "top2");
        assert!(skipped[0]
            .reason
            .as_ref()
            .unwrap()
            .contains("tune-top2.cubin is missing"));
    }
}
