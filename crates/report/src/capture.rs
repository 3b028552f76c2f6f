//! What the manifest's `environment:` is captured from: the tools and GPU that the run's
//! records name, so a report rendered on another machine tells where it was measured.

use crate::{artifacts::Artifacts, state::RunState};

/// What the results were made with, from what was recorded: nvcc from the build records;
/// ncu, python and torch from the lock entries of the stages that ran them (torch from the
/// baseline records when they carry it); the GPU from the lock entry of the first stage
/// measured on one, with the previous manifest's `gpu:` for what the lock does not hold.
pub fn capture_options(
    pipeline: &repro_pipeline::Pipeline,
    artifacts: &Artifacts,
    state: &RunState,
    previous_manifest: Option<&serde_yaml::Value>,
) -> repro_gpu::env::CaptureOptions {
    let nvcc: std::collections::BTreeSet<&str> = artifacts
        .builds
        .iter()
        .flatten()
        .map(|b| b.nvcc_version.as_str())
        .collect();
    // In pipeline order, the recorded stages that ran (not skipped for want of the tool).
    let ran = || {
        pipeline
            .stages
            .keys()
            .filter_map(|n| state.stages.get(n))
            .filter(|s| s.status.is_some() && !s.skipped())
    };
    let tool = |name: &str| {
        ran()
            .find_map(|s| s.tools.get(name))
            .filter(|v| !v.starts_with("not found") && v.as_str() != "missing")
            .cloned()
    };
    let baselines = artifacts.baselines.as_deref().unwrap_or_default();
    let torch_from_records = baselines.iter().find_map(|b| {
        b.defines
            .get("torch")
            .or_else(|| b.defines.get("torch_version"))
            .cloned()
    });
    repro_gpu::env::CaptureOptions {
        nvcc_from_records: (!nvcc.is_empty())
            .then(|| nvcc.into_iter().collect::<Vec<_>>().join("; ")),
        nvcc_pin: repro_pipeline::toolchain::pin(pipeline).copied(),
        ncu: tool("ncu"),
        python: tool("python"),
        torch: torch_from_records.or_else(|| tool("torch")),
        measured_on: ran()
            .filter_map(|s| s.hardware.clone())
            .find(|h| repro_gpu::names_a_gpu(h)),
        previous_gpu: previous_manifest.and_then(|m| serde_yaml::from_value(m["gpu"].clone()).ok()),
    }
}
