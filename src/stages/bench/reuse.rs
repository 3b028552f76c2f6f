//! Which variants the bench stage measures again ([`crate::stages::reuse`]): each variant's
//! key, and its committed record when that key is unchanged.

use super::options::Options;
use crate::engine::RunCtx;
use crate::gpu::GpuInfo;
use crate::schema::BenchFile;
use crate::stages::reuse::{self, digest_json, file_digest, Committed, Key};
use serde_json::json;
use std::collections::BTreeMap;

/// The key of each of `variants` measured on `gpus` (which load the `arch` cubins) with
/// options `o`. A variant whose cubin cannot be read has none, and all have none when the
/// GPUs give no key.
pub(super) fn keys(
    ctx: &RunCtx,
    o: &Options,
    arch: &str,
    gpus: &[GpuInfo],
    variants: &[&String],
) -> BTreeMap<String, Key> {
    let (Some(gpu), Some(workload)) = (reuse::gpu_key(gpus), workload_digest(ctx, o, arch)) else {
        return BTreeMap::new();
    };
    let p = ctx.pipeline;
    variants
        .iter()
        .filter_map(|&v| {
            // The cubin `repro exec` loads for the variant.
            let (cubin, _) = crate::gpu::exec::variant_cubin(p, ctx.pipeline_file, v, arch).ok()?;
            let harness = json!({
                "revision": crate::gpu::exec::HARNESS_REVISION,
                "warmup": o.warmup,
                "iters": o.iters,
                "l2": o.l2.name(),
                "method": o.method.name(),
                "precision": p.precision_of(v).name(),
                "correctness": p.gates.correctness,
            });
            let mut key = gpu.clone();
            key.insert("cubin_sha256".into(), file_digest(&cubin)?);
            key.insert("workload_sha256".into(), workload.clone());
            key.insert("harness_sha256".into(), digest_json(&harness));
            Some((v.clone(), key))
        })
        .collect()
}

/// The digest of what every variant runs on: the shapes measured (dimensions and recipes),
/// the seeds, and the reference kernel (its `arch` cubin).
fn workload_digest(ctx: &RunCtx, o: &Options, arch: &str) -> Option<String> {
    let w = ctx.pipeline.workload.as_ref()?;
    let shapes: Vec<_> = o
        .shapes()
        .iter()
        .map(|s| json!({"name": s, "dims": w.shapes.get(s), "recipes": w.recipes(s)}))
        .collect();
    let (reference, entry) =
        crate::gpu::exec::reference(Some(ctx.pipeline), ctx.root, Some(arch), None);
    Some(digest_json(&json!({
        "shapes": shapes,
        "seeds": w.seeds,
        "reference": {"cubin_sha256": file_digest(&reference)?, "entry": entry},
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
    if file.status != "ok" || file.results.iter().any(|r| r.status != "ok") {
        return None;
    }
    file.measured = Some(reuse::reusable(file.measured.as_ref(), key)?);
    for r in &mut file.results {
        r.speedups.clear();
    }
    Some(file)
}
