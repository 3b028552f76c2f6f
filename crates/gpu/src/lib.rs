//! Everything that talks to the GPU (through cudarc). The engine never calls in here
//! directly: GPU work runs in `repro exec` child processes (a long-lived worker per GPU
//! slot, [`worker`]), and stages learn about the hardware through [`probe_cached`], which
//! architecture it loads through [`arch`], and the machine's identity through [`env`].
//!
//! It depends only on `repro-pipeline` (workloads), `repro-executor`, `repro-schema` and
//! `repro-base`; never on the engine, the stages or the report.

pub mod arch;
pub mod blocker;
pub mod client;
pub mod compare;
pub mod discover;
pub mod driver;
pub mod env;
pub mod exec;
pub mod harness;
pub mod launch;
pub mod limits;
pub mod timing;
pub mod warm;
pub mod worker;

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

/// Can the CUDA driver library be loaded? Checked with a plain `dlopen` before anything
/// touches cudarc, which panics when the library is missing.
pub fn driver_library_loads() -> Result<(), NoGpu> {
    // SAFETY: loading libcuda runs its initializers, which the NVIDIA driver supports at any
    // time in any process; no symbol of it is used, and the handle is closed at once.
    match unsafe { libloading::Library::new("libcuda.so.1") } {
        Ok(_) => Ok(()),
        Err(err) => Err(NoGpu(format!(
            "no CUDA driver (libcuda.so.1) found: {err}. Install the NVIDIA driver, or run on a machine with an NVIDIA GPU"
        ))),
    }
}

/// The visible GPUs, asking the driver (`cuInit`) directly. Prefer [`probe_cached`].
pub fn probe() -> Result<Vec<GpuInfo>, NoGpu> {
    driver_library_loads()?;
    let fail = |e: driver::CudaError| NoGpu(format!("the CUDA driver is present but {e}"));
    driver::init().map_err(fail)?;
    let cuda_driver_version = driver::driver_cuda_version().map_err(fail)?;
    let driver_version = kernel_driver_version();
    let count = driver::device_count().map_err(fail)?;
    if count == 0 {
        return Err(NoGpu(
            "the CUDA driver sees no GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi)".into(),
        ));
    }
    (0..count)
        .map(|index| {
            use cudarc::driver::sys::CUdevice_attribute as A;
            let dev = driver::Device::get(index)?;
            Ok(GpuInfo {
                index,
                name: dev.name()?,
                uuid: dev.uuid()?,
                compute_capability: [
                    dev.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
                    dev.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
                ],
                sm_count: dev.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
                memory_bytes: dev.total_memory()?,
                cuda_driver_version: cuda_driver_version.clone(),
                driver_version: driver_version.clone(),
            })
        })
        .collect::<Result<Vec<_>, driver::CudaError>>()
        .map_err(fail)
}

const DRIVER_VERSION_FILE: &str = "/proc/driver/nvidia/version";

/// `580.159.04` from `/proc/driver/nvidia/version`, when readable.
fn kernel_driver_version() -> Option<String> {
    parse_driver_version(&std::fs::read_to_string(DRIVER_VERSION_FILE).ok()?)
}

/// The first token that looks like `NNN.NN[.NN]` on the `NVRM version:` line.
fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    line.split_whitespace()
        .find(|t| {
            t.contains('.')
                && t.split('.').count() >= 2
                && t.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// What the cached probe is valid for: this boot, this kernel driver, these visible devices.
/// `None` (no caching) when the boot id cannot be read.
fn cache_key() -> Option<String> {
    use sha2::{Digest, Sha256};
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let driver = std::fs::read_to_string(DRIVER_VERSION_FILE).unwrap_or_default();
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "<unset>".into());
    let digest = Sha256::digest(format!("{boot_id}\0{driver}\0{visible}").as_bytes());
    Some(repro_base::tools::hex(&digest))
}

#[derive(Serialize, Deserialize)]
struct ProbeCache {
    key: String,
    gpus: Vec<GpuInfo>,
}

/// The visible GPUs, from a cache under `root/.repro/cache/gpu.json` that is valid until the
/// machine reboots, the kernel driver changes or `CUDA_VISIBLE_DEVICES` changes (so
/// `repro status` does not initialize CUDA every time). Never panics: no driver library, no
/// device, or a driver error are all `NoGpu` with the reason. Failures are not cached.
pub fn probe_cached(root: &Path) -> Result<Vec<GpuInfo>, NoGpu> {
    // A missing library is cheap to detect and must win over a stale cache.
    driver_library_loads()?;
    let key = cache_key();
    let path = root.join(".repro/cache/gpu.json");
    if let Some(key) = &key {
        if let Some(cached) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<ProbeCache>(&b).ok())
            .filter(|c| &c.key == key)
        {
            return Ok(cached.gpus);
        }
    }
    let gpus = probe()?;
    if let Some(key) = key {
        let record = ProbeCache {
            key,
            gpus: gpus.clone(),
        };
        if let Some(dir) = path.parent() {
            // A cache that cannot be written only costs a re-probe next time.
            let _ = std::fs::create_dir_all(dir);
            let _ = std::fs::write(&path, repro_schema::to_json_pretty(&record));
        }
    }
    Ok(gpus)
}

/// GPUs as one line (model, arch, driver each), for fingerprints and memo keys.
pub fn gpu_identity(gpus: &[GpuInfo]) -> String {
    gpus.iter()
        .map(|g| {
            let driver = g
                .driver_version
                .as_deref()
                .unwrap_or(&g.cuda_driver_version);
            format!("{} {} driver {driver}", g.name, g.arch())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// How [`hardware`] begins when this machine has no GPU: `no GPU: <why>`.
pub const NO_GPU: &str = "no GPU";

/// Whether a recorded hardware identity names GPUs (or a Slurm request for them) rather
/// than their absence.
pub fn names_a_gpu(hardware: &str) -> bool {
    !hardware.starts_with(NO_GPU)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_driver_version_line() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(parse_driver_version(text).as_deref(), Some("580.159.04"));
        assert_eq!(
            parse_driver_version(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build"
            ),
            Some("550.54.14".into())
        );
        assert_eq!(parse_driver_version("GCC version: 12.2"), None);
    }

    #[test]
    fn no_driver_is_a_clear_message_not_a_panic() {
        if driver_library_loads().is_ok() {
            repro_pipeline::test_skip::say_skipped(
                "this machine has a CUDA driver; the no-driver path cannot be shown here",
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let err = probe_cached(dir.path()).unwrap_err();
        assert!(
            err.0.starts_with("no CUDA driver (libcuda.so.1) found: "),
            "{}",
            err.0
        );
        assert!(!dir.path().join(".repro/cache/gpu.json").exists());
    }

    #[test]
    fn arch_names_the_compute_capability() {
        let info = GpuInfo {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: "GPU-0".into(),
            compute_capability: [9, 0],
            sm_count: 132,
            memory_bytes: 1,
            cuda_driver_version: "13.0".into(),
            driver_version: None,
        };
        assert_eq!(info.arch(), "sm_90");
    }
}
