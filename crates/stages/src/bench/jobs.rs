//! The bench stage's runs: the plan (variant × shape × recipe × seed) and the GPU workers
//! that run them, one at a time per GPU slot.

use super::options::Options;
use crate::slots::run_on_slots;
use repro_gpu::client::ExecRequest;
use repro_gpu::client::ExecTarget;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::Workloads;
use repro_pipeline::Pipeline;
use repro_schema::BenchResult;
use repro_schema::RunStatus;
use std::sync::atomic::Ordering;

/// One `repro exec` of the bench stage.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BenchJob {
    pub(super) variant: String,
    pub(super) workload: String,
    pub(super) shape: String,
    /// The shape's dimensions (what a run without a record still says).
    pub(super) dims: Bindings,
    pub(super) inputs: String,
    pub(super) seed: u64,
    /// Only a shape's first recipe is timed; the others are checked for correctness.
    pub(super) timed: bool,
}

/// Every (variant, shape, recipe, seed) of each variant's workload, variant-major.
pub(super) fn plan(
    w: &Workloads,
    p: &Pipeline,
    variants: &[&String],
    o: &Options,
) -> Vec<BenchJob> {
    let mut jobs = Vec::new();
    for &v in variants {
        let Some((name, decl)) = w.of_variant(p, v) else {
            continue;
        };
        for s in o.shapes_of(decl) {
            let dims = decl.shape_dims(&s).unwrap_or_default();
            for (i, recipe) in decl.recipes_of(&s).into_iter().enumerate() {
                for &seed in &decl.seeds {
                    jobs.push(BenchJob {
                        variant: v.clone(),
                        workload: name.to_string(),
                        shape: s.clone(),
                        dims: dims.clone(),
                        inputs: recipe.to_string(),
                        seed,
                        timed: i == 0,
                    });
                }
            }
        }
    }
    jobs
}

/// Run every job on one `repro exec --worker` per GPU slot (one thread each), and return
/// the results in job order. A run that faults, hangs or finds no worker is a `failed`
/// record.
pub(super) fn run_jobs(
    ctx: &RunCtx,
    o: &Options,
    jobs: &[BenchJob],
    slots: u32,
) -> anyhow::Result<Vec<BenchResult>> {
    // Workers read the project's pipeline.yaml (as the profile stage's children do).
    let workers = crate::gpu_nodes::workers(ctx, slots);
    let mut results: Vec<Option<BenchResult>> = vec![None; jobs.len()];
    let mut done = 0;
    run_on_slots(
        slots,
        jobs,
        ctx.cancel,
        |gpu, job| {
            let req = ExecRequest {
                target: ExecTarget::Variant(job.variant.clone()),
                workload: Some(job.workload.clone()),
                shape: job.shape.clone(),
                inputs: Some(job.inputs.clone()),
                precision: None,
                seed: job.seed,
                warmup: o.warmup,
                iters: o.iters,
                l2: o.l2,
                method: o.method,
                timing: job.timed,
                profile: None,
                check: true,
            };
            workers.run(gpu, &req, &job.dims, o.timeout)
        },
        |i, r| {
            done += 1;
            let j = &jobs[i];
            (ctx.progress)(&format!(
                "{done}/{} {} {} {} seed {}: {}",
                jobs.len(),
                j.variant,
                j.shape,
                j.inputs,
                j.seed,
                describe(&r)
            ));
            results[i] = Some(r);
        },
    );
    if ctx.cancel.load(Ordering::SeqCst) {
        anyhow::bail!("interrupted");
    }
    Ok(results
        .into_iter()
        .map(|r| r.expect("every job reports"))
        .collect())
}

pub(super) fn describe(r: &BenchResult) -> String {
    let verdict = |pass: bool| if pass { "✓" } else { "✗ incorrect" };
    match (&r.status, r.p50_us, r.correctness_pass) {
        (RunStatus::Ok, Some(p50), Some(pass)) => format!("{p50:.2} µs {}", verdict(pass)),
        (RunStatus::Ok, None, Some(pass)) => format!("checked {}", verdict(pass)),
        _ => format!("{} ({})", r.status, r.error.as_deref().unwrap_or("")),
    }
}
