//! Declarations and cubins for the workload tests: the shipped RMSNorm workload and the
//! FP8 attention workload written as a declaration (`tests/fixtures/workload/sdpa_fp8.yaml`).

use super::spec::Declaration;
use crate::pipeline::Pipeline;
use std::path::{Path, PathBuf};

pub const RMSNORM_PIPELINE: &str = include_str!("../../kernels/rmsnorm/pipeline.yaml");
pub const SDPA_PIPELINE: &str = include_str!("../../tests/fixtures/workload/sdpa_fp8.yaml");

pub fn source_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn pipeline(text: &str) -> Pipeline {
    serde_yaml::from_str(text).expect("the test pipeline parses")
}

/// The shipped RMSNorm declaration.
pub fn rmsnorm() -> Declaration {
    pipeline(RMSNORM_PIPELINE).workloads["rmsnorm"].clone()
}

/// The attention workload as a declaration; its `small` shape is B 2, H 3, S 40, D 64.
pub fn attention() -> Declaration {
    let mut d = pipeline(SDPA_PIPELINE).workloads["sdpa_fp8"].clone();
    d.shapes["small"] = [("B", 2), ("H", 3), ("S", 40), ("D", 64)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    d
}

/// `source` (relative to the source root) compiled to a cubin for `arch` with `defines`,
/// or `None` after the skip notice when there is no nvcc.
pub fn cubin(test: &str, source: &str, arch: &str, defines: &[&str]) -> Option<Vec<u8>> {
    let tc = crate::stages::build::test_support::real_nvcc(test)?;
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
