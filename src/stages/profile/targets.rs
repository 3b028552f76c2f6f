//! What the profile stage profiles: its targets (the control, variants, the tune elite)
//! resolved to programs, and the records of targets that cannot run.

use super::options::ProfileOptions;
use super::TOPK_FILE;
use crate::pipeline::{Pipeline, Shape};
use crate::schema::NcuTarget;
use anyhow::Context as _;
use std::path::{Path, PathBuf};

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
pub(super) fn entry_of(pipeline: &Pipeline, variant: &str) -> Option<String> {
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
pub(super) fn elite_ranks(root: &Path) -> Result<Vec<u32>, String> {
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

pub(super) fn skipped_target(label: &str, variant: &str, entry: &str, reason: String) -> NcuTarget {
    status_target(label, variant, entry, "skipped", reason)
}

pub(super) fn status_target(
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
        measured: None,
    }
}

/// The workload's primary shape (name and dimensions).
pub(super) fn primary_shape(pipeline: &Pipeline) -> anyhow::Result<(String, Shape)> {
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
