//! Everything that talks to the GPU (through cudarc). The engine never calls in here
//! directly: GPU work runs in `repro exec` child processes, and stages learn about the
//! hardware through [`probe_cached`].

pub mod exec;

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One visible GPU as the driver describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    /// e.g. `[9, 0]`.
    pub compute_capability: [u32; 2],
    pub sm_count: u32,
    pub memory_bytes: u64,
    /// CUDA version the driver supports, e.g. `13.0` (cuDriverGetVersion).
    pub cuda_driver_version: String,
    /// The kernel driver's version, e.g. `580.159.04`, when it can be read.
    pub driver_version: Option<String>,
}

impl GpuInfo {
    /// `sm_90` for compute capability 9.0.
    pub fn arch(&self) -> String {
        format!(
            "sm_{}{}",
            self.compute_capability[0], self.compute_capability[1]
        )
    }
}

/// Why there is no GPU to use: said to the user as is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct NoGpu(pub String);

/// The visible GPUs, from a cache under `root/.repro/` that is valid until the machine
/// reboots or the driver changes (so `repro status` stays fast). Never panics: no driver
/// library, no device, or a driver error are all `NoGpu` with the reason.
pub fn probe_cached(_root: &Path) -> Result<Vec<GpuInfo>, NoGpu> {
    Err(NoGpu("GPU probing is not available yet".into()))
}
