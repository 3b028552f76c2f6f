//! `kernels/baselines/torch_sdpa.py` without PyTorch: both baselines are written as
//! `skipped` with the reason (in repro's BenchFile schema), and the script exits 0.

mod common;

use repro::schema::BenchFile;
use std::process::Command;

#[test]
fn without_torch_both_baselines_are_skipped_with_the_reason() {
    let has_python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_python {
        common::say_skipped("python3 is not installed");
        return;
    }
    let has_torch = Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_torch {
        common::say_skipped("PyTorch is installed here, so the no-torch path cannot be shown");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = common::source_root().join("kernels/baselines/torch_sdpa.py");
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
    for name in ["torch-sdpa-default", "torch-sdpa-best"] {
        let text = std::fs::read(dir.path().join(format!("baselines/{name}.json"))).unwrap();
        let file: BenchFile = serde_json::from_slice(&text).unwrap();
        assert_eq!(
            (file.name.as_str(), file.kind.as_str(), file.status.as_str()),
            (name, "baseline", "skipped")
        );
        assert!(file.reason.unwrap().contains("PyTorch is not installed"));
        assert!(file.results.is_empty());
    }
}
