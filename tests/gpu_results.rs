//! GPU test (`REPRO_GPU_TESTS=1`; otherwise it prints a "skipped:" line): on real kernels
//! and a real GPU, the GPU stages record the GPU as an input, a kernel target that is an
//! earlier one (the same cubin and launch) is profiled once, and a comment-only kernel edit
//! reruns nothing (the build records sources by their code) and leaves the lock as it was.

mod common;
#[path = "support/table.rs"]
mod table;

use common::*;
use std::path::Path;
use table::stage_line;

/// The shipped kernel on one small shape, a tiny tune and a profile of the control and of a
/// variant compiled the same way: every GPU stage kind, in about half a minute on an H100.
const PIPELINE: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 2, S: 128, D: 64}
  primary: small
  seeds: [0]
  reference: {source: kernels/reference.cu, entry: sdpa_reference_f32}
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  stage2-baseline: {kernel: sdpa_fp8, defines: {USE_CP_ASYNC: 1, USE_WMMA_PV: 1, USE_WARP_SPECIALIZATION: 0}}
  same-as-control: {kernel: sdpa_fp8, defines: {USE_CP_ASYNC: 1, USE_WMMA_PV: 1, USE_WARP_SPECIALIZATION: 0}}
control: stage2-baseline
stages:
  build: {uses: build}
  gpu-info:
    uses: cmd
    run: [sh, -c, "nvidia-smi --query-gpu=name --format=csv,noheader > gpu.txt"]
    outs: [gpu.txt]
    gpu: true
  bench: {uses: bench, needs: [build], warmup: 5, iters: 20}
  evo-tune:
    uses: tune
    needs: [build]
    base: stage2-baseline
    budget: 4
    population: 4
    elite: 1
    seed: 0
    warmup: 5
    iters: 20
    space: {TILE_N: [32, 64], NUM_WARPS: [4, 8]}
  ncu-profile: {uses: profile, needs: [bench, evo-tune], targets: [control, same-as-control]}
"#;

fn run(root: &Path, args: &[&str]) -> String {
    let (status, text) = run_repro(root, args);
    assert!(
        status.code().is_some_and(|c| c <= 1),
        "repro {args:?}:\n{text}"
    );
    text
}

#[test]
fn gpu_stages_record_the_gpu_and_a_comment_only_edit_reruns_nothing() {
    if !gpu_tests_enabled("gpu_stages_record_the_gpu_and_a_comment_only_edit_reruns_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let arch = gpu_project(
        root,
        &["kernels/sdpa_fp8.cu", "kernels/reference.cu"],
        PIPELINE,
    );
    let first = run(root, &["run", "-q"]);
    for stage in ["build", "gpu-info", "bench", "evo-tune", "ncu-profile"] {
        let line = stage_line(&first, stage);
        assert!(
            line.contains("passed") || line.contains("gate failed"),
            "{line}\n{first}"
        );
    }
    let gpu = std::fs::read_to_string(root.join("gpu.txt")).unwrap();
    let model = gpu.lines().next().unwrap().trim().to_string();
    let lock = std::fs::read_to_string(root.join("artifacts/repro.lock")).unwrap();
    let hardware_lines = lock
        .lines()
        .filter(|l| l.trim_start().starts_with("hardware:") && l.contains(&model))
        .count();
    assert_eq!(
        hardware_lines, 4,
        "bench, evo-tune, ncu-profile and gpu-info name the {model}:\n{lock}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("artifacts/ncu/summary.json")).unwrap())
            .unwrap();
    let record = |label: &str| {
        summary["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["target"] == label)
            .unwrap_or_else(|| panic!("no {label} in {summary:#}"))
            .clone()
    };
    let (control, twin) = (record("control"), record("same-as-control"));
    assert_eq!(twin["status"], "ok", "{twin:#}");
    assert!(
        twin["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("profiled once as control,")),
        "{twin:#}"
    );
    assert_eq!(twin["kernel_time_us"], control["kernel_time_us"]);
    assert_eq!(twin["measured"]["key"], control["measured"]["key"]);
    let log = std::fs::read_to_string(root.join(".repro/logs/ncu-profile.log")).unwrap();
    assert!(
        log.contains("ncu: 1 kernel targets profiled"),
        "one ncu run for the two targets:\n{log}"
    );
    let cubin_file = root.join(repro::pipeline::paths::cubin_path("stage2-baseline", &arch));
    let cubin = std::fs::read(&cubin_file).unwrap();

    let kernel = root.join("kernels/sdpa_fp8.cu");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("// A comment-only edit.\n{text}")).unwrap();
    let second = run(root, &["run", "-q"]);
    assert_eq!(
        std::fs::read_to_string(root.join("artifacts/repro.lock")).unwrap(),
        lock,
        "the build records sources by their code: the lock is as it was"
    );
    assert_eq!(
        std::fs::read(&cubin_file).unwrap(),
        cubin,
        "the edit leaves the cubin byte-identical"
    );
    for stage in ["build", "bench", "evo-tune", "ncu-profile"] {
        assert!(
            stage_line(&second, stage).contains("up-to-date"),
            "{stage} must be up to date after a comment-only edit:\n{second}"
        );
    }
}
