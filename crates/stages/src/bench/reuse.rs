//! Which variants the bench stage measures again ([`crate::reuse`]): each variant's
//! key, and its committed record when that key is unchanged.

use super::options::Options;
use crate::{reuse, reuse::digest_json, reuse::file_digest, reuse::Committed, reuse::Key};
use repro_gpu::GpuInfo;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::{workload::Declaration, workload::Workloads};
use repro_schema::BenchFile;
use serde_json::json;
use std::collections::BTreeMap;

/// The key of each of `variants` measured on `gpus` (which load the `arch` cubins) with
/// options `o`. A variant whose cubin cannot be read has none, and all have none when the
/// GPUs give no key.
pub(super) fn keys(
    ctx: &RunCtx,
    workloads: &Workloads,
    o: &Options,
    arch: &str,
    gpus: &[GpuInfo],
    variants: &[&String],
) -> BTreeMap<String, Key> {
    let Some(gpu) = reuse::gpu_key(gpus) else {
        return BTreeMap::new();
    };
    let p = ctx.pipeline;
    variants
        .iter()
        .filter_map(|&v| {
            let (name, decl) = workloads.of_variant(p, v)?;
            let workload = workload_digest(ctx, workloads, (name, decl), o, arch)?;
            // The cubin `repro exec` loads for the variant.
            let (cubin, _) = repro_gpu::exec::variant_cubin(p, ctx.pipeline_file, v, arch).ok()?;
            let harness = json!({
                "revision": repro_gpu::exec::HARNESS_REVISION,
                "warmup": o.warmup,
                "iters": o.iters,
                "l2": o.l2.name(),
                "method": o.method.name(),
                "precision": workloads.class_of(p, v),
                "gates": decl.gates,
            });
            let mut key = gpu.clone();
            key.insert("cubin_sha256".into(), file_digest(&cubin)?);
            key.insert("workload_sha256".into(), workload);
            key.insert("harness_sha256".into(), digest_json(&harness));
            Some((v.clone(), key))
        })
        .collect()
}

/// The digest of what every variant of workload `name` runs on: the declaration's
/// arguments, launch and recipes, the shapes measured (dimensions and recipes), the seeds,
/// and the reference (its `arch` cubin, or its command).
fn workload_digest(
    ctx: &RunCtx,
    workloads: &Workloads,
    (name, decl): (&str, &Declaration),
    o: &Options,
    arch: &str,
) -> Option<String> {
    let shapes: Vec<_> = o
        .shapes_of(decl)
        .iter()
        .map(|s| json!({"name": s, "dims": decl.shapes.get(s), "recipes": decl.recipes_of(s)}))
        .collect();
    Some(digest_json(&json!({
        "args": decl.args,
        "generators": decl.generators,
        "recipes": decl.recipes,
        "launch": decl.launch,
        "shapes": shapes,
        "seeds": decl.seeds,
        "reference": reuse::reference_key(ctx.root, workloads, name, arch)?,
    })))
}

/// The committed record of `variant` when it may stand for a new measurement under `key`:
/// the lock vouches for it, every run in it completed, and its key is `key`. Its results
/// come back without speedups (the stage computes those again) and marked as reused.
pub(super) fn committed_record(
    committed: &Committed,
    variant: &str,
    key: &Key,
) -> Option<BenchFile> {
    let bytes = committed.read(&format!("artifacts/bench/{variant}.json"))?;
    let mut file: BenchFile = serde_json::from_slice(&bytes).ok()?;
    if !file.status.is_ok() || file.results.iter().any(|r| !r.status.is_ok()) {
        return None;
    }
    file.measured = Some(reuse::reusable(file.measured.as_ref(), key)?);
    for r in &mut file.results {
        r.speedups.clear();
    }
    Some(file)
}
