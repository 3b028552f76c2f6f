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
//! Every record names the node and GPU that measured it, the architecture of the cubin it
//! loaded (the declared one its GPU runs) and the driver's register and shared-memory
//! figures for it beside ptxas's (`driver`).

mod driver;
mod gates;
mod jobs;
mod options;
mod records;
mod reuse;
#[cfg(test)]
mod tests;

pub use gates::correctness_gates;

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::pipeline::{defines_as_written, Pipeline, StageSpec};
use crate::schema::{BenchFile, BenchResult, BuildRecord, DriverCheck, GateResult, Measured};
use crate::stages::build::{arch, cubin_path, record_path, REFERENCE};
use crate::stages::gpu_nodes::{self, OneGpuModel};
use crate::stages::reuse::{describe_run, Committed, ThisRun};
use anyhow::Context as _;
use gates::{attach_speedup, performance_gates};
use jobs::{plan, run_jobs};
use options::{baseline_names, options};
use records::{append_to_log, read_baseline, write};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct BenchStage;

/// Where baseline records are read from (the shipped `baselines` stage writes them).
pub const BASELINE_DIR: &str = "artifacts/bench/baselines";

/// The architecture whose cubins this machine's first visible GPU loads, when there is a
/// GPU and the pipeline declares its architecture (for fingerprints: never asks the GPU).
fn probed_arch(pipeline: &Pipeline, root: &Path) -> Option<String> {
    let gpus = crate::gpu::probe_cached(root).ok()?;
    arch::for_gpu(gpus.first()?, &pipeline.arch).ok()
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
        let o = options(spec, pipeline)?;
        // The cubins it loads are those of its GPU's architecture; without a GPU here it
        // cannot run, and keeps what was measured elsewhere.
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(arch) = probed_arch(pipeline, root) {
            files.extend(pipeline.variants.keys().map(|v| cubin_path(v, &arch)));
            files.push(cubin_path(REFERENCE, &arch));
        }
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
            ("shapes".into(), o.shapes().join(",")),
            ("l2".into(), o.l2.name().into()),
            ("method".into(), o.method.name().into()),
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
        let o = options(ctx.spec, ctx.pipeline)?;
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
                        defines: defines_as_written(&spec.defines),
                        nvcc_version: None,
                        precision: None,
                        arch: None,
                        driver: None,
                        results: vec![],
                        gates: vec![],
                        measured: None,
                    };
                    write(&out_dir, &file)?;
                }
                return Ok(StageOutcome::Skipped {
                    reason: no.0,
                    fix: gpu_nodes::no_gpu_fix(ctx.executor, "run the bench stage"),
                });
            }
        };
        // The declared architecture the GPU runs; none is an error at `arch:`.
        let arch = arch::for_gpu(&gpus[0], &ctx.pipeline.arch)
            .map_err(|e| anyhow::anyhow!(e.at(ctx.pipeline_file)))?;
        // A variant that did not compile has no cubin: it fails alone, with the reason.
        let (built, unbuilt): (Vec<&String>, Vec<&String>) = ctx
            .pipeline
            .variants
            .keys()
            .partition(|v| ctx.root.join(cubin_path(v, &arch)).is_file());
        let mut failed_gates = Vec::new();
        for name in unbuilt {
            let file = BenchFile {
                name: name.clone(),
                kind: "variant".into(),
                status: "failed".into(),
                reason: Some(format!(
                    "not built: {} is missing; the build stage's record artifacts/build/{name}.json says why",
                    cubin_path(name, &arch).display()
                )),
                defines: defines_as_written(&ctx.pipeline.variants[name].defines),
                nvcc_version: None,
                precision: None,
                arch: Some(arch.clone()),
                driver: None,
                results: vec![],
                gates: vec![],
                measured: None,
            };
            write(&out_dir, &file)?;
            failed_gates.push(format!("{name}: not built"));
        }
        // A variant whose key is unchanged keeps its committed results (stages::reuse),
        // and the driver's figures recorded with them (the key holds the cubin and driver).
        let keys = reuse::keys(ctx, &o, &arch, &gpus, &built);
        let committed = Committed::of(ctx);
        let mut by_variant: BTreeMap<String, Vec<BenchResult>> = BTreeMap::new();
        let mut measured: BTreeMap<String, Measured> = BTreeMap::new();
        let mut checks: BTreeMap<String, DriverCheck> = BTreeMap::new();
        let mut to_measure = Vec::new();
        for v in built {
            match keys
                .get(v)
                .and_then(|k| reuse::committed_record(&committed, v, k))
            {
                Some(file) => {
                    let from = file.measured.expect("a reused record says from where");
                    append_to_log(
                        ctx.log,
                        &format!(
                            "{v}: reused the results measured {} (cubin, workload, harness, GPU and driver unchanged)",
                            describe_run(&from)
                        ),
                    )?;
                    measured.insert(v.clone(), from);
                    if let Some(check) = file.driver {
                        checks.insert(v.clone(), check);
                    }
                    by_variant.insert(v.clone(), file.results);
                }
                None => to_measure.push(v),
            }
        }
        if !measured.is_empty() {
            (ctx.progress)(&format!(
                "reused {} unchanged variant(s), measuring {}",
                measured.len(),
                to_measure.len()
            ));
        }
        checks.extend(driver_checks(ctx, gpus[0].index, &arch, &to_measure));
        let jobs = plan(ctx.pipeline, &to_measure, &o);
        let slots = gpu_nodes::gpu_slots(ctx.executor, &gpus);
        let results = run_jobs(ctx, &o, &jobs, slots)?;
        OneGpuModel::new(o.allow_mixed_gpus)
            .admit(&results)
            .map_err(anyhow::Error::msg)?;
        let this_run = ThisRun::now(ctx.root);
        for v in to_measure {
            if let Some(key) = keys.get(v) {
                measured.insert(v.clone(), this_run.measured(key.clone()));
            }
        }
        for (job, r) in jobs.iter().zip(results) {
            by_variant.entry(job.variant.clone()).or_default().push(r);
        }
        let mut baselines: Vec<(String, Option<BenchFile>)> = Vec::new();
        for b in baseline_names(&o, ctx.root) {
            let file = match read_baseline(ctx.root, &b, o.method.name()) {
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
                arch: Some(arch.clone()),
                driver: checks.get(&name).cloned(),
                measured: measured.remove(&name),
                name,
                kind: "variant".into(),
                reason: None,
                defines: defines_as_written(&spec.defines),
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

/// The driver's figures for each built variant's entry on GPU `gpu`, checked against its
/// build record's ptxas figures for `arch`; a check that cannot run says why.
fn driver_checks(
    ctx: &RunCtx,
    gpu: u32,
    arch: &str,
    built: &[&String],
) -> BTreeMap<String, DriverCheck> {
    built
        .iter()
        .map(|&name| {
            let record = std::fs::read(ctx.root.join(record_path(name)))
                .ok()
                .and_then(|b| serde_json::from_slice::<BuildRecord>(&b).ok());
            let check = match record.as_ref().and_then(|r| r.entry_on(arch)) {
                None => driver::skipped(&format!(
                    "artifacts/build/{name}.json has no {arch} entry to compare with"
                )),
                Some(entry) => driver::cross_check(
                    ctx.executor,
                    ctx.cancel,
                    ctx.repro_exe,
                    ctx.root,
                    gpu,
                    &ctx.root.join(cubin_path(name, arch)),
                    entry,
                )
                .unwrap_or_else(|e| {
                    driver::skipped(&format!("could not read the driver's attributes: {e:#}"))
                }),
            };
            (name.clone(), check)
        })
        .collect()
}
