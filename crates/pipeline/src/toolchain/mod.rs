//! The CUDA toolchain every compile goes through (the build stage and the tuner): which
//! nvcc, its version, and where it came from.
//!
//! `pipeline.yaml` may pin it (`toolchain: {nvcc: 13.0.88}`). Pinned, only an nvcc of that
//! version is used: a system one (PATH, `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`) as it
//! is, else one that repro installs from NVIDIA's PyPI wheels into a per-user cache, as
//! rustup does for Rust ([`install`], [`cache`]). Unpinned, the first nvcc found is used,
//! as before pins existed. The version is an input of the build and tune fingerprints, so
//! another nvcc makes them stale.

pub mod cache;
pub mod install;
pub mod search;
pub mod version;
pub mod wheels;

pub use search::{NotFound, NvccSearch};
pub use version::NvccVersion;

use crate::Pipeline;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The version suggested where nothing is pinned (the one CI and the shipped results use).
pub const RECOMMENDED_NVCC: &str = "13.0.88";

/// Where an nvcc was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Path,
    CudaHome,
    CudaPath,
    /// A fixed install location (`/usr/local/cuda/bin`).
    Fixed,
    /// repro's toolchain cache.
    Cache,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Path => "PATH",
            Source::CudaHome => "$CUDA_HOME",
            Source::CudaPath => "$CUDA_PATH",
            Source::Fixed => "a standard install location",
            Source::Cache => "repro's toolchain cache",
        })
    }
}

/// The nvcc in use.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolchain {
    pub nvcc: PathBuf,
    /// The `release` line of `nvcc --version`, e.g.
    /// `Cuda compilation tools, release 13.0, V13.0.88`.
    pub version: String,
    pub source: Source,
}

impl Toolchain {
    fn new(nvcc: PathBuf, version: String, source: Source) -> Toolchain {
        Toolchain {
            nvcc,
            version,
            source,
        }
    }

    /// The version as `13.0.88`, when the release line carries one.
    pub fn release(&self) -> Option<NvccVersion> {
        NvccVersion::from_release_line(&self.version)
    }
}

/// The nvcc version `pipeline` pins, if any.
pub fn pin(pipeline: &Pipeline) -> Option<&NvccVersion> {
    pipeline.toolchain.as_ref().map(|t| &t.nvcc)
}

/// Find the nvcc to use in this process's environment (see [`NvccSearch`]); never installs.
pub fn find(root: &Path, pin: Option<&NvccVersion>) -> Result<Toolchain, NotFound> {
    NvccSearch::from_env().find(root, pin)
}

/// What a fingerprint records of the toolchain: the release line, or why there is none
/// (which `repro status` shows as the change).
pub fn fingerprint(root: &Path, search: &NvccSearch, pin: Option<&NvccVersion>) -> String {
    match (search.find(root, pin), pin) {
        (Ok(tc), _) => tc.version,
        (Err(_), Some(pin)) => {
            format!("not found (pipeline.yaml pins nvcc {pin}: run `repro toolchain install`)")
        }
        (Err(_), None) => "not found".into(),
    }
}

/// Pins whose install failed in this process, with the error: not tried twice in one run
/// (the build and tune stages both ask).
static FAILED_INSTALLS: Mutex<BTreeMap<NvccVersion, String>> = Mutex::new(BTreeMap::new());

/// The pinned nvcc, installed into the cache first when this machine has none of that
/// version. `say` gets the install's progress lines.
pub fn ensure(root: &Path, pin: &NvccVersion, say: &dyn Fn(&str)) -> anyhow::Result<Toolchain> {
    let search = NvccSearch::from_env();
    if let Ok(tc) = search.find(root, Some(pin)) {
        return Ok(tc);
    }
    let mut failed = FAILED_INSTALLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(message) = failed.get(pin) {
        anyhow::bail!("{message}");
    }
    let installed = install::Installer::from_env().and_then(|i| i.install(pin, say));
    if let Err(e) = installed {
        let e = e.context(format!("cannot install the pinned nvcc {pin}"));
        failed.insert(*pin, format!("{e:#}"));
        return Err(e);
    }
    Ok(search.find(root, Some(pin))?)
}
