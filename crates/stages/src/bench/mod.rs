//! The `bench` stage kind: every variant × shape × recipe × seed of its workload through
//! `repro exec` workers (one per GPU slot, with a timeout each run), then, per workload,
//! speedups against its control and its baselines, and the correctness and performance
//! gates. Writes `artifacts/bench/<variant>.json` (schema::BenchFile).
//!
//! Options (besides the common keys): `warmup` (20), `iters` (100), `shapes` (default every
//! shape of each workload; else those listed, in each workload that has them), `l2`
//! (`warm` | `flush`), `method` (`isolated` | `graph`, see `gpu::timing`; baselines timed
//! by another method get no speedup), `baselines` (names of
//! `artifacts/bench/baselines/<name>.json` to compare with; default every file there; each
//! compares with the variants of the workload it names),
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

use crate::build::arch;
use crate::build::cubin_path;
use crate::build::record_path;
use crate::gpu_nodes;
use crate::gpu_nodes::OneGpuModel;
use crate::reuse::describe_run;
use crate::reuse::Committed;
use crate::reuse::ThisRun;
use anyhow::Context as _;
use gates::attach_speedup;
use gates::performance_gates;
use jobs::plan;
use jobs::run_jobs;
use options::baseline_names;
use options::options;
use options::Options;
use records::append_to_log;
use records::read_baseline;
use records::write;
use repro_pipeline::defines_as_written;
use repro_pipeline::kind::Config;
use repro_pipeline::kind::Configured;
use repro_pipeline::kind::OptionError;
use repro_pipeline::kind::Outputs;
use repro_pipeline::kind::Overrides;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::kind::StageInputs;
use repro_pipeline::kind::StageKind;
use repro_pipeline::kind::StageOutcome;
use repro_pipeline::workload::Workloads;
use repro_pipeline::Pipeline;
use repro_pipeline::StageSpec;
use repro_schema::BenchFile;
use repro_schema::BenchResult;
use repro_schema::BuildRecord;
use repro_schema::DriverCheck;
use repro_schema::GateResult;
use repro_schema::Measured;
use repro_schema::RunStatus;
use repro_schema::BASELINE_DIR;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

pub struct BenchStage;

/// The architecture whose cubins this machine's first visible GPU loads, when there is a
/// GPU and the pipeline declares its architecture (for fingerprints: never asks the GPU).
fn probed_arch(pipeline: &Pipeline, root: &Path) -> Option<String> {
    let gpus = repro_gpu::probe_cached(root).ok()?;
    arch::for_gpu(gpus.first()?, &pipeline.arch).ok()
}

