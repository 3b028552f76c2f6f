//! `repro build --list` on recorded build artifacts (no compiler needed).

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

const PIPELINE: &str = r#"
version: 1
arch: sm_90
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  stage2-baseline: {kernel: sdpa_fp8, defines: {USE_WARP_SPECIALIZATION: 0}}
  stage5-ws-p1: {kernel: sdpa_fp8, defines: {USE_WARP_SPECIALIZATION: 1}}
  stage5-ws-p2: {kernel: sdpa_fp8, defines: {USE_WARP_SPECIALIZATION: 1, NUM_PRODUCER_WARPS: 2}}
  zz-unbuilt: {kernel: sdpa_fp8}
stages:
  build: {uses: build}
"#;

fn gate(gate: &str, subject: &str, measured: f64, threshold: f64) -> String {
    format!(
        r#"{{"gate":"{gate}","subject":"{subject}","measured":{measured},"threshold":{threshold},"op":"<=","pass":{}}}"#,
        measured <= threshold
    )
}

fn ok_record(variant: &str, registers: u32, spills: u64) -> String {
    let gates = [
        gate(
            "ptxas.max_registers",
            "sdpa_fp8_fwd",
            registers as f64,
            120.0,
        ),
        gate("ptxas.max_smem_bytes", "sdpa_fp8_fwd", 34816.0, 65536.0),
        gate(
            "ptxas.max_spill_bytes",
            "sdpa_fp8_fwd",
            (2 * spills) as f64,
            0.0,
        ),
    ]
    .join(",");
    format!(
        r#"{{"variant":"{variant}","kernel":"sdpa_fp8","source":"kernels/sdpa_fp8.cu","entry":"sdpa_fp8_fwd",
"defines":{{}},"arch":"sm_90","nvcc_version":"Cuda compilation tools, release 13.0, V13.0.88",
"command":["nvcc"],"status":"ok","cubin_sha256":"00",
"entries":[{{"name":"sdpa_fp8_fwd","registers":{registers},"smem_bytes":34816,"stack_bytes":0,
"spill_store_bytes":{spills},"spill_load_bytes":{spills},"barriers":1,"cmem_bytes":null}}],"dynamic_smem_bytes":45056,
"gates":[{gates}],"driver_check":"skipped: no GPU"}}"#
    )
}

fn project(records: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    let build = dir.path().join("artifacts/build");
    std::fs::create_dir_all(&build).unwrap();
    for (variant, json) in records {
        std::fs::write(build.join(format!("{variant}.json")), json).unwrap();
    }
    dir
}

fn list(root: &Path) -> assert_cmd::assert::Assert {
    Command::cargo_bin("repro")
        .unwrap()
        .args(["-f"])
        .arg(root.join("pipeline.yaml"))
        .args(["build", "--list"])
        .assert()
}

#[test]
fn lists_resources_gates_and_failures() {
    let broken = r#"{"variant":"stage5-ws-p2","kernel":"sdpa_fp8","source":"kernels/sdpa_fp8.cu",
"entry":"sdpa_fp8_fwd","defines":{},"arch":"sm_90","nvcc_version":"release 13.0","command":["nvcc"],
"status":"compile_error","error":"nvcc failed (exit status 1):\nkernels/sdpa_fp8.cu(12): error: x","entries":[],"gates":[]}"#;
    let dir = project(&[
        ("stage2-baseline", ok_record("stage2-baseline", 96, 0)),
        ("stage5-ws-p1", ok_record("stage5-ws-p1", 168, 8)),
        ("stage5-ws-p2", broken.to_string()),
    ]);
    let out = list(dir.path()).success().get_output().stdout.clone();
    insta::assert_snapshot!(String::from_utf8(out).unwrap());
}

#[test]
fn says_when_nothing_is_built() {
    let dir = project(&[]);
    list(dir.path())
        .success()
        .stdout("No variant is built yet — run `repro build`.\n");
}

#[test]
fn a_missing_pipeline_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    list(dir.path())
        .failure()
        .stderr(predicates::str::contains("pipeline.yaml").and(predicates::str::contains("-f")));
}

#[test]
fn a_corrupt_record_says_to_rebuild() {
    let dir = project(&[("stage2-baseline", "{not json".to_string())]);
    list(dir.path()).failure().stderr(predicates::str::contains(
        "is not a build record; rerun `repro build`",
    ));
}
