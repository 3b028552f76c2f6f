//! GPU architectures: the build compiles every one `pipeline.yaml`'s top-level `arch:`
//! declares, on any machine (nvcc cross-compiles), so what it records does not depend on
//! the machine; a GPU stage loads the declared one its GPU runs ([`for_gpu`]), and a GPU
//! none of them runs on is an error naming the key (docs/guide/build.md).

use crate::GpuInfo;
pub use repro_base::arch::{base, is_valid, max_smem_per_block};
use std::path::Path;

/// The target to compile for this GPU when nothing is declared (a pipeline without a build
/// stage): its `sm_XY`, except Hopper
/// (compute capability 9.0), which gets `sm_90a`: its warpgroup MMA (`wgmma`) exists only
/// in that arch-specific target, which runs on compute capability 9.0 alone.
pub fn target_for(gpu: &GpuInfo) -> String {
    match gpu.compute_capability {
        [9, 0] => "sm_90a".to_string(),
        _ => gpu.arch(),
    }
}

/// A GPU whose architecture the pipeline does not declare: no cubin of the build runs on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Undeclared {
    /// e.g. `GPU 0 (NVIDIA L4, compute capability 8.9)`.
    pub gpu: String,
    /// The architecture it needs, e.g. `sm_89`.
    pub needs: String,
    pub declared: Vec<String>,
}

impl Undeclared {
    /// The error, at `arch:`'s position in `pipeline_file` (`pipeline.yaml:4:1: …`).
    pub fn at(&self, pipeline_file: &Path) -> String {
        let mut with = self.declared.clone();
        with.push(self.needs.clone());
        format!(
            "{}: `arch:` declares {}, and none of it runs on {}, which needs `{}` cubins\n  \
             help: add it to `arch:` in {}, e.g. `arch: [{}]`, so the build compiles it",
            repro_pipeline::spans::position_of(pipeline_file, &["arch"]),
            self.declared.join(", "),
            self.gpu,
            self.needs,
            pipeline_file.display(),
            with.join(", ")
        )
    }
}

/// The declared architecture whose cubins run on `gpu`: for compute capability X.Y,
/// `sm_XYa` when declared (Hopper's wgmma needs `sm_90a`), else `sm_XY`. With nothing
/// declared, the one the build then compiled ([`target_for`]).
pub fn for_gpu(gpu: &GpuInfo, declared: &[String]) -> Result<String, Undeclared> {
    if declared.is_empty() {
        return Ok(target_for(gpu));
    }
    let plain = gpu.arch();
    let specific = format!("{plain}a");
    [specific, plain.clone()]
        .into_iter()
        .find(|a| declared.contains(a))
        .ok_or_else(|| Undeclared {
            gpu: format!(
                "GPU {} ({}, compute capability {}.{})",
                gpu.index, gpu.name, gpu.compute_capability[0], gpu.compute_capability[1]
            ),
            needs: plain,
            declared: declared.to_vec(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, name: &str, cc: [u32; 2]) -> GpuInfo {
        GpuInfo {
            index,
            name: name.into(),
            uuid: format!("GPU-{index}"),
            compute_capability: cc,
            sm_count: 1,
            memory_bytes: 1,
            cuda_driver_version: "13.0".into(),
            driver_version: None,
        }
    }

    fn archs(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_gpu_loads_the_cubins_of_its_declared_architecture() {
        let declared = archs(&["sm_89", "sm_90a"]);
        let h100 = gpu(0, "H100", [9, 0]);
        assert_eq!(for_gpu(&h100, &declared).unwrap(), "sm_90a");
        assert_eq!(for_gpu(&h100, &archs(&["sm_90"])).unwrap(), "sm_90");
        assert_eq!(
            for_gpu(&h100, &archs(&["sm_90", "sm_90a"])).unwrap(),
            "sm_90a",
            "the arch-specific target wins"
        );
        assert_eq!(for_gpu(&gpu(0, "L4", [8, 9]), &declared).unwrap(), "sm_89");
        assert_eq!(for_gpu(&h100, &[]).unwrap(), "sm_90a", "nothing declared");
        assert_eq!(for_gpu(&gpu(0, "B200", [10, 0]), &[]).unwrap(), "sm_100");
        assert_eq!(base("sm_90a"), "sm_90");
        assert_eq!(base("sm_89"), "sm_89");
    }

    #[test]
    fn an_undeclared_gpu_is_an_error_at_the_arch_key_naming_what_to_add() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pipeline.yaml");
        std::fs::write(&file, "version: 1\narch: [sm_90a]\nstages: {}\n").unwrap();
        let a100 = gpu(1, "NVIDIA A100", [8, 0]);
        let e = for_gpu(&a100, &archs(&["sm_90a"])).unwrap_err();
        assert_eq!(e.needs, "sm_80");
        let text = e.at(&file);
        assert!(
            text.starts_with(&format!("{}:2:1: ", file.display())),
            "{text}"
        );
        assert!(
            text.contains("GPU 1 (NVIDIA A100, compute capability 8.0)"),
            "{text}"
        );
        assert!(text.contains("`arch: [sm_90a, sm_80]`"), "{text}");
    }
}
