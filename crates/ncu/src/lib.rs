//! Nsight Compute: finding `ncu`, reading its CSV exports ([`parse`]), mapping raw metrics
//! to the named fields of `artifacts/ncu/summary.json` ([`metrics`]), and `repro ncu
//! parse`. The profile stage that runs ncu lives in `stages::profile`.
//!
//! It depends only on `repro-pipeline`, `repro-schema` and `repro-base`.

pub mod launches;
pub mod metrics;
pub mod options;
pub mod parse;
pub mod table;

use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where NVIDIA explains `ERR_NVGPUCTRPERM` and how to lift it.
pub const PERMISSION_HELP_URL: &str = "https://developer.nvidia.com/ERR_NVGPUCTRPERM";

/// What to do when ncu may not read the GPU's performance counters.
pub const PERMISSION_FIX: &str =
    "run repro as root (or with sudo / the CAP_SYS_ADMIN capability), \
or let every user profile: add `options nvidia NVreg_RestrictProfilingToAdminUsers=0` to a file \
in /etc/modprobe.d/, rebuild the initramfs and reboot (in a container, the host must allow it); \
see https://developer.nvidia.com/ERR_NVGPUCTRPERM";

/// What to do when ncu is not installed.
pub const INSTALL_HINT: &str = "install Nsight Compute (it comes with the CUDA toolkit as \
/usr/local/cuda/bin/ncu, or from https://developer.nvidia.com/nsight-compute), put `ncu` on \
PATH or set NCU=/path/to/ncu";

/// True when ncu's output says it was refused the performance counters.
pub fn is_permission_error(output: &str) -> bool {
    output.contains("ERR_NVGPUCTRPERM")
}

/// The ncu binary: `$NCU`, then `ncu` on PATH, then `/usr/local/cuda/bin/ncu`, then the
/// newest `/opt/nvidia/nsight-compute/<version>/ncu`.
pub fn find_ncu() -> Option<PathBuf> {
    find_ncu_in(
        std::env::var_os("NCU").map(PathBuf::from),
        std::env::var_os("PATH"),
        Path::new("/"),
    )
}

/// [`find_ncu`] with its environment spelled out (`root` prefixes the fixed install
/// locations, for tests).
pub fn find_ncu_in(
    env_ncu: Option<PathBuf>,
    path: Option<std::ffi::OsString>,
    root: &Path,
) -> Option<PathBuf> {
    if let Some(p) = env_ncu.filter(|p| p.is_file()) {
        return Some(p);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    if let Ok(p) = which::which_in("ncu", path, cwd) {
        return Some(p);
    }
    let cuda = root.join("usr/local/cuda/bin/ncu");
    if cuda.is_file() {
        return Some(cuda);
    }
    let mut installs: Vec<PathBuf> = std::fs::read_dir(root.join("opt/nvidia/nsight-compute"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("ncu")))
        .filter(|p| p.is_file())
        .collect();
    installs.sort_by_key(|p| version_key(p));
    installs.pop()
}

/// `/opt/nvidia/nsight-compute/2025.3.1/ncu` → `[2025, 3, 1]`, so versions sort numerically.
fn version_key(ncu: &Path) -> Vec<u64> {
    ncu.parent()
        .and_then(Path::file_name)
        .map(|v| {
            v.to_string_lossy()
                .split('.')
                .map(|p| p.parse().unwrap_or(0))
                .collect()
        })
        .unwrap_or_default()
}

/// ncu's version line (`Version 2025.3.1.0 (build 36398880) (public-release)`), cached.
pub fn version(root: &Path, ncu: &Path) -> Option<String> {
    repro_base::tools::probe(root, &ncu.to_string_lossy(), &["--version"], |l| {
        l.starts_with("Version")
    })
    .map(|t| t.version)
}

/// Parse an export file into a summary, one target per profiled launch (`#<ID>`). A file
/// that cannot be read is a usage error (exit 2); one that does not parse, an error.
pub fn summarize_file(file: &Path) -> anyhow::Result<repro_schema::NcuSummary> {
    let text = std::fs::read(file).map_err(|e| {
        repro_base::errors::UsageError(format!(
            "cannot read {}: {e}\n  help: name an ncu CSV export, e.g. from `ncu --csv --page raw ... > file.csv`",
            file.display()
        ))
    })?;
    let text = String::from_utf8_lossy(&text);
    let export = parse::parse(&text).with_context(|| format!("{}", file.display()))?;
    let targets = export
        .launches
        .iter()
        .map(|launch| {
            metrics::summarize(
                launch,
                None,
                &[],
                metrics::TargetId {
                    target: &format!("#{}", launch.id),
                    variant: "",
                    kernel: &launch.kernel,
                },
            )
        })
        .collect();
    Ok(repro_schema::NcuSummary {
        ncu_version: None,
        clock_control: "unknown".into(),
        cache_control: "unknown".into(),
        targets,
        gates: Vec::new(),
    })
}

/// The `ncu` version recorded in the fingerprint when this machine has none.
pub const NCU_NOT_FOUND: &str = "not found";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_newest_nsight_compute_install() {
        let dir = tempfile::tempdir().unwrap();
        for v in ["2024.1.1", "2025.3.1", "2025.10.0"] {
            let d = dir.path().join("opt/nvidia/nsight-compute").join(v);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("ncu"), "").unwrap();
        }
        let empty_path = Some(std::ffi::OsString::from(dir.path().join("bin")));
        let found = find_ncu_in(None, empty_path, dir.path()).unwrap();
        assert!(found.ends_with("2025.10.0/ncu"), "{}", found.display());
    }

    #[test]
    fn env_override_wins_and_nothing_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let empty_path = Some(std::ffi::OsString::from(dir.path().join("bin")));
        assert_eq!(find_ncu_in(None, empty_path.clone(), dir.path()), None);
        let mine = dir.path().join("my-ncu");
        std::fs::write(&mine, "").unwrap();
        assert_eq!(
            find_ncu_in(Some(mine.clone()), empty_path, dir.path()),
            Some(mine)
        );
    }

    #[test]
    fn permission_error_text_from_nvidia_is_recognised() {
        // As ncu prints it (NVIDIA's ERR_NVGPUCTRPERM page and public bug reports).
        let out = "==PROF== Connected to process 9012 (/usr/local/bin/my-benchmark)\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM\n==PROF== Disconnected from process 9012\n";
        assert!(is_permission_error(out));
        assert!(!is_permission_error("==ERROR== LaunchFailed"));
    }
}
