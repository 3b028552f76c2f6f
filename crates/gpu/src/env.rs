//! Environment capture for the manifest and the report. What the results were made with —
//! the GPU, the driver, nvcc, ncu, python and torch — comes from what the stages recorded
//! ([`Recorded`]: the build records, the lock entries of the stages that ran the tools and
//! the GPU, the previous manifest), never from the machine that renders: a report rendered
//! on a laptop says the H100 and the Python the results were measured with. Only the run
//! itself is this machine's: git state (git2), the host, repro's version, the time.
//!
//! Every field is optional: what was not recorded is absent (`null` in the manifest, "n/a"
//! in the report), never an error.

use repro_pipeline::paths::RESULT_DIRS;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Git state of the project's repository.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GitState {
    pub sha: Option<String>,
    /// Branch name; `None` on a detached HEAD.
    pub branch: Option<String>,
    /// Tracked files modified or untracked files present, outside the project's results
    /// (`artifacts/`, `reports/`: a run always changes those). Ignored files do not count.
    pub dirty: bool,
}

/// The GPU the results were measured on, as recorded in the manifest. The lock names its
/// model, architecture and driver; the rest is known where it measured (and carried by the
/// manifest since).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct GpuSnapshot {
    pub name: String,
    #[serde(default)]
    pub uuid: Option<String>,
    pub compute_capability: String,
    #[serde(default)]
    pub sm_count: Option<u32>,
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    #[serde(default)]
    pub driver_version: Option<String>,
    #[serde(default)]
    pub cuda_driver_version: Option<String>,
}

/// Everything the manifest records about where and with what a run happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Environment {
    pub git: Option<GitState>,
    pub gpu: Option<GpuSnapshot>,
    /// Why there is no GPU entry, when there is none.
    pub gpu_note: Option<String>,
    pub nvcc: Option<String>,
    pub ncu: Option<String>,
    pub python: Option<String>,
    pub torch: Option<String>,
    pub host: Option<String>,
    pub repro_version: String,
    pub created_utc: String,
}

/// What the stages recorded of the machine and tools that made the results.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// The nvcc version(s) the build records name: what built the cubins the results
    /// measured (the toolchain found here is asked only if absent: nothing was built).
    pub nvcc_from_records: Option<String>,
    /// The nvcc version pipeline.yaml pins.
    pub nvcc_pin: Option<repro_pipeline::toolchain::NvccVersion>,
    /// The versions the lock recorded for the stages that ran ncu, python and torch.
    pub ncu: Option<String>,
    pub python: Option<String>,
    pub torch: Option<String>,
    /// The GPU the GPU stages' results were measured on, as their lock entries name it
    /// (`NVIDIA H100 80GB HBM3 sm_90 driver 580.159.04`); `None`: nothing was.
    pub measured_on: Option<String>,
    /// The previous manifest's `gpu:`, which carries what the lock does not (SM count,
    /// memory) from the machine that measured.
    pub previous_gpu: Option<GpuSnapshot>,
}

