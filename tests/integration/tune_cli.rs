//! `repro tune` through the real binary, without a GPU: a space with a mistake is refused
//! with its position, so are a bad `--budget` and `archs:` outside the pipeline's `arch:`,
//! `repro tune STAGE` runs only the named tune stages, and a GPU-less machine skips the
//! stage with the reason while still writing its (empty) outputs.

use crate::skip;

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

const PIPELINE: &str = r#"version: 1
workload:
  op: sdpa_fp8
  shapes:
    small:   {B: 1, H: 1, S: 32, D: 64}
    mission: {B: 2, H: 8, S: 512, D: 64}
  primary: mission
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  base: {kernel: sdpa_fp8, defines: {USE_CP_ASYNC: 1}}
stages:
  evo-tune:
    uses: tune
    base: base
    budget: 10
    space:
      TILE_M: [32, 64, 128]
      TILE_N: [32, 64, 128]
      USE_WARP_SPECIALIZATION: [0, 1]
      NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
    constraints:
      - "TILE_M * TILE_N <= 8192"
"#;

fn project(pipeline: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
    std::fs::write(dir.path().join("kernels/sdpa_fp8.cu"), "// kernel\n").unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), pipeline).unwrap();
    dir
}

fn repro(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

#[test]
fn a_mistake_in_the_space_is_refused_with_its_position() {
    let dir = project(&PIPELINE.replace("TILE_M * TILE_N", "TILEM * TILE_N"));
    repro(dir.path())
        .arg("tune")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pipeline.yaml:23:9: error: column 1: unknown parameter",
        ))
        .stderr(predicate::str::contains(
            "column 1: unknown parameter `TILEM` — did you mean `TILE_M`?",
        ));

    let unguarded = PIPELINE.replace(
        "      - \"TILE_M * TILE_N <= 8192\"\n",
        "      - \"TILE_M * TILE_N <= 8192\"\n      - \"NUM_PRODUCER_WARPS < 2\"\n",
    );
    let dir = project(&unguarded);
    repro(dir.path())
        .arg("tune")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "guard the read so the constraint holds there: `!(USE_WARP_SPECIALIZATION == 1) || NUM_PRODUCER_WARPS < 2`",
        ));
}

#[test]
fn a_zero_budget_is_refused() {
    let dir = project(PIPELINE);
    repro(dir.path())
        .args(["tune", "--budget", "0"])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "--budget 0: expected a positive number of trials",
        ));
}

#[test]
fn without_a_gpu_the_stage_is_skipped_and_writes_empty_outputs_and_no_cubins() {
    let dir = project(PIPELINE);
    if repro::gpu::probe_cached(dir.path()).is_ok_and(|g| !g.is_empty()) {
        skip::say_skipped("a GPU is visible; this test checks the GPU-less path");
        return;
    }
    repro(dir.path())
        .arg("tune")
        .assert()
        .stderr(predicate::str::contains(
            "the tune stage times kernels on a GPU",
        ));
    let root = dir.path();
    assert_eq!(
        std::fs::read_to_string(root.join("artifacts/tune/tune_log.csv")).unwrap(),
        "trial,generation,timestamp,config,status,registers,spill_bytes,max_abs_err,max_err_over_ref_std,p50_us,correctness_pass,note,parents,source,patch\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("artifacts/tune/topk.json")).unwrap(),
        "[]\n"
    );
    for k in 1..=3 {
        let cubin = root.join(format!(".repro/cubins/tune-top{k}.cubin"));
        assert!(!cubin.exists(), "{} left behind", cubin.display());
    }
}

