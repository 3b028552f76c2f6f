//! The per-user cache of installed toolchains, as rustup keeps Rust toolchains:
//! `$XDG_CACHE_HOME/repro/toolchains/nvcc-13.0.88/` (or `~/.cache/...`). A slot exists only
//! once its install finished: the installer builds it under a temporary name and renames
//! it into place, with [`MARKER`] written last inside it.

use super::version::NvccVersion;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file a finished install leaves in its slot.
pub const MARKER: &str = "repro-toolchain.json";

/// What [`MARKER`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Installed {
    pub nvcc_version: NvccVersion,
    /// nvcc, relative to the slot.
    pub nvcc: PathBuf,
    /// The pip requirements installed.
    pub wheels: Vec<String>,
    pub installed_utc: String,
}

/// The cache folder: `$XDG_CACHE_HOME/repro/toolchains`, else `$HOME/.cache/repro/toolchains`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("repro/toolchains"))
}

/// The slot of nvcc `v` in `dir`.
pub fn slot(dir: &Path, v: &NvccVersion) -> PathBuf {
    dir.join(format!("nvcc-{v}"))
}

/// nvcc of a finished install of `v` in `dir`.
pub fn installed_nvcc(dir: &Path, v: &NvccVersion) -> Option<PathBuf> {
    let slot = slot(dir, v);
    let marker: Installed = serde_json::from_slice(&std::fs::read(slot.join(MARKER)).ok()?).ok()?;
    let nvcc = slot.join(marker.nvcc);
    (marker.nvcc_version == *v && nvcc.is_file()).then_some(nvcc)
}

/// Every finished install in `dir`, newest version first.
pub fn installed(dir: &Path) -> Vec<(NvccVersion, PathBuf)> {
    let mut found: Vec<(NvccVersion, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let v: NvccVersion = name.to_str()?.strip_prefix("nvcc-")?.parse().ok()?;
            Some((v, installed_nvcc(dir, &v)?))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished slot for `v` with an nvcc file, as the installer leaves it.
    pub(crate) fn fake_slot(dir: &Path, v: &str) -> PathBuf {
        let v: NvccVersion = v.parse().unwrap();
        let slot = slot(dir, &v);
        std::fs::create_dir_all(slot.join("bin")).unwrap();
        std::fs::write(slot.join("bin/nvcc"), "").unwrap();
        let marker = Installed {
            nvcc_version: v,
            nvcc: PathBuf::from("bin/nvcc"),
            wheels: vec![],
            installed_utc: "2026-01-01T00:00:00Z".into(),
        };
        std::fs::write(slot.join(MARKER), serde_json::to_string(&marker).unwrap()).unwrap();
        slot.join("bin/nvcc")
    }

    #[test]
    fn only_finished_slots_count() {
        let dir = tempfile::tempdir().unwrap();
        let old = fake_slot(dir.path(), "13.0.88");
        let new = fake_slot(dir.path(), "13.1.80");
        // Half-finished: no marker.
        std::fs::create_dir_all(dir.path().join("nvcc-13.2.51/bin")).unwrap();
        std::fs::write(dir.path().join("nvcc-13.2.51/bin/nvcc"), "").unwrap();
        std::fs::create_dir_all(dir.path().join(".nvcc-13.5.37.tmp-1")).unwrap();
        let all = installed(dir.path());
        assert_eq!(
            all,
            [
                ("13.1.80".parse().unwrap(), new),
                ("13.0.88".parse().unwrap(), old.clone())
            ]
        );
        assert_eq!(
            installed_nvcc(dir.path(), &"13.0.88".parse().unwrap()),
            Some(old)
        );
        assert_eq!(
            installed_nvcc(dir.path(), &"13.2.51".parse().unwrap()),
            None
        );
    }
}
