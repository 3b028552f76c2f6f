//! Which of NVIDIA's PyPI wheels make up a working nvcc of a given version: the compiler
//! (`nvidia-cuda-nvcc`), its front end and NVVM (`nvidia-cuda-crt`, `nvidia-nvvm`), the
//! runtime headers (`nvidia-cuda-runtime`) and CCCL (`nvidia-cuda-cccl`). They install
//! side by side under `site-packages/nvidia/cu13/`, which nvcc treats as its CUDA root.
//!
//! The versions are NVIDIA's own: each row is the `all` extra of the `cuda-toolkit`
//! metapackage of the CUDA release named in its last column (`pip download --no-deps
//! cuda-toolkit==13.0.2`, then its `Requires-Dist` lines); where several releases ship the
//! same nvcc, the newest one's runtime and CCCL. crt and nvvm always carry nvcc's
//! version. CUDA 12 wheels lay the toolkit out in separate folders that nvcc does not
//! find on its own, so only CUDA 13 is installable this way.

use super::version::NvccVersion;

/// `(nvcc, cuda-runtime, cuda-cccl, CUDA release)`.
const RELEASES: &[(&str, &str, &str, &str)] = &[
    ("13.0.48", "13.0.48", "13.0.50", "13.0.0"),
    ("13.0.88", "13.0.96", "13.0.85", "13.0.2"),
    ("13.1.80", "13.1.80", "13.1.78", "13.1.0"),
    ("13.1.115", "13.1.80", "13.1.115", "13.1.1"),
    ("13.2.51", "13.2.51", "13.2.27", "13.2.0"),
    ("13.2.78", "13.2.75", "13.2.75", "13.2.1"),
    ("13.2.86", "13.2.86", "13.2.86", "13.2.2"),
    ("13.3.33", "13.3.29", "13.3.3.3.1", "13.3.0"),
    ("13.3.73", "13.3.29", "13.3.3.4.1", "13.3.1"),
    ("13.4.59", "13.4.49", "13.3.4.2.1", "13.4.1"),
    ("13.4.92", "13.4.92", "13.3.4.3.1", "13.4.2"),
    ("13.5.37", "13.5.37", "13.3.5.0.6", "13.5.0"),
];

/// The pip requirements (`name==version`) for nvcc `v`, or `None` when no wheel set is
/// known for it.
pub fn requirements(v: &NvccVersion) -> Option<Vec<String>> {
    let nvcc = v.to_string();
    let (_, runtime, cccl, _) = RELEASES.iter().find(|r| r.0 == nvcc)?;
    Some(vec![
        format!("nvidia-cuda-nvcc=={nvcc}"),
        format!("nvidia-cuda-crt=={nvcc}"),
        format!("nvidia-nvvm=={nvcc}"),
        format!("nvidia-cuda-runtime=={runtime}"),
        format!("nvidia-cuda-cccl=={cccl}"),
    ])
}

/// The CUDA release (`13.0.2`) whose wheels [`requirements`] names, for messages.
pub fn cuda_release(v: &NvccVersion) -> Option<&'static str> {
    let nvcc = v.to_string();
    RELEASES.iter().find(|r| r.0 == nvcc).map(|r| r.3)
}

/// Every nvcc version [`requirements`] knows, oldest first.
pub fn known() -> Vec<&'static str> {
    RELEASES.iter().map(|r| r.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_pin_installs_what_ci_installed() {
        let v = "13.0.88".parse().unwrap();
        assert_eq!(
            requirements(&v).unwrap(),
            [
                "nvidia-cuda-nvcc==13.0.88",
                "nvidia-cuda-crt==13.0.88",
                "nvidia-nvvm==13.0.88",
                "nvidia-cuda-runtime==13.0.96",
                "nvidia-cuda-cccl==13.0.85",
            ]
        );
        assert_eq!(cuda_release(&v), Some("13.0.2"));
        assert!(requirements(&"12.4.131".parse().unwrap()).is_none());
    }

    #[test]
    fn every_row_is_a_valid_sorted_version() {
        let versions: Vec<NvccVersion> = known().iter().map(|v| v.parse().unwrap()).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    }
}
