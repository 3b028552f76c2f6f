//! The shipped project in a scratch folder, and the nvcc its pipeline pins: for tests that
//! run the real `repro` on the real kernels (they need nvcc; CI installs it; no GPU).
#![allow(dead_code)]

use super::skip;
use std::path::Path;

pub const SOURCE_ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Copy pipeline.yaml and the kernels (with the baselines scripts and each workload's
/// folder) to `to`.
pub fn copy_project(to: &Path) {
    let from = Path::new(SOURCE_ROOT);
    std::fs::copy(from.join("pipeline.yaml"), to.join("pipeline.yaml")).unwrap();
    copy_tree(&from.join("kernels"), &to.join("kernels"));
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The nvcc version the shipped pipeline pins, when this machine has it (as `repro`
/// finds it: PATH, CUDA_HOME, ..., repro's toolchain cache); else says the test is skipped.
pub fn pinned_nvcc(test: &str) -> Option<String> {
    pinned_toolchain(test).map(|tc| tc.version)
}

/// The pinned toolchain itself (its nvcc's path and version), or `None` after the skip notice.
pub fn pinned_toolchain(test: &str) -> Option<repro::toolchain::Toolchain> {
    let root = Path::new(SOURCE_ROOT);
    let project = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let pin = repro::toolchain::pin(&project.pipeline).copied();
    match repro::toolchain::find(root, pin.as_ref()) {
        Ok(tc) => Some(tc),
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            skip::skipped(skip::Need::Nvcc, &format!("{test} needs nvcc: {first}"));
            None
        }
    }
}

/// `repro build -q` in the project at `dir` (every architecture its pipeline declares): it
/// must exit 0. Returns the build record of each of `variants`.
pub fn build(dir: &Path, variants: &[&str]) -> Vec<repro::schema::BuildRecord> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_repro"))
        .current_dir(dir)
        .args(["build", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    variants
        .iter()
        .map(|v| {
            let path = dir.join(format!("artifacts/build/{v}.json"));
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
        })
        .collect()
}