impl StageKind for BenchStage {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Bench.as_str()
    }

    /// `timeout:` limits each `repro exec` run (default 120 s).
    fn configure(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        options(spec, pipeline).map(Config::new)
    }

    fn outputs(&self, _stage: &Configured, pipeline: &Pipeline) -> Outputs {
        pipeline
            .variants
            .keys()
            .map(|v| PathBuf::from(format!("artifacts/bench/{v}.json")))
            .collect()
    }

    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        _overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let o: &Options = stage.config.of();
        let workloads = Workloads::of(pipeline);
        // The cubins it loads are those of its GPU's architecture; without a GPU here it
        // cannot run, and keeps what was measured elsewhere.
        let mut files: Vec<PathBuf> = Vec::new();
        if let Some(arch) = probed_arch(pipeline, root) {
            files.extend(pipeline.variants.keys().map(|v| cubin_path(v, &arch)));
            for (name, decl) in workloads.iter() {
                if decl.reference.run.is_none() {
                    files.push(cubin_path(&workloads.reference_name(name), &arch));
                }
            }
        }
        // A reference command's script is an input like the kernels.
        for (_, decl) in workloads.iter() {
            let run = decl.reference.run.iter().flatten();
            files.extend(run.filter(|w| root.join(w).is_file()).map(PathBuf::from));
        }
        for b in baseline_names(o, root) {
            let f = PathBuf::from(BASELINE_DIR).join(format!("{b}.json"));
            if root.join(&f).exists() {
                files.push(f);
            }
        }
        let declared: BTreeMap<&str, serde_json::Value> = workloads
            .iter()
            .map(|(name, decl)| {
                let value = serde_json::json!({
                    "declaration": decl,
                    "shapes": o.shapes_of(decl),
                    "control": workloads.control_of(pipeline, name),
                });
                (name, value)
            })
            .collect();
        let params = BTreeMap::from([
            ("warmup".into(), o.warmup.to_string()),
            ("iters".into(), o.iters.to_string()),
            ("l2".into(), o.l2.name().into()),
            ("method".into(), o.method.name().into()),
            ("workloads".into(), serde_json::to_string(&declared)?),
            (
                "precision".into(),
                pipeline
                    .variants
                    .keys()
                    .map(|v| {
                        format!(
                            "{v}={}",
                            workloads.class_of(pipeline, v).unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "performance".into(),
                serde_json::to_string(&pipeline.gates.performance)?,
            ),
        ]);
        let hardware = Some(gpu_nodes::hardware(pipeline, stage.spec, root));
        Ok(StageInputs {
            files,
            params,
            hardware,
            ..StageInputs::default()
        })
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let o: &Options = ctx.config.of();
        let workloads = Workloads::of(ctx.pipeline);
        let out_dir = ctx.staging.join("artifacts/bench");
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let blank = |name: &String, status: RunStatus| BenchFile {
            name: name.clone(),
            kind: "variant".into(),
            workload: workloads
                .of_variant(ctx.pipeline, name)
                .map(|(w, _)| w.to_string()),
            status,
            reason: None,
            defines: defines_as_written(&ctx.pipeline.variants[name].defines),
            nvcc_version: None,
            precision: None,
            arch: None,
            driver: None,
            results: vec![],
            gates: vec![],
            measured: None,
        };
        let gpus = match gpu_nodes::stage_gpus(ctx) {
            Ok(g) => g,
            Err(no) => {
                for name in ctx.pipeline.variants.keys() {
                    let file = BenchFile {
                        reason: Some(no.0.clone()),
                        ..blank(name, RunStatus::Skipped)
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
                reason: Some(format!(
                    "not built: {} is missing; the build stage's record artifacts/build/{name}.json says why",
                    cubin_path(name, &arch).display()
                )),
                arch: Some(arch.clone()),
                ..blank(name, RunStatus::Failed)
            };
            write(&out_dir, &file)?;
            failed_gates.push(format!("{name}: not built"));
        }
        // A variant whose key is unchanged keeps its committed results (stages::reuse),
        // and the driver's figures recorded with them (the key holds the cubin and driver).
        let keys = reuse::keys(ctx, &workloads, o, &arch, &gpus, &built);
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
        let began = std::time::Instant::now();
        checks.extend(driver_checks(ctx, gpus[0].index, &arch, &to_measure));
        let checked = began.elapsed();
        let jobs = plan(&workloads, ctx.pipeline, &to_measure, o);
        let slots = gpu_nodes::gpu_slots(ctx.executor, &gpus);
        let results = run_jobs(ctx, o, &jobs, slots)?;
        append_to_log(
            ctx.log,
            &format!(
                "bench: the driver's attributes of {} variant(s) in {:.1} s, {} run(s) in {:.1} s",
                to_measure.len(),
                checked.as_secs_f64(),
                jobs.len(),
                (began.elapsed() - checked).as_secs_f64()
            ),
        )?;
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
        let baselines = read_baselines(ctx, o, &workloads)?;

        // Speedups and gates, workload by workload: its control, its baselines.
        let mut gates: BTreeMap<String, Vec<GateResult>> = BTreeMap::new();
        for (name, decl) in workloads.iter() {
            let theirs: Vec<(String, Option<BenchFile>)> = baselines
                .iter()
                .filter(|(_, w, _)| w.as_deref() == Some(name))
                .map(|(b, _, f)| (b.clone(), f.clone()))
                .collect();
            let mine: BTreeMap<String, Vec<BenchResult>> = by_variant
                .iter()
                .filter(|(v, _)| {
                    workloads
                        .of_variant(ctx.pipeline, v)
                        .is_some_and(|(w, _)| w == name)
                })
                .map(|(v, rs)| (v.clone(), rs.clone()))
                .collect();
            let control = workloads.control_of(ctx.pipeline, name);
            let control_results = control.as_ref().and_then(|c| mine.get(c)).cloned();
            for (v, results) in by_variant.iter_mut().filter(|(v, _)| mine.contains_key(*v)) {
                for (b, file) in &theirs {
                    let other = file.as_ref().map(|f| &f.results[..]);
                    attach_speedup(results, &format!("speedup_vs_{b}"), other);
                }
                if let Some(c) = &control_results {
                    attach_speedup(results, "speedup_vs_control", Some(c));
                }
                let class = workloads.class_of(ctx.pipeline, v);
                gates.insert(
                    v.clone(),
                    correctness_gates(results, decl, class.as_deref()),
                );
            }
            let perf = performance_gates(
                &mine,
                control.as_deref(),
                &decl.primary,
                ctx.pipeline,
                &theirs,
            );
            for (variant, gate) in perf {
                gates.entry(variant).or_default().push(gate);
            }
        }

        for (name, results) in by_variant {
            let file_gates = gates.remove(&name).unwrap_or_default();
            failed_gates.extend(
                file_gates
                    .iter()
                    .filter(|g| !g.pass)
                    .map(|g| format!("{name}: {} {}", g.gate, g.subject)),
            );
            let status = if results.iter().all(|r| r.status.is_ok()) {
                RunStatus::Ok
            } else {
                RunStatus::Failed
            };
            let file = BenchFile {
                nvcc_version: crate::build::recorded_nvcc(ctx.root, &name),
                precision: workloads.class_of(ctx.pipeline, &name),
                arch: Some(arch.clone()),
                driver: checks.get(&name).cloned(),
                measured: measured.remove(&name),
                results,
                gates: file_gates,
                ..blank(&name, status)
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

/// A baseline to compare with: its name, the workload it ran, and its file when it can be
/// compared.
type Baseline = (String, Option<String>, Option<BenchFile>);

/// Each baseline to compare with: its name, the workload it ran
/// ([`Workloads::of_baseline`]), and its file when it can be compared (why not goes to the
/// log).
fn read_baselines(
    ctx: &RunCtx,
    o: &options::Options,
    workloads: &Workloads,
) -> anyhow::Result<Vec<Baseline>> {
    let mut out = Vec::new();
    for b in baseline_names(o, ctx.root) {
        let file = match read_baseline(ctx.root, &b, o.method.name()) {
            Ok(file) => Some(file),
            Err(why) => {
                append_to_log(ctx.log, &format!("no speedups vs {b}: {why}"))?;
                None
            }
        };
        let workload = file
            .as_ref()
            .and_then(|f| workloads.of_baseline(f))
            .map(str::to_string);
        if file.is_some() && workload.is_none() {
            append_to_log(
                ctx.log,
                &format!("no speedups vs {b}: its file names no workload of the pipeline, and its results' dims are none of theirs"),
            )?;
        }
        out.push((b, workload, file));
    }
    Ok(out)
}

/// The driver's figures for each built variant's entry on GPU `gpu`, checked against its
/// build record's ptxas figures for `arch`, all in one child process; a check that cannot
/// run says why.
fn driver_checks(
    ctx: &RunCtx,
    gpu: u32,
    arch: &str,
    built: &[&String],
) -> BTreeMap<String, DriverCheck> {
    let records: Vec<(&String, Option<BuildRecord>)> = built
        .iter()
        .map(|&name| {
            let record = std::fs::read(ctx.root.join(record_path(name)))
                .ok()
                .and_then(|b| serde_json::from_slice::<BuildRecord>(&b).ok());
            (name, record)
        })
        .collect();
    let mut checks = BTreeMap::new();
    let mut names = Vec::new();
    let mut kernels = Vec::new();
    for (name, record) in &records {
        match record.as_ref().and_then(|r| r.entry_on(arch)) {
            None => {
                checks.insert(
                    (*name).clone(),
                    driver::skipped(&format!(
                        "artifacts/build/{name}.json has no {arch} entry to compare with"
                    )),
                );
            }
            Some(res) => {
                names.push((*name).clone());
                kernels.push(driver::Kernel {
                    cubin: ctx.root.join(cubin_path(name, arch)),
                    res,
                });
            }
        }
    }
    if kernels.is_empty() {
        return checks;
    }
    let read = driver::cross_check(
        ctx.executor,
        ctx.cancel,
        ctx.repro_exe,
        ctx.root,
        gpu,
        &kernels,
    );
    match read {
        Ok(read) => checks.extend(names.into_iter().zip(read)),
        Err(e) => {
            let why = format!("could not read the driver's attributes: {e:#}");
            checks.extend(names.into_iter().map(|n| (n, driver::skipped(&why))));
        }
    }
    checks
}
