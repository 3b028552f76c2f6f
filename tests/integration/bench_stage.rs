//! The bench stage on a machine without a CUDA driver: skipped with the reason and the
//! fix, and every variant's file says `skipped` (no crash, no silent success).

use crate::common;

use repro::engine::{Configs, Configured, StageKind, StageOutcome};
use repro::pipeline::Pipeline;
use repro::schema::{BenchFile, RunStatus};

const PIPELINE: &str = "version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 1, S: 32, D: 64}
  primary: small
kernels:
  k: {source: k.cu, entry: sdpa_fp8_fwd}
variants:
  a: {kernel: k}
  b: {kernel: k, defines: {TILE_M: 64}}
control: a
stages:
  bench: {uses: bench}
";

#[test]
fn without_a_driver_the_stage_is_skipped_with_the_reason() {
    if repro::gpu::driver_library_loads().is_ok() {
        common::say_skipped(
            "this machine has a CUDA driver, so the no-driver path cannot be shown",
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    match common::run_bench_stage(PIPELINE, root).0 {
        StageOutcome::Skipped { reason, fix } => {
            assert!(
                reason.starts_with("no CUDA driver (libcuda.so.1) found"),
                "{reason}"
            );
            assert!(fix.contains("NVIDIA GPU"), "{fix}");
        }
        other => panic!("expected skipped, got {other:?}"),
    }
    let staging = root.join(".repro/staging");
    let pipeline: Pipeline = serde_yaml::from_str(PIPELINE).unwrap();
    let stage = repro::stages::bench::BenchStage;
    let b: BenchFile =
        serde_json::from_slice(&std::fs::read(staging.join("artifacts/bench/b.json")).unwrap())
            .unwrap();
    assert_eq!(b.status, RunStatus::Skipped);
    assert_eq!(b.defines["TILE_M"], "64");
    assert!(b.reason.unwrap().contains("libcuda.so.1"));
    let spec = &pipeline.stages["bench"];
    let config = stage.configure("bench", spec, &pipeline).unwrap();
    let peers = Configs::new(vec![("bench".into(), config.clone())]);
    let configured = Configured {
        name: "bench",
        spec,
        config: &config,
        peers: &peers,
    };
    let inputs = stage
        .inputs(&configured, &pipeline, root, &Default::default())
        .unwrap();
    assert!(inputs
        .hardware
        .unwrap()
        .starts_with("no GPU: no CUDA driver"));
    // Without a GPU it loads no cubin here: which architecture's it would is the GPU's.
    assert!(inputs.files.is_empty(), "{:?}", inputs.files);
}
