//! `repro exec` without a GPU: input dumps work, and a missing driver is a clear error.

use crate::common;

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
    assert_eq!(index["workload"], "sdpa_fp8");
    assert_eq!(index["gates"]["o"]["max_abs_err"], 0.05);
    assert_eq!(index["precision"], "fp16-pv");
    assert_eq!(index["entries"].as_array().unwrap().len(), 2);
    assert_eq!(index["entries"][1]["seed"], 5);
    assert_eq!(index["entries"][1]["dims"]["S"], 32);
    let case = dir
        .path()
        .join("inputs")
        .join(index["entries"][1]["dir"].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(case.join("q.fp16")).unwrap().len(),
        2 * 2 * 32 * 64
    );
    assert_eq!(
        std::fs::metadata(case.join("k.f32")).unwrap().len(),
        4 * 2 * 32 * 64,
        "the dequantized K beside its E4M3 codes"
    );
}

/// The shipped pipeline has two workloads: a dump names the one it wants, and its cases
/// hold the declared arguments.
#[test]
fn dump_inputs_of_a_declared_workload_writes_its_cases() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("pipeline.yaml"), dir.path().join("pipeline.yaml")).unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["exec", "--dump-inputs", "x"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "say which workload the cubin runs: --workload NAME (workloads: sdpa_fp8, rmsnorm)",
        ));
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args([
            "exec",
            "--dump-inputs",
            "x",
            "--workload",
            "rmsnorm",
            "--shape",
            "ragged",
            "--seed",
            "1",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("wrote 4 input set(s)"));
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("x/index.json")).unwrap()).unwrap();
    let entries = index["entries"].as_array().unwrap();
    let recipes: Vec<&str> = entries
        .iter()
        .map(|e| e["inputs"].as_str().unwrap())
        .collect();
    assert_eq!(recipes, ["gaussian", "tiny", "large", "offset"]);
    assert_eq!(
        (entries[0]["timed"].as_bool(), entries[1]["timed"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(index["gates"]["y"]["max_rel_l2_err"], 0.001);
    let case: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("x")
                .join(entries[2]["dir"].as_str().unwrap())
                .join("case.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(case["dims"]["hidden"], 1001);
    assert_eq!(case["args"][0]["file"], "x.fp16");
    assert_eq!(
        case["args"][5]["value"].as_f64().map(|v| v as f32),
        Some(1e-6)
    );
    // Dimensions on the command line, by name.
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args([
            "exec",
            "--dump-inputs",
            "y",
            "--workload",
            "rmsnorm",
            "--dims",
            "rows=2,hidden=8",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("wrote 2 input set(s)"));
}

/// A pipeline.yaml that does not parse is refused as every command refuses it, whatever
/// `repro exec` was asked to do: at its line and column, with the fix, exit code 2.
#[test]
fn a_pipeline_that_does_not_parse_is_an_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let typo = PIPELINE.replace("  seeds: [0, 5]\n", "  seeds: [0, 5]\n  shape: small\n");
    std::fs::write(dir.path().join("pipeline.yaml"), typo).unwrap();
    let asked: [&[&str]; 3] = [
        &["exec", "--dump-inputs", "x"],
        &["exec", "--variant", "v1", "--shape", "small"],
        &["exec", "--worker"],
    ];
    for args in asked {
        Command::new(common::repro_bin())
            .current_dir(dir.path())
            .args(args)
            .write_stdin("")
            .assert()
            .code(2)
            .stderr(predicate::str::diff(
                "pipeline.yaml:8:3: error: unknown key `shape` in `workload`\n  help: did you mean `shapes`?\n",
            ));
    }
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
            "no shape `huge` in workload `sdpa_fp8`",
        ));
}

/// The exit codes are part of `repro exec`'s contract (a failed check exits 1 with the
/// record on stdout; the GPU side is `tests/gpu_correctness_gate.rs`): its help says them.
#[test]
fn help_states_the_exit_codes() {
    Command::new(common::repro_bin())
        .args(["exec", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Exits 0 when the run's correctness check passed, 1 when it failed",
        ));
}
