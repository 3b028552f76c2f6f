//! Which GPU architecture to compile for: `--arch`, else the visible GPUs (which must
//! agree), else `pipeline.yaml`'s top-level `arch:`, else a clear error.

use crate::gpu::{GpuInfo, NoGpu};

/// The chosen architecture and where it came from (for messages and records).
#[derive(Debug, Clone, PartialEq)]
pub struct ArchChoice {
    /// e.g. `sm_90`.
    pub arch: String,
    /// e.g. `--arch`, `GPU 0 (NVIDIA H100 80GB HBM3)`, `pipeline.yaml arch:`.
    pub from: String,
}

/// Pick the architecture. `gpus` is what [`crate::gpu::probe_cached`] returned.
pub fn select(
    override_arch: Option<&str>,
    gpus: &Result<Vec<GpuInfo>, NoGpu>,
    pipeline_arch: Option<&str>,
) -> anyhow::Result<ArchChoice> {
    if let Some(a) = override_arch {
        check("--arch", a)?;
        return Ok(ArchChoice {
            arch: a.to_string(),
            from: "--arch".into(),
        });
    }
    let no_gpu_reason = match gpus {
        Ok(list) if !list.is_empty() => return from_gpus(list),
        Ok(_) => "no GPU is visible".to_string(),
        Err(NoGpu(why)) => why.clone(),
    };
    match pipeline_arch {
        Some(a) => {
            check("pipeline.yaml `arch:`", a)?;
            Ok(ArchChoice {
                arch: a.to_string(),
                from: "pipeline.yaml arch:".into(),
            })
        }
        None => anyhow::bail!(
            "cannot choose a GPU architecture to compile for: no GPU to ask ({no_gpu_reason}) \
             and pipeline.yaml has no top-level `arch:`. Add e.g. `arch: sm_89` to pipeline.yaml \
             or pass `--arch sm_89`"
        ),
    }
}

/// All visible GPUs must share one architecture.
fn from_gpus(gpus: &[GpuInfo]) -> anyhow::Result<ArchChoice> {
    let first = &gpus[0];
    let arch = first.arch();
    if gpus.iter().any(|g| g.arch() != arch) {
        let list: Vec<String> = gpus
            .iter()
            .map(|g| format!("GPU {} {} ({})", g.index, g.name, g.arch()))
            .collect();
        anyhow::bail!(
            "the visible GPUs have different architectures: {}. Pass `--arch` to choose one, or \
             make one kind visible with CUDA_VISIBLE_DEVICES",
            list.join(", ")
        );
    }
    Ok(ArchChoice {
        arch: target_for(first),
        from: format!("GPU {} ({})", first.index, first.name),
    })
}

/// The target to compile for this GPU: its `sm_XY`, except Hopper (compute capability 9.0),
/// which gets `sm_90a`: its warpgroup MMA (`wgmma`) exists only in that arch-specific target.
/// Such code runs on compute capability 9.0 alone, which is the GPU it is chosen for.
pub fn target_for(gpu: &GpuInfo) -> String {
    match gpu.compute_capability {
        [9, 0] => "sm_90a".to_string(),
        _ => gpu.arch(),
    }
}

/// `sm_90a` → `sm_90`: the architecture a target runs on, without its feature suffix.
pub fn base(arch: &str) -> &str {
    arch.trim_end_matches(|c: char| c.is_ascii_lowercase())
}

/// `sm_` followed by digits and an optional feature suffix letter (`sm_90a`).
pub fn is_valid(arch: &str) -> bool {
    let Some(rest) = arch.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
    !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && rest.len() - digits.len() <= 1
}

fn check(what: &str, arch: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        is_valid(arch),
        "{what} `{arch}` is not a GPU architecture; expected one like sm_80, sm_89, sm_90 or sm_90a"
    );
    Ok(())
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

    fn no_gpu() -> Result<Vec<GpuInfo>, NoGpu> {
        Err(NoGpu("no CUDA driver".into()))
    }

    #[test]
    fn override_beats_gpu_and_pipeline() {
        let gpus = Ok(vec![gpu(0, "H100", [9, 0])]);
        let c = select(Some("sm_80"), &gpus, Some("sm_89")).unwrap();
        assert_eq!((c.arch.as_str(), c.from.as_str()), ("sm_80", "--arch"));
    }

    #[test]
    fn gpu_beats_pipeline() {
        let gpus = Ok(vec![gpu(0, "L4", [8, 9]), gpu(1, "L4", [8, 9])]);
        let c = select(None, &gpus, Some("sm_90")).unwrap();
        assert_eq!(c.arch, "sm_89");
        assert_eq!(c.from, "GPU 0 (L4)");
    }

    #[test]
    fn hopper_gets_its_arch_specific_target() {
        let c = select(None, &Ok(vec![gpu(0, "H100", [9, 0])]), Some("sm_89")).unwrap();
        assert_eq!(c.arch, "sm_90a");
        let c = select(None, &Ok(vec![gpu(0, "B200", [10, 0])]), None).unwrap();
        assert_eq!(c.arch, "sm_100");
        assert_eq!(base("sm_90a"), "sm_90");
        assert_eq!(base("sm_89"), "sm_89");
    }

    #[test]
    fn mixed_gpus_are_an_error_naming_them() {
        let gpus = Ok(vec![gpu(0, "L4", [8, 9]), gpu(1, "H100", [9, 0])]);
        let e = select(None, &gpus, Some("sm_90")).unwrap_err().to_string();
        assert!(
            e.contains("GPU 0 L4 (sm_89)") && e.contains("GPU 1 H100 (sm_90)"),
            "{e}"
        );
        assert!(e.contains("--arch"), "{e}");
    }

    #[test]
    fn pipeline_arch_without_gpu() {
        let c = select(None, &no_gpu(), Some("sm_89")).unwrap();
        assert_eq!(c.arch, "sm_89");
        let c = select(None, &Ok(vec![]), Some("sm_89")).unwrap();
        assert_eq!(c.arch, "sm_89");
    }

    #[test]
    fn nothing_to_go_on_says_how_to_fix() {
        let e = select(None, &no_gpu(), None).unwrap_err().to_string();
        assert!(e.contains("no CUDA driver"), "{e}");
        assert!(e.contains("arch: sm_89") && e.contains("--arch"), "{e}");
    }

    #[test]
    fn malformed_arch_is_rejected() {
        for bad in ["sm90", "compute_90", "sm_", "sm_9x0", "sm_90ab", "89"] {
            assert!(!is_valid(bad), "{bad}");
        }
        for good in ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100"] {
            assert!(is_valid(good), "{good}");
        }
        let e = select(Some("90"), &no_gpu(), None).unwrap_err().to_string();
        assert!(e.contains("--arch `90`"), "{e}");
    }
}
