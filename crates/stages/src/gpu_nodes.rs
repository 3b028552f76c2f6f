//! What the GPU stages (bench, tune) share about where their measurements run: which GPUs
//! there are (through the stage's executor), how many jobs at once, and the rule that one
//! result does not mix GPU models unless the stage says `allow_mixed_gpus: true`.

use repro_executor::Executor;
use repro_gpu::worker::pool::Workers;
use repro_gpu::{discover, discover::StageJobs};
use repro_gpu::{gpu_identity, GpuInfo, NoGpu, NO_GPU};
use repro_pipeline::kind::RunCtx;
use repro_pipeline::{Pipeline, StageSpec};
use repro_schema::BenchResult;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

/// The option that lets one result mix GPU models.
pub const ALLOW_MIXED_GPUS: &str = "allow_mixed_gpus";

/// The GPUs the stage's `repro exec` jobs will run on (see [`discover::stage_gpus`]).
pub fn stage_gpus(ctx: &RunCtx) -> Result<Vec<GpuInfo>, NoGpu> {
    discover::stage_gpus(&stage_jobs(ctx))
}

/// How `ctx`'s stage starts its GPU jobs: through its executor, the running `repro` on the
/// project's pipeline file, output to the stage's log.
pub fn stage_jobs<'a>(ctx: &RunCtx<'a>) -> StageJobs<'a> {
    StageJobs {
        executor: ctx.executor,
        cancel: ctx.cancel,
        repro_exe: ctx.repro_exe,
        pipeline_file: ctx.pipeline_file,
        root: ctx.root,
        log: Some(ctx.log),
    }
}

/// One GPU worker per slot for `ctx`'s stage (docs/guide/gpu.md, "The GPU worker").
pub fn workers<'a>(ctx: &RunCtx<'a>, slots: u32) -> Workers<'a> {
    Workers::new(stage_jobs(ctx), slots)
}

/// The hardware part of a GPU stage's fingerprint. Locally: this machine's GPUs. When
/// pipeline.yaml sends the stage to Slurm, fingerprinting cannot run a job, so it is the
/// request (partition and gres), and the records the stage writes name each measurement's
/// node and GPU (`node`, `device_name`, `device_index`).
pub fn hardware(pipeline: &Pipeline, spec: &StageSpec, root: &Path) -> String {
    if let Some(request) = slurm_request(pipeline, spec) {
        return request;
    }
    match repro_gpu::probe_cached(root) {
        Ok(gpus) => gpu_identity(&gpus),
        Err(no) => format!("{NO_GPU}: {no}"),
    }
}

/// `slurm partition P gres G` when pipeline.yaml sends the stage to Slurm.
pub fn slurm_request(pipeline: &Pipeline, spec: &StageSpec) -> Option<String> {
    if repro_executor::configured_kind(pipeline.executor.as_ref(), spec.executor.as_ref())
        != "slurm"
    {
        return None;
    }
    let s = repro_executor::slurm::SlurmSettings::for_stage(
        pipeline.executor.as_ref(),
        spec.executor.as_ref(),
    );
    Some(format!(
        "slurm partition {} gres {}",
        s.partition.as_deref().unwrap_or("(default)"),
        s.gres.as_deref().unwrap_or("(none)")
    ))
}

/// What to do when [`stage_gpus`] found none; `what` is e.g. "run the bench stage".
pub fn no_gpu_fix(executor: &dyn Executor, what: &str) -> String {
    if executor.runs_jobs_here() {
        format!("{what} on a machine with an NVIDIA GPU and its driver")
    } else {
        format!(
            "check that `partition`/`gres` under `executor:` reach GPU nodes with the NVIDIA driver and that the repro binary is on the filesystem they share (the stage's log has the probe job's output); or {what} with `--executor local` on a GPU machine"
        )
    }
}

/// How many GPU jobs run at once: locally one per visible GPU (at most the executor's
/// limit); on a cluster the executor's limit, since the probe saw only one node's GPUs.
pub fn gpu_slots(executor: &dyn Executor, gpus: &[GpuInfo]) -> u32 {
    if executor.runs_jobs_here() {
        executor.gpu_slots().clamp(1, gpus.len().max(1) as u32)
    } else {
        executor.gpu_slots().max(1)
    }
}

