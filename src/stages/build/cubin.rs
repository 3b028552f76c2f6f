//! Reads the launch-geometry globals a kernel exports from its cubin (an ELF64 file), e.g.
//! `extern "C" __device__ const int repro_dynamic_smem_bytes`, so the build record can
//! state the dynamic shared memory that ptxas's report (static only) leaves out.

/// The name of the global that holds a kernel's dynamic shared memory per block.
pub const DYNAMIC_SMEM_SYMBOL: &str = "repro_dynamic_smem_bytes";

/// The kernel's dynamic shared memory per block, from the `repro_dynamic_smem_bytes` global
/// of its cubin (`None` when the file or the global is missing).
pub fn dynamic_smem_bytes(cubin: &std::path::Path) -> Option<u64> {
    let elf = std::fs::read(cubin).ok()?;
    u64::try_from(read_i32_global(&elf, DYNAMIC_SMEM_SYMBOL)?).ok()
}

/// The initial value of the 4-byte global `name`, or `None` when the cubin does not define
/// it (or is not a well-formed little-endian ELF64 file).
pub fn read_i32_global(elf: &[u8], name: &str) -> Option<i32> {
    if elf.get(..4)? != b"\x7fELF" || *elf.get(4)? != 2 || *elf.get(5)? != 1 {
        return None; // not ELF64 little-endian
    }
    let shoff = u64_at(elf, 0x28)? as usize;
    let shentsize = u16_at(elf, 0x3a)? as usize;
    let shnum = u16_at(elf, 0x3c)? as usize;
    let section = |i: usize| -> Option<Section> {
        let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some(Section {
            kind: u32_at(elf, at.checked_add(4)?)?,
            offset: u64_at(elf, at.checked_add(0x18)?)? as usize,
            size: u64_at(elf, at.checked_add(0x20)?)? as usize,
            link: u32_at(elf, at.checked_add(0x28)?)? as usize,
        })
    };
    let symtab = (0..shnum)
        .filter_map(section)
        .find(|s| s.kind == SHT_SYMTAB)?;
    let strtab = section(symtab.link)?;
    let end = symtab.offset.checked_add(symtab.size)?;
    for at in (symtab.offset..end).step_by(SYM_SIZE) {
        let name_at = strtab.offset.checked_add(u32_at(elf, at)? as usize)?;
        if c_str(elf, name_at)? != name.as_bytes() {
            continue;
        }
        let shndx = u16_at(elf, at.checked_add(6)?)? as usize;
        let value = u64_at(elf, at.checked_add(8)?)? as usize;
        let size = u64_at(elf, at.checked_add(16)?)?;
        let holder = section(shndx)?;
        if size != 4 {
            return None;
        }
        if holder.kind == SHT_NOBITS {
            return Some(0); // zero-initialized
        }
        let init = bytes(elf, holder.offset.checked_add(value)?, 4)?;
        return Some(i32::from_le_bytes(init.try_into().ok()?));
    }
    None
}

const SHT_SYMTAB: u32 = 2;
const SHT_NOBITS: u32 = 8;
const SYM_SIZE: usize = 24;

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
}

/// `len` bytes at `at`; `None` past the end (offsets come from the file: never trust them).
fn bytes(b: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(len)?)
}
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes(b, at, 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes(b, at, 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes(b, at, 8)?.try_into().ok()?))
}
fn c_str(b: &[u8], at: usize) -> Option<&[u8]> {
    let rest = b.get(at..)?;
    Some(&rest[..rest.iter().position(|&c| c == 0)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_exported_globals_from_a_real_cubin() {
        let Some(tc) =
            super::super::test_support::real_nvcc("reads_exported_globals_from_a_real_cubin")
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