/// Capture the environment of the project at `root`: the run's own git state, host and time,
/// and what `opts` says the results were made with.
pub fn capture(root: &Path, opts: &CaptureOptions) -> Environment {
    let gpu = opts
        .measured_on
        .as_deref()
        .map(|hw| measured_gpu(root, hw, opts.previous_gpu.as_ref()));
    Environment {
        git: git_state(root),
        gpu_note: gpu
            .is_none()
            .then(|| "no result here was measured on a GPU".to_string()),
        gpu,
        nvcc: nvcc(root, opts),
        ncu: opts.ncu.clone(),
        python: opts.python.clone(),
        torch: opts.torch.clone(),
        host: repro_executor::local::host_name(),
        repro_version: env!("CARGO_PKG_VERSION").to_string(),
        created_utc: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

/// The GPU the lock names as `hardware` (`<model> sm_XY driver <version>`): this machine's,
/// in full, when it is that GPU (it measured); else the previous manifest's, when it names
/// that model; else what the lock says.
fn measured_gpu(root: &Path, hardware: &str, previous: Option<&GpuSnapshot>) -> GpuSnapshot {
    if let Ok(gpus) = crate::probe_cached(root) {
        if let Some(g) = gpus
            .iter()
            .find(|g| crate::gpu_identity(std::slice::from_ref(g)) == hardware)
        {
            return snapshot(g);
        }
    }
    let (name, rest) = match hardware.find(" sm_") {
        Some(at) => (&hardware[..at], &hardware[at + 1..]),
        None => (hardware, ""),
    };
    if let Some(p) = previous.filter(|p| p.name == name) {
        return p.clone();
    }
    let mut words = rest.split_whitespace();
    let sm = words.next().unwrap_or_default();
    let digits = sm.trim_start_matches("sm_");
    let compute_capability = match digits.len() {
        0 => String::new(),
        n => format!("{}.{}", &digits[..n - 1], &digits[n - 1..]),
    };
    let driver_version = rest
        .split_once("driver ")
        .map(|(_, d)| d.trim().to_string());
    GpuSnapshot {
        name: name.to_string(),
        uuid: None,
        compute_capability,
        sm_count: None,
        memory_bytes: None,
        driver_version,
        cuda_driver_version: None,
    }
}

/// The nvcc the results were built with, else the one the build would use here (found
/// on PATH, `CUDA_HOME`, `CUDA_PATH` or in repro's cache alike); says so when it is not
/// the pinned version.
fn nvcc(root: &Path, opts: &CaptureOptions) -> Option<String> {
    nvcc_with(
        root,
        opts,
        &repro_pipeline::toolchain::NvccSearch::from_env(),
    )
}

fn nvcc_with(
    root: &Path,
    opts: &CaptureOptions,
    search: &repro_pipeline::toolchain::NvccSearch,
) -> Option<String> {
    let line = opts.nvcc_from_records.clone().or_else(|| {
        search
            .find(root, opts.nvcc_pin.as_ref())
            .ok()
            .map(|tc| tc.version)
    })?;
    let found = repro_pipeline::toolchain::NvccVersion::from_release_line(&line);
    Some(match opts.nvcc_pin {
        Some(pin) if found != Some(pin) => format!("{line} (pipeline.yaml pins {pin})"),
        _ => line,
    })
}

fn snapshot(g: &crate::GpuInfo) -> GpuSnapshot {
    GpuSnapshot {
        name: g.name.clone(),
        uuid: Some(g.uuid.clone()),
        compute_capability: format!("{}.{}", g.compute_capability[0], g.compute_capability[1]),
        sm_count: Some(g.sm_count),
        memory_bytes: Some(g.memory_bytes),
        driver_version: g.driver_version.clone(),
        cuda_driver_version: Some(g.cuda_driver_version.clone()),
    }
}

/// Git sha, branch and dirty state of the repository containing `root`; `None` outside git.
pub fn git_state(root: &Path) -> Option<GitState> {
    let repo = git2::Repository::discover(root).ok()?;
    let head = repo.head().ok();
    let sha = head
        .as_ref()
        .and_then(|h| h.peel_to_commit().ok())
        .map(|c| c.id().to_string());
    let branch = head
        .as_ref()
        .filter(|h| h.is_branch())
        .and_then(|h| h.shorthand().map(str::to_string));
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    let results = result_dirs(&repo, root);
    let dirty = repo
        .statuses(Some(&mut opts))
        .map(|s| {
            s.iter().any(|e| {
                e.path()
                    .is_none_or(|p| !results.iter().any(|r| Path::new(p).starts_with(r)))
            })
        })
        .unwrap_or(false);
    Some(GitState { sha, branch, dirty })
}

/// The project's result folders, relative to the repository's work tree.
fn result_dirs(repo: &git2::Repository, root: &Path) -> Vec<PathBuf> {
    let workdir = repo.workdir().and_then(|w| w.canonicalize().ok());
    let root = root.canonicalize().ok();
    let Some(prefix) = workdir
        .zip(root)
        .and_then(|(w, r)| r.strip_prefix(w).ok().map(Path::to_path_buf))
    else {
        return Vec::new();
    };
    RESULT_DIRS.iter().map(|d| prefix.join(d)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_state_of_a_fresh_repo_is_dirty_with_an_untracked_file() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let state = git_state(dir.path()).unwrap();
        assert_eq!(state.sha, None);
        assert!(state.dirty);
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("a.txt")).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let oid = repo
            .commit(Some("HEAD"), &sig, &sig, "m", &tree, &[])
            .unwrap();
        let state = git_state(dir.path()).unwrap();
        assert_eq!(state.sha, Some(oid.to_string()));
        assert!(!state.dirty);
        assert!(state.branch.is_some());
        // New results are not a dirty source tree; an edited source is.
        std::fs::create_dir_all(dir.path().join("artifacts/bench")).unwrap();
        std::fs::write(dir.path().join("artifacts/bench/v.json"), "{}").unwrap();
        std::fs::write(dir.path().join("reports.md"), "x").unwrap();
        assert!(git_state(dir.path()).unwrap().dirty);
        std::fs::remove_file(dir.path().join("reports.md")).unwrap();
        assert!(!git_state(dir.path()).unwrap().dirty);
        std::fs::write(dir.path().join("a.txt"), "y").unwrap();
        assert!(git_state(dir.path()).unwrap().dirty);
    }

    #[test]
    fn nvcc_is_what_built_the_cubins_and_a_version_off_the_pin_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let line = "Cuda compilation tools, release 12.4, V12.4.131";
        let opts = CaptureOptions {
            nvcc_from_records: Some(line.into()),
            ..CaptureOptions::default()
        };
        assert_eq!(nvcc(dir.path(), &opts).as_deref(), Some(line));
        let pinned = CaptureOptions {
            nvcc_pin: Some("13.0.88".parse().unwrap()),
            ..opts
        };
        assert_eq!(
            nvcc(dir.path(), &pinned).unwrap(),
            format!("{line} (pipeline.yaml pins 13.0.88)")
        );
    }

    #[test]
    fn nvcc_found_through_cuda_home_is_recorded_like_nvcc_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("cuda");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        repro_pipeline::test_support::fake_nvcc_version(&home.join("bin"), "13.0.88");
        let search = repro_pipeline::toolchain::NvccSearch {
            path_var: Some(dir.path().join("empty").into_os_string()),
            cuda_home: Some(home),
            ..Default::default()
        };
        let opts = CaptureOptions {
            nvcc_pin: Some("13.0.88".parse().unwrap()),
            ..CaptureOptions::default()
        };
        assert_eq!(
            nvcc_with(dir.path(), &opts, &search).as_deref(),
            Some("Cuda compilation tools, release 13.0, V13.0.88")
        );
    }

    #[test]
    fn capture_records_what_was_recorded_not_this_machines_tools() {
        let dir = tempfile::tempdir().unwrap();
        let env = capture(dir.path(), &CaptureOptions::default());
        assert_eq!(env.created_utc.len(), "2026-01-01T00:00:00Z".len());
        // This machine has python3; the results were made without it.
        assert!(env.python.is_none() && env.torch.is_none() && env.ncu.is_none());
        assert!(env.gpu.is_none());
        let recorded = CaptureOptions {
            python: Some("Python 3.12.3".into()),
            ncu: Some("Version 2025.3.1.0".into()),
            measured_on: Some("NVIDIA H100 80GB HBM3 sm_90 driver 580.159.04".into()),
            ..CaptureOptions::default()
        };
        let env = capture(dir.path(), &recorded);
        assert_eq!(env.python.as_deref(), Some("Python 3.12.3"));
        assert_eq!(env.ncu.as_deref(), Some("Version 2025.3.1.0"));
        let gpu = env.gpu.unwrap();
        assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
        assert_eq!(gpu.compute_capability, "9.0");
        assert_eq!(gpu.driver_version.as_deref(), Some("580.159.04"));
        assert_eq!(gpu.sm_count, None, "not recorded, not made up");
    }

    #[test]
    fn the_previous_manifest_carries_what_the_lock_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let previous = GpuSnapshot {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: Some("GPU-1".into()),
            compute_capability: "9.0".into(),
            sm_count: Some(132),
            memory_bytes: Some(85017493504),
            driver_version: Some("580.159.04".into()),
            cuda_driver_version: Some("13.0".into()),
        };
        let hw = "NVIDIA H100 80GB HBM3 sm_90 driver 580.159.04";
        assert_eq!(measured_gpu(dir.path(), hw, Some(&previous)), previous);
        let other = measured_gpu(dir.path(), "NVIDIA L4 sm_89 driver 1", Some(&previous));
        assert_eq!((other.name.as_str(), other.sm_count), ("NVIDIA L4", None));
    }
}