/// Collects which node measured on which GPU model, and refuses a second model unless
/// mixing is allowed. Shared by the threads of one stage run.
#[derive(Debug, Default)]
pub struct OneGpuModel {
    allow_mixed: bool,
    /// node → GPU models it measured on.
    seen: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl OneGpuModel {
    pub fn new(allow_mixed: bool) -> Self {
        OneGpuModel {
            allow_mixed,
            seen: Mutex::default(),
        }
    }

    /// Counts `where_` (a node, or a description such as `the GPU probe`) as having `model`.
    pub fn expect(&self, where_: &str, model: &str) -> Result<(), String> {
        self.note(where_, model)
    }

    /// Adds the records (those that name a device); an error once they bring a second GPU
    /// model into the stage's result.
    pub fn admit(&self, records: &[BenchResult]) -> Result<(), String> {
        for r in records {
            if let Some(model) = &r.device_name {
                self.note(r.node.as_deref().unwrap_or("an unnamed node"), model)?;
            }
        }
        Ok(())
    }

    fn note(&self, node: &str, model: &str) -> Result<(), String> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.entry(node.to_string())
            .or_default()
            .insert(model.to_string());
        let models: BTreeSet<&String> = seen.values().flatten().collect();
        if self.allow_mixed || models.len() <= 1 {
            return Ok(());
        }
        let listing: Vec<String> = seen
            .iter()
            .map(|(node, models)| {
                let models: Vec<&str> = models.iter().map(String::as_str).collect();
                format!("  {node} → {}", models.join(", "))
            })
            .collect();
        Err(format!(
            "the measurements of this stage came from {} different GPU models, whose timings are not comparable in one result:\n{}\n  help: request one model (e.g. `gres: gpu:h100:1`, or a partition of one kind, under `executor:`), or set `{ALLOW_MIXED_GPUS}: true` on the stage to accept the mix",
            models.len(),
            listing.join("\n")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_schema::RunStatus;

    fn rec(node: Option<&str>, model: Option<&str>) -> BenchResult {
        let mut r = BenchResult::blank("small", Default::default(), 0, (1, 1), RunStatus::Ok);
        r.node = node.map(String::from);
        r.device_name = model.map(String::from);
        r
    }

    #[test]
    fn one_model_on_many_nodes_is_fine() {
        let guard = OneGpuModel::new(false);
        guard
            .admit(&[
                rec(Some("n1"), Some("NVIDIA L4")),
                rec(Some("n2"), Some("NVIDIA L4")),
            ])
            .unwrap();
        // A failed record names no device: it cannot mix anything.
        guard.admit(&[rec(Some("n3"), None)]).unwrap();
    }

    #[test]
    fn a_second_model_is_refused_with_node_to_model_listing() {
        let guard = OneGpuModel::new(false);
        guard
            .admit(&[rec(Some("l4-01"), Some("NVIDIA L4"))])
            .unwrap();
        let err = guard
            .admit(&[rec(Some("h100-07"), Some("NVIDIA H100 80GB HBM3"))])
            .unwrap_err();
        assert!(err.contains("2 different GPU models"), "{err}");
        assert!(err.contains("  h100-07 → NVIDIA H100 80GB HBM3\n"), "{err}");
        assert!(err.contains("  l4-01 → NVIDIA L4\n"), "{err}");
        assert!(err.contains("allow_mixed_gpus: true"), "{err}");
    }

    #[test]
    fn the_probed_model_counts_too() {
        let guard = OneGpuModel::new(false);
        guard.expect("the GPU probe", "NVIDIA L4").unwrap();
        let err = guard
            .admit(&[rec(Some("a100-2"), Some("NVIDIA A100-SXM4-80GB"))])
            .unwrap_err();
        assert!(err.contains("the GPU probe → NVIDIA L4"), "{err}");
    }

    #[test]
    fn mixing_is_allowed_when_asked() {
        let guard = OneGpuModel::new(true);
        guard
            .admit(&[
                rec(Some("l4-01"), Some("NVIDIA L4")),
                rec(Some("h100-07"), Some("NVIDIA H100 80GB HBM3")),
                rec(None, Some("NVIDIA A100")),
            ])
            .unwrap();
    }

    #[test]
    fn on_slurm_the_hardware_is_the_request_with_the_stage_override() {
        let pipeline: Pipeline = serde_yaml::from_str(
            "version: 1\nexecutor: {kind: slurm, partition: gpu, gres: \"gpu:l4:1\"}\nstages:\n  \
             bench: {uses: bench}\n  other: {uses: bench, executor: {kind: slurm, gres: \"gpu:h100:1\"}}\n  \
             here: {uses: bench, executor: {kind: local}}\n",
        )
        .unwrap();
        let root = Path::new("/nonexistent");
        let hw = |stage: &str| hardware(&pipeline, &pipeline.stages[stage], root);
        assert_eq!(hw("bench"), "slurm partition gpu gres gpu:l4:1");
        assert_eq!(hw("other"), "slurm partition gpu gres gpu:h100:1");
        // A local stage fingerprints this machine's GPUs (or says there are none).
        assert!(!hw("here").starts_with("slurm"), "{}", hw("here"));
    }
}