#[test]
fn quiet_hides_the_warning_and_the_table_marks_the_skip_with_its_own_glyph() {
    let dir = project(PIPELINE);
    if repro::gpu::probe_cached(dir.path()).is_ok_and(|g| !g.is_empty()) {
        skip::say_skipped("a GPU is visible; this test checks the GPU-less path");
        return;
    }
    let loud = repro(dir.path()).arg("tune").assert().success();
    let err = String::from_utf8_lossy(&loud.get_output().stderr).into_owned();
    assert!(
        err.contains("warning: stage `evo-tune` skipped: the tune stage times kernels on a GPU"),
        "{err}"
    );
    assert!(err.contains("⏭ evo-tune skipped ("), "{err}");
    assert!(!err.contains("✓"), "a skip is not a pass: {err}");
    let quiet = repro(dir.path())
        .args(["-q", "tune", "--force"])
        .assert()
        .success();
    let (out, err) = (
        String::from_utf8_lossy(&quiet.get_output().stdout).into_owned(),
        String::from_utf8_lossy(&quiet.get_output().stderr).into_owned(),
    );
    assert_eq!(err, "", "-q prints no warning");
    assert!(
        out.lines().any(|l| l.starts_with("evo-tune")
            && l.contains("⏭ skipped: the tune stage times kernels on a GPU")),
        "{out}"
    );
}

/// [`PIPELINE`] with `arch: [sm_89, sm_90a]`, its tune stage given `archs: ARCHS`, and a
/// second tune stage `evo-tune-b` of the same kernel into `artifacts/tune-b`.
fn two_tunes(archs: &str) -> String {
    PIPELINE
        .replace("version: 1\n", "version: 1\narch: [sm_89, sm_90a]\n")
        .replace(
            "    base: base\n    budget: 10\n",
            &format!("    archs: {archs}\n    base: base\n    budget: 10\n"),
        )
        + "  evo-tune-b:\n    uses: tune\n    base: base\n    archs: [sm_89]\n    dir: artifacts/tune-b\n    space: {TILE_M: [32, 64]}\n"
}

#[test]
fn archs_outside_the_pipelines_arch_are_refused_at_their_line() {
    let dir = project(&two_tunes("[sm_90]"));
    repro(dir.path())
        .arg("status")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pipeline.yaml:16:13: error: `sm_90` is not in the pipeline's `arch:` (sm_89, sm_90a): no cubin is built for it, so no GPU stage runs it; did you mean `sm_90a`?",
        ));
    let dir = project(&two_tunes("[sm_90a, sm_90a]"));
    repro(dir.path())
        .arg("status")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "pipeline.yaml:16:21: error: `sm_90a` is listed twice",
        ));
}

#[test]
fn repro_tune_runs_the_named_tune_stages_only() {
    let dir = project(&two_tunes("[sm_90a]"));
    let plan = repro(dir.path())
        .args(["tune", "evo-tune-b", "--dry-run"])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&plan.get_output().stdout).into_owned()
        + &String::from_utf8_lossy(&plan.get_output().stderr);
    assert!(out.contains("evo-tune-b"), "{out}");
    assert!(
        !out.lines()
            .any(|l| l.split_whitespace().next() == Some("evo-tune")),
        "only the named stage: {out}"
    );
    repro(dir.path())
        .args(["tune", "evo-tune-c"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "error: `evo-tune-c` is not a tune stage of pipeline.yaml\n  help: did you mean `evo-tune-b`?",
        ));
}

#[test]
fn archs_are_part_of_the_stages_fingerprint() {
    let dir = project(&two_tunes("[sm_90a]"));
    if repro::gpu::probe_cached(dir.path()).is_ok_and(|g| !g.is_empty()) {
        skip::say_skipped("a GPU is visible; this test records GPU-less skips");
        return;
    }
    repro(dir.path()).args(["-q", "tune"]).assert().success();
    repro(dir.path())
        .args(["status", "--exit-code"])
        .assert()
        .success();
    std::fs::write(
        dir.path().join("pipeline.yaml"),
        two_tunes("[sm_89, sm_90a]"),
    )
    .unwrap();
    repro(dir.path())
        .args(["status", "--exit-code"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "option `archs` changed: [\"sm_90a\"] → [\"sm_89\",\"sm_90a\"]",
        ));
}
