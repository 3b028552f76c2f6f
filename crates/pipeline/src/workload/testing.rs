//! Declarations, pipelines and cubins for the tests: the shipped workloads (RMSNorm, and the
//! FP8 attention workload as a declaration), and `tiny`, a small declared workload for
//! stage tests that need one but never launch it.

use super::spec::Declaration;
use crate::Pipeline;
use std::path::{Path, PathBuf};

/// The project's pipeline.yaml: both shipped workloads, declared.
pub const SHIPPED_PIPELINE: &str = include_str!("../../../../pipeline.yaml");

pub fn source_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Whether `python3` runs here; when not, `test` says it is skipped.
pub fn python3_or_skip(test: &str) -> bool {
    let runs = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        crate::test_skip::say_skipped(&format!("{test} needs python3"));
    }
    runs
}

pub fn pipeline(text: &str) -> Pipeline {
    serde_yaml::from_str(text).expect("the test pipeline parses")
}

/// The shipped RMSNorm declaration.
pub fn rmsnorm() -> Declaration {
    pipeline(SHIPPED_PIPELINE).workloads["rmsnorm"].clone()
}

/// The shipped attention workload's declaration (the one drawing with the `attention`
/// generator), with its `small` shape made B 2, H 3, S 40, D 64.
pub fn attention() -> Declaration {
    let shipped = pipeline(SHIPPED_PIPELINE);
    let mut d = shipped
        .workloads
        .values()
        .find(|d| d.generators.values().any(|g| g.kind == "attention"))
        .expect("the shipped pipeline declares an attention workload")
        .clone();
    d.shapes["small"] = [("B", 2), ("H", 3), ("S", 40), ("D", 64)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    d
}

/// `version: 1` and the workload `tiny` computed by `kernels`: dims `[n]`, shapes `small`
/// (n 32) and `mission` (n 4096, the primary), seeds 0 and 1, one fp32 input `x`, one fp32
/// output `y`, a reference command.
pub fn tiny_yaml(kernels: &[&str]) -> String {
    format!(
        "version: 1\n\
         workloads:\n  \
         tiny:\n    \
         kernels: [{}]\n    \
         dims: [n]\n    \
         shapes: {{small: {{n: 32}}, mission: {{n: 4096}}}}\n    \
         primary: mission\n    \
         seeds: [0, 1]\n    \
         args:\n      \
         - {{name: x, dtype: fp32, role: input, shape: [n], init: {{normal: {{}}}}}}\n      \
         - {{name: y, dtype: fp32, role: output, shape: [n]}}\n      \
         - {{name: n, dtype: int32, role: scalar, value: n}}\n    \
         launch: {{grid: [\"(n + 255) / 256\"], block: [256]}}\n    \
         reference: {{run: [\"true\"]}}\n    \
         gates: {{y: {{max_abs_err: 0.06, mean_abs_err: 0.02, max_pct_bad: 1.0}}}}\n",
        kernels.join(", ")
    )
}

/// [`tiny_yaml`] followed by `rest` (`kernels:`, `variants:`, `stages:`, ...), parsed.
pub fn tiny_pipeline(rest: &str, kernels: &[&str]) -> Pipeline {
    pipeline(&format!("{}{rest}", tiny_yaml(kernels)))
}

/// `source` (relative to the source root) compiled to a cubin for `arch` with `defines`,
/// or `None` after the skip notice when there is no nvcc.
pub fn cubin(test: &str, source: &str, arch: &str, defines: &[&str]) -> Option<Vec<u8>> {
    let tc = crate::test_support::real_nvcc(test)?;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.cubin");
    let status = std::process::Command::new(&tc.nvcc)
        .args(["-cubin", "-O3", &format!("-arch={arch}"), "-o"])
        .arg(&out)
        .args(defines.iter().map(|d| format!("-D{d}")))
        .arg(source_root().join(source))
        .status()
        .unwrap();
    assert!(status.success(), "nvcc {source} for {arch}");
    Some(std::fs::read(Path::new(&out)).unwrap())
}
