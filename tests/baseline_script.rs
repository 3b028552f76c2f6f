//! The PyTorch baseline scripts without PyTorch: each baseline is written as `skipped` with
//! the reason (in repro's BenchFile schema), and the script exits 0.

mod common;

use repro::schema::{BenchFile, RunStatus};
use std::process::Command;

/// Run `kernels/baselines/<script>` with `--out baselines` in a scratch folder, on a machine
/// with python3 and without torch (else say the test is skipped and return `None`).
fn run_without_torch(script: &str) -> Option<tempfile::TempDir> {
    let has_python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_python {
        common::say_skipped("python3 is not installed");
        return None;
    }
    let has_torch = Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_torch {
        common::say_skipped("PyTorch is installed here, so the no-torch path cannot be shown");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = common::source_root().join("kernels/baselines").join(script);
    let out = Command::new("python3")
        .arg(script)
        .args(["--out", "baselines"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

fn assert_skipped(dir: &std::path::Path, name: &str) {
    let text = std::fs::read(dir.join(format!("baselines/{name}.json"))).unwrap();
    let file: BenchFile = serde_json::from_slice(&text).unwrap();
    assert_eq!(
        (file.name.as_str(), file.kind.as_str(), file.status),
        (name, "baseline", RunStatus::Skipped)
    );
    assert!(file.reason.unwrap().contains("PyTorch is not installed"));
    assert!(file.results.is_empty());
}

#[test]
fn without_torch_both_baselines_are_skipped_with_the_reason() {
    let Some(dir) = run_without_torch("torch_sdpa.py") else {
        return;
    };
    for name in ["torch-sdpa-default", "torch-sdpa-best"] {
        assert_skipped(dir.path(), name);
    }
}

#[test]
fn without_torch_the_rmsnorm_baseline_is_skipped_with_the_reason() {
    let Some(dir) = run_without_torch("torch_rmsnorm.py") else {
        return;
    };
    assert_skipped(dir.path(), "torch-rmsnorm");
}
