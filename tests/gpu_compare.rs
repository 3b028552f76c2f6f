//! `repro compare` on a GPU (`REPRO_GPU_TESTS=1`, nvcc on PATH): the same kernel against
//! itself shows no difference; stage5-ws-p1 against stage2-baseline on the mission shape
//! gives a ratio whose interval holds it, from as many samples of each as pairs asked for,
//! and agrees within 3% with the ratio of two separate `repro exec` p50s.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn compare(a: &Path, b: &Path, reference: &Path, json: bool) -> (bool, String) {
    let mut cmd = Command::new(repro_bin());
    cmd.arg("compare")
        .arg(a)
        .arg(b)
        .args([
            "--workload",
            "sdpa_fp8",
            "--entry",
            "sdpa_fp8_fwd",
            "--dims",
            MISSION,
            "--pairs",
            "600",
        ])
        .arg("--reference")
        .arg(reference);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().expect("repro compare runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "repro compare failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn exec_p50(cubin: &Path, reference: &Path) -> f64 {
    let out = Command::new(repro_bin())
        .args(["exec", "--cubin"])
        .arg(cubin)
        .args(["--workload", "sdpa_fp8", "--entry", "sdpa_fp8_fwd"])
        .args(["--dims", MISSION, "--seed", "0"])
        .arg("--reference")
        .arg(reference)
        .output()
        .expect("repro exec runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    record["p50_us"].as_f64().unwrap()
}

#[test]
fn compare_gives_the_ratio_of_medians_with_an_interval_on_one_gpu() {
    let test = "compare_gives_the_ratio_of_medians_with_an_interval_on_one_gpu";
    if !gpu_tests_enabled(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let (base, ws, reference) = (
        dir.path().join("base.cubin"),
        dir.path().join("ws.cubin"),
        dir.path().join("ref.cubin"),
    );
    compile("kernels/sdpa_fp8.cu", &STAGE2_BASELINE, &arch, &base);
    compile("kernels/sdpa_fp8.cu", &STAGE5_WS_P1, &arch, &ws);
    compile("kernels/reference.cu", &[], &arch, &reference);

    // A against itself: no difference worth the name.
    let (_, same) = compare(&ws, &ws, &reference, true);
    let same: serde_json::Value = serde_json::from_str(&same).unwrap();
    let r = same["ratio"]["ratio"].as_f64().unwrap();
    eprintln!("A/A: {}", same["sentence"]);
    assert!((r - 1.0).abs() < 0.01, "A/A ratio {r}");

    let (_, json) = compare(&ws, &base, &reference, true);
    let c: serde_json::Value = serde_json::from_str(&json).unwrap();
    eprintln!("A/B: {} on {}", c["sentence"], c["device"]);
    assert_eq!(c["a"]["samples_us"].as_array().unwrap().len(), 600);
    assert_eq!(c["b"]["samples_us"].as_array().unwrap().len(), 600);
    assert_eq!(c["a"]["correct"], true);
    assert_eq!(c["b"]["correct"], true);
    let ratio = c["ratio"]["ratio"].as_f64().unwrap();
    let (lo, hi) = (
        c["ratio"]["ci95_low"].as_f64().unwrap(),
        c["ratio"]["ci95_high"].as_f64().unwrap(),
    );
    assert!(lo <= ratio && ratio <= hi, "{ratio} outside [{lo}, {hi}]");
    assert!(
        hi - lo < 0.05,
        "a wide interval from 600 pairs: [{lo}, {hi}]"
    );
    let separate = exec_p50(&base, &reference) / exec_p50(&ws, &reference);
    eprintln!("separate exec runs: {separate:.4}, compare: {ratio:.4}");
    assert!(
        (ratio / separate - 1.0).abs() < 0.03,
        "compare {ratio} vs separate runs {separate}"
    );

    let (_, text) = compare(&ws, &base, &reference, false);
    assert!(
        text.contains("pairs, interleaved (A B, B A, …), isolated timing"),
        "{text}"
    );
    assert!(
        text.contains("× faster than") || text.contains("no measurable difference"),
        "{text}"
    );
}
