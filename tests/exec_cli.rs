//! `repro exec` without a GPU: input dumps work, and a missing driver is a clear error.

mod common;

use assert_cmd::Command;
use predicates::prelude::*;

const PIPELINE: &str = "version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 2, S: 32, D: 64}
  primary: small
  seeds: [0, 5]
kernels:
  k: {source: k.cu, entry: sdpa_fp8_fwd}
variants:
  v1: {kernel: k}
gates:
  correctness: {max_abs_err: 0.05}
stages:
  bench: {uses: bench}
";

#[test]
fn dump_inputs_writes_every_shape_and_seed_with_an_index() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["exec", "--dump-inputs", "inputs"])
        .assert()
        .success()
        .stderr(predicate::str::contains("wrote 2 input set(s)"));
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("inputs/index.json")).unwrap())
            .unwrap();
    assert_eq!(index["max_abs_err"], 0.05);
    assert_eq!(index["entries"].as_array().unwrap().len(), 2);
    assert_eq!(index["entries"][1]["seed"], 5);
    let q = dir
        .path()
        .join("inputs")
        .join(index["entries"][1]["dir"].as_str().unwrap())
        .join("q.f16");
    assert_eq!(std::fs::metadata(q).unwrap().len(), 2 * 2 * 32 * 64);
}

#[test]
fn exec_without_a_driver_says_so() {
    if !common::no_driver_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["exec", "--variant", "v1", "--shape", "small"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "no CUDA driver (libcuda.so.1) found",
        ));
}

#[test]
fn query_devices_prints_the_gpus_as_json_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["exec", "--query-devices"])
        .output()
        .unwrap();
    if repro::gpu::driver_library_loads().is_err() {
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no CUDA driver (libcuda.so.1) found")
        );
        return;
    }
    // A driver is present: either GPUs as JSON, or the driver's reason for none.
    if out.status.success() {
        let gpus: Vec<repro::gpu::GpuInfo> = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!gpus.is_empty());
    } else {
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn unknown_variant_and_shape_are_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["exec", "--dump-inputs", "x", "--shape", "huge"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "no shape `huge` under workload.shapes (shapes: small)",
        ));
}
