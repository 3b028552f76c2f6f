//! The build stage's records: `artifacts/build/<variant>.json`, one compile per architecture.

use super::{BuildStatus, GateResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Resource usage of one entry function, from ptxas `-v`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EntryResources {
    pub name: String,
    pub registers: Option<u32>,
    pub smem_bytes: Option<u64>,
    /// The entry's own stack frame (`N bytes stack frame`).
    pub stack_bytes: Option<u64>,
    /// Stack including the device functions it calls (`N bytes cumulative stack size`;
    /// CUDA 12.x and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cumulative_stack_bytes: Option<u64>,
    pub spill_store_bytes: Option<u64>,
    pub spill_load_bytes: Option<u64>,
    pub barriers: Option<u32>,
    pub cmem_bytes: Option<u64>,
}

/// `artifacts/build/<variant>.json`: one variant compiled for every architecture the
/// pipeline declares. It depends only on the sources, the pinned nvcc and the declared
/// architectures — nothing of the machine that compiled it — so any machine writes the
/// same bytes. What only a GPU can say (the driver's figures) is in the bench records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "BuildRecordOnDisk")]
pub struct BuildRecord {
    pub variant: String,
    pub kernel: String,
    pub source: String,
    pub entry: String,
    pub defines: BTreeMap<String, String>,
    pub nvcc_version: String,
    /// `ok` when every architecture compiled, else `compile_error`.
    pub status: BuildStatus,
    /// Architecture (`sm_89`, `sm_90a`, …) → its compile, sorted.
    pub archs: BTreeMap<String, ArchBuild>,
}

/// One architecture's compile of a variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchBuild {
    /// The full compile command, argv form.
    pub command: Vec<String>,
    /// `ok` or `compile_error`.
    pub status: BuildStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Content hash of the cubin (the cubin itself is `.repro/cubins/<variant>.<arch>.cubin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin_sha256: Option<String>,
    pub entries: Vec<EntryResources>,
    /// Dynamic shared memory per block the kernel asks for at launch, from the cubin's
    /// `repro_dynamic_smem_bytes` global (ptxas's `smem` is static only). The
    /// `ptxas.max_smem_bytes` gate counts static + dynamic for the declared entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_smem_bytes: Option<u64>,
    pub gates: Vec<GateResult>,
}

impl ArchBuild {
    pub fn ok(&self) -> bool {
        self.status.is_ok()
    }
}

impl BuildRecord {
    /// The declared entry's resources on `arch`.
    pub fn entry_on(&self, arch: &str) -> Option<&EntryResources> {
        self.archs
            .get(arch)?
            .entries
            .iter()
            .find(|e| e.name == self.entry)
    }

    /// Every architecture's gates, with the architecture.
    pub fn gates(&self) -> impl Iterator<Item = (&str, &GateResult)> {
        self.archs
            .iter()
            .flat_map(|(a, b)| b.gates.iter().map(move |g| (a.as_str(), g)))
    }
}

/// A build record as read: the per-architecture layout, or the single-architecture one
/// written before it (`arch`, `command`, … at the top), read as one architecture, so
/// `repro diff` still reads older commits' results.
#[derive(Deserialize)]
struct BuildRecordOnDisk {
    variant: String,
    kernel: String,
    source: String,
    entry: String,
    defines: BTreeMap<String, String>,
    nvcc_version: String,
    status: BuildStatus,
    #[serde(default)]
    archs: Option<BTreeMap<String, ArchBuild>>,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    command: Vec<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    cubin_sha256: Option<String>,
    #[serde(default)]
    entries: Vec<EntryResources>,
    #[serde(default)]
    dynamic_smem_bytes: Option<u64>,
    #[serde(default)]
    gates: Vec<GateResult>,
}

impl From<BuildRecordOnDisk> for BuildRecord {
    fn from(d: BuildRecordOnDisk) -> Self {
        let archs = d.archs.unwrap_or_else(|| {
            let single = ArchBuild {
                command: d.command,
                status: d.status.clone(),
                error: d.error,
                cubin_sha256: d.cubin_sha256,
                entries: d.entries,
                dynamic_smem_bytes: d.dynamic_smem_bytes,
                gates: d.gates,
            };
            d.arch.into_iter().map(|a| (a, single.clone())).collect()
        });
        BuildRecord {
            variant: d.variant,
            kernel: d.kernel,
            source: d.source,
            entry: d.entry,
            defines: d.defines,
            nvcc_version: d.nvcc_version,
            status: d.status,
            archs,
        }
    }
}
