//! `repro build --list` on recorded build artifacts (no compiler needed).

use assert_cmd::Command;
use predicates::prelude::*;
use repro::pipeline::PtxasGates;
use repro::schema::{to_json_pretty, ArchBuild, BuildRecord, BuildStatus, EntryResources};
use repro::stages::build::gates::record_gates;
use std::path::Path;

const PIPELINE: &str = r#"
version: 1
arch: [sm_89, sm_90a]
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

/// A build record for sm_89 and sm_90a (`registers` and 8 more) whose gates are the build
/// stage's own verdict on its resources (static + dynamic shared memory, as a block needs
/// them at launch).
fn ok_record(variant: &str, registers: u32, spills: u64) -> String {
    let limits = PtxasGates {
        max_registers: Some(120),
        max_smem_bytes: Some(65536),
        max_spill_bytes: Some(0),
    };
    let build = |registers: u32| {
        let mut b = ArchBuild {
            command: vec!["nvcc".into()],
            status: BuildStatus::Ok,
            error: None,
            cubin_sha256: Some("00".into()),
            entries: vec![EntryResources {
                name: "sdpa_fp8_fwd".into(),
                registers: Some(registers),
                smem_bytes: Some(1024),
                stack_bytes: Some(0),
                spill_store_bytes: Some(spills),
                spill_load_bytes: Some(spills),
                barriers: Some(1),
                ..EntryResources::default()
            }],
            dynamic_smem_bytes: Some(45056),
            gates: Vec::new(),
        };
        b.gates = record_gates(&b, "sdpa_fp8_fwd", &limits, "sm_89");
        b
    };
    let record = BuildRecord {
        variant: variant.into(),
        kernel: "sdpa_fp8".into(),
        source: "kernels/sdpa_fp8.cu".into(),
        entry: "sdpa_fp8_fwd".into(),
        defines: Default::default(),
        nvcc_version: "Cuda compilation tools, release 13.0, V13.0.88".into(),
        status: BuildStatus::Ok,
        archs: [
            ("sm_89".to_string(), build(registers)),
            ("sm_90a".to_string(), build(registers + 8)),
        ]
        .into(),
    };
    to_json_pretty(&record)
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
    // Written before records held one section per architecture: read as sm_90's.
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

/// Kernel `sdpa_fp8` declares one tail path; only `ragged` (B 2, S 40) reaches it with 32-row
/// query blocks, and no shape with 8-row ones.
const TAILS: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 1, S: 32, D: 64}
    ragged: {B: 2, H: 1, S: 40, D: 64}
  primary: small
kernels:
  sdpa_fp8:
    source: kernels/sdpa_fp8.cu
    entry: sdpa_fp8_fwd
    defaults: {TILE_M: 32}
    tails:
      partial_q_block: "B > 1 && S % TILE_M != 0"
variants:
  m32: {kernel: sdpa_fp8}
  m8: {kernel: sdpa_fp8, defines: {TILE_M: 8}}
stages:
  build: {uses: build}
"#;

#[test]
fn lists_the_shapes_that_reach_each_tail_and_warns_of_one_none_reaches() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), TAILS).unwrap();
    let out = list(dir.path()).success().get_output().clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let row = |variant: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{variant} ")))
            .unwrap_or_else(|| panic!("no row of {variant}:\n{stdout}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        row("m32"),
        "m32 partial_q_block B > 1 && S % TILE_M != 0 ragged"
    );
    assert!(row("m8").ends_with("⚠ no declared shape"), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("warning: variant `m8` never runs its tail path `partial_q_block`: no shape of workload `sdpa_fp8` has B > 1 && S % TILE_M != 0; add one under `workload.shapes`")
            && !stderr.contains("`m32`"),
        "{stderr}"
    );
}
