//! Environment capture for the manifest and the report: git state (git2), the GPU (through
//! [`crate::gpu::probe_cached`]), tool versions (through [`crate::tools::probe`], cached;
//! nvcc through [`crate::toolchain`], as the build finds it), the host, repro's version and
//! the creation time.
//!
//! Every field is optional where the machine may lack it: a missing tool or GPU is recorded
//! as absent (`null` in the manifest, "n/a" in the report), never as an error.

use crate::pipeline::paths::RESULT_DIRS;
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

/// The GPU as recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSnapshot {
    pub name: String,
    pub uuid: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub memory_bytes: u64,
    pub driver_version: Option<String>,
    pub cuda_driver_version: String,
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

/// What [`capture`] should also look for.
#[derive(Debug, Clone, Default)]
pub struct CaptureOptions {
    /// The baselines ran: record python and torch versions.
    pub baselines_ran: bool,
    /// The torch version as the baseline records carry it (asked of python only if absent).
    pub torch_from_records: Option<String>,
    /// The nvcc version(s) the build records name: what built the cubins the results
    /// measured (the toolchain found here is asked only if absent).
    pub nvcc_from_records: Option<String>,
    /// The nvcc version pipeline.yaml pins.
    pub nvcc_pin: Option<crate::toolchain::NvccVersion>,
}

/// Capture the environment of the project at `root`.
pub fn capture(root: &Path, opts: &CaptureOptions) -> Environment {
    let (gpu, gpu_note) = match crate::gpu::probe_cached(root) {
        Ok(gpus) => match gpus.into_iter().next() {
            Some(g) => (Some(snapshot(&g)), None),
            None => (None, Some("no GPU visible".to_string())),
        },
        Err(e) => (None, Some(e.0)),
    };
    let version = |program: &str, args: &[&str], key: &str| {
        let key = key.to_string();
        crate::tools::probe(root, program, args, move |l| l.contains(&key)).map(|t| t.version)
    };
    let (python, torch) = if opts.baselines_ran {
        let python = version("python3", &["--version"], "Python");
        let torch = opts.torch_from_records.clone().or_else(|| {
            crate::tools::probe(
                root,
                "python3",
                &["-c", "import torch; print(torch.__version__)"],
                |l| l.chars().next().is_some_and(|c| c.is_ascii_digit()),
            )
            .map(|t| t.version)
        });
        (python, torch)
    } else {
        (None, None)
    };
    Environment {
        git: git_state(root),
        gpu,
        gpu_note,
        nvcc: nvcc(root, opts),
        ncu: version("ncu", &["--version"], "Version"),
        python,
        torch,
        host: hostname(),
        repro_version: env!("CARGO_PKG_VERSION").to_string(),
        created_utc: chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

/// The nvcc the results were built with, else the one the build would use here (found
/// on PATH, `CUDA_HOME`, `CUDA_PATH` or in repro's cache alike); says so when it is not
/// the pinned version.
fn nvcc(root: &Path, opts: &CaptureOptions) -> Option<String> {
    nvcc_with(root, opts, &crate::toolchain::NvccSearch::from_env())
}

fn nvcc_with(
    root: &Path,
    opts: &CaptureOptions,
    search: &crate::toolchain::NvccSearch,
) -> Option<String> {
    let line = opts.nvcc_from_records.clone().or_else(|| {
        search
            .find(root, opts.nvcc_pin.as_ref())
            .ok()
            .map(|tc| tc.version)
    })?;
    let found = crate::toolchain::NvccVersion::from_release_line(&line);
    Some(match opts.nvcc_pin {
        Some(pin) if found != Some(pin) => format!("{line} (pipeline.yaml pins {pin})"),
        _ => line,
    })
}

fn snapshot(g: &crate::gpu::GpuInfo) -> GpuSnapshot {
    GpuSnapshot {
        name: g.name.clone(),
        uuid: g.uuid.clone(),
        compute_capability: format!("{}.{}", g.compute_capability[0], g.compute_capability[1]),
        sm_count: g.sm_count,
        memory_bytes: g.memory_bytes,
        driver_version: g.driver_version.clone(),
        cuda_driver_version: g.cuda_driver_version.clone(),
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

/// This machine's host name, if it has one.
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!name.is_empty()).then_some(name)
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
        crate::stages::build::test_support::fake_nvcc_version(&home.join("bin"), "13.0.88");
        let search = crate::toolchain::NvccSearch {
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
    fn capture_without_baselines_skips_python_and_stamps_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let env = capture(dir.path(), &CaptureOptions::default());
        assert_eq!(env.created_utc.len(), "2026-01-01T00:00:00Z".len());
        assert!(env.python.is_none() && env.torch.is_none());
    }
}
