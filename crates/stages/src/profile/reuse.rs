//! Which targets the profile stage profiles again ([`crate::reuse`]): a target's
//! key, and its committed record and CSV when that key is unchanged.

use super::ncu_call::NcuCall;
use super::targets::{Program, Target};
use super::Profiled;
use super::OUT_DIR;
use crate::{reuse, reuse::digest_json, reuse::file_digest, reuse::Committed, reuse::Key};
use repro_pipeline::kind::RunCtx;
use repro_pipeline::workload::Workloads;
use repro_schema::{MetricSet, NcuSummary};
use serde_json::json;
use std::path::{Path, PathBuf};

/// What every target's key shares: the GPU, ncu and the ncu options.
pub(super) struct Common {
    gpu: Key,
    /// The architecture of the cubins the profiled GPU loads.
    arch: String,
    ncu: String,
    workloads: Workloads,
    harness: String,
}

impl Common {
    /// `None` (nothing reused) when the GPU or ncu's version cannot be known. `one_pass`:
    /// the metric list of the targets without the full profile.
    pub(super) fn new(
        ctx: &RunCtx,
        call: &NcuCall,
        one_pass: &[String],
        ncu_version: Option<&str>,
    ) -> Option<Common> {
        // ncu runs on the first GPU the stage's jobs see.
        let gpus = crate::gpu_nodes::stage_gpus(ctx).ok()?;
        let gpu = reuse::gpu_key(gpus.get(..1)?)?;
        let arch = crate::build::arch::for_gpu(&gpus[0], &ctx.pipeline.arch).ok()?;
        let o = call.opts;
        let harness = digest_json(&json!({
            "revision": repro_gpu::exec::HARNESS_REVISION,
            "metrics": call.metrics,
            "one_pass_metrics": one_pass,
            "warmup": o.warmup,
            "iters": o.iters,
            "launch_skip": o.launch_skip(),
            "launches": o.launches,
            "clock_control": o.clock_control,
            "cache_control": o.cache_control,
            "kernel_time_pass": super::own_time::METRIC,
            "keep_report": o.keep_report,
            "env": ctx.spec.env,
        }));
        Some(Common {
            gpu,
            arch,
            ncu: ncu_version?.to_string(),
            workloads: Workloads::of(ctx.pipeline),
            harness,
        })
    }

    /// `target`'s key: the common part, the digest of the cubin it loads (and the defines
    /// its launch reads), and of its workload on its shape.
    pub(super) fn key(&self, ctx: &RunCtx, target: &Target) -> Option<Key> {
        if let Program::Script(run) = &target.program {
            return self.script_key(ctx, target, run);
        }
        let (cubin, defines) = match &target.program {
            Program::Variant(v) => (
                repro_gpu::exec::variant_cubin(ctx.pipeline, ctx.pipeline_file, v, &self.arch)
                    .ok()?
                    .0,
                repro_gpu::exec::integer_defines(ctx.pipeline, v),
            ),
            Program::Cubin { path, defines, .. } => (path.clone(), defines.clone()),
            Program::Script(_) => unreachable!("a baseline's key is script_key's"),
        };
        let decl = self.workloads.get(&target.workload)?;
        // Only the defines the launch reads, a variant's as a tune elite's: two targets with
        // one key are one measurement (super::twins).
        let defines = decl.launch.defines_read(&defines);
        let reference =
            reuse::reference_key(ctx.root, &self.workloads, &target.workload, &self.arch)?;
        let workload = digest_json(&json!({
            "args": decl.args,
            "launch": decl.launch,
            "shape": target.shape,
            "dims": decl.shapes.get(&target.shape),
            "defines": defines,
            "reference": reference,
        }));
        let mut key = self.gpu.clone();
        key.insert("ncu".into(), self.ncu.clone());
        key.insert("cubin_sha256".into(), file_digest(&cubin)?);
        key.insert("entry".into(), target.entry.clone());
        key.insert("workload_sha256".into(), workload);
        key.insert("harness_sha256".into(), self.harness.clone());
        Some(key)
    }
}

impl Common {
    /// A baseline call's key: the common part, its command and the digest of every file it
    /// names (the script), its shape's dimensions, and the `defines` of the baseline's bench
    /// record (the backend it chose, the torch version).
    fn script_key(&self, ctx: &RunCtx, target: &Target, run: &[String]) -> Option<Key> {
        let files: Vec<(String, String)> = script_files(ctx.root, run)
            .iter()
            .map(|f| Some((f.display().to_string(), file_digest(&ctx.root.join(f))?)))
            .collect::<Option<_>>()?;
        let record = ctx.root.join(format!(
            "{}/{}.json",
            repro_schema::BASELINE_DIR,
            target.variant
        ));
        let defines = std::fs::read(record)
            .ok()
            .and_then(|t| serde_json::from_slice::<repro_schema::BenchFile>(&t).ok())
            .map(|f| f.defines);
        let decl = self.workloads.get(&target.workload)?;
        let mut key = self.gpu.clone();
        key.insert("ncu".into(), self.ncu.clone());
        key.insert(
            "script_sha256".into(),
            digest_json(&json!({
                "run": run,
                "files": files,
                "shape": target.shape,
                "dims": decl.shapes.get(&target.shape),
                "baseline_defines": defines,
            })),
        );
        key.insert("harness_sha256".into(), self.harness.clone());
        Some(key)
    }
}

/// The committed record of `target` and its ncu CSVs (the full profile's too when it had
/// one) when they may stand for a new profile
/// under `key`: the lock vouches for them, it was profiled, and its key is `key`. With
/// `keep_report` the full report must be there too.
pub(super) fn committed_target(
    committed: &Committed,
    root: &Path,
    target: &Target,
    key: &Key,
    keep_report: bool,
) -> Option<Profiled> {
    let summary = committed.read(&format!("{OUT_DIR}/summary.json"))?;
    let summary: NcuSummary = serde_json::from_slice(&summary).ok()?;
    let mut record = summary
        .targets
        .into_iter()
        .find(|t| t.target == target.label && t.status.is_ok())?;
    record.measured = Some(reuse::reusable(record.measured.as_ref(), key)?);
    let text = |name: &str| {
        let bytes = committed.read(&format!("{OUT_DIR}/{}.{name}", target.label))?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    };
    let (csv, time_csv) = (text("csv")?, text("time.csv")?);
    let full_csv = match record.metric_set {
        Some(MetricSet::Full) => Some(text("full.csv")?),
        _ => None,
    };
    let report = root.join(format!(".repro/ncu/{}.ncu-rep", target.label));
    if keep_report && !report.is_file() {
        return None;
    }
    Some(Profiled {
        record,
        csv,
        time_csv,
        full_csv,
    })
}

/// The files a baseline's command runs: each file its `run` names (relative to the project
/// root) and every file beside it with the same extension, the modules a script imports.
/// Sorted, without repeats.
pub(super) fn script_files(root: &Path, run: &[String]) -> Vec<PathBuf> {
    let mut files = std::collections::BTreeSet::new();
    for named in run.iter().map(Path::new).filter(|a| a.is_relative()) {
        if !root.join(named).is_file() {
            continue;
        }
        let dir = named.parent().unwrap_or(Path::new(""));
        let beside = std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten();
        files.extend(
            beside
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| dir.join(e.file_name()))
                .filter(|f| f.extension() == named.extension()),
        );
    }
    files.into_iter().collect()
}
