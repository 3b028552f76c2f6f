//! Reads the launch-geometry globals a kernel exports from its cubin (an ELF64 file), e.g.
//! `extern "C" __device__ const int repro_dynamic_smem_bytes`, so the build record can
//! state the dynamic shared memory that ptxas's report (static only) leaves out.

pub use repro_base::elf::read_i32_global;

/// The name of the global that holds a kernel's dynamic shared memory per block.
pub const DYNAMIC_SMEM_SYMBOL: &str = "repro_dynamic_smem_bytes";

/// The kernel's dynamic shared memory per block, from the `repro_dynamic_smem_bytes` global
/// of its cubin (`None` when the file or the global is missing).
pub fn dynamic_smem_bytes(cubin: &std::path::Path) -> Option<u64> {
    let elf = std::fs::read(cubin).ok()?;
    u64::try_from(read_i32_global(&elf, DYNAMIC_SMEM_SYMBOL)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exported_globals_from_a_real_cubin() {
        let Some(tc) =
            repro_pipeline::test_support::real_nvcc("reads_exported_globals_from_a_real_cubin")
        else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("g.cu");
        std::fs::write(
            &src,
            "extern \"C\" __device__ const int repro_dynamic_smem_bytes = 45056;\n\
             extern \"C\" __device__ const int repro_head_dim = 64;\n\
             extern \"C\" __device__ int zeroed;\n\
             extern \"C\" __global__ void k(int* o) { o[0] = repro_head_dim + zeroed; }\n",
        )
        .unwrap();
        let out = dir.path().join("g.cubin");
        let status = std::process::Command::new(&tc.nvcc)
            .args(["-cubin", "-arch=sm_90", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .unwrap();
        assert!(status.success());
        let elf = std::fs::read(&out).unwrap();
        assert_eq!(read_i32_global(&elf, DYNAMIC_SMEM_SYMBOL), Some(45056));
        assert_eq!(read_i32_global(&elf, "repro_head_dim"), Some(64));
        assert_eq!(read_i32_global(&elf, "zeroed"), Some(0));
        assert_eq!(read_i32_global(&elf, "absent"), None);
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert_eq!(read_i32_global(b"", "x"), None);
        assert_eq!(read_i32_global(b"\x7fELF\x02\x01garbage", "x"), None);
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        header[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        header[0x3c] = 5;
        assert_eq!(read_i32_global(&header, "x"), None);
    }
}
