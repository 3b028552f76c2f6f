//! GPU architecture names (`sm_89`, `sm_90a`): their form, the architecture a target runs
//! on, and what each allows a block. Which architecture a GPU loads is `repro_gpu::arch`.

/// `sm_90a` → `sm_90`: the architecture a target runs on, without its feature suffix.
pub fn base(arch: &str) -> &str {
    arch.trim_end_matches(|c: char| c.is_ascii_lowercase())
}

/// The most shared memory one block may use on `arch` (static plus dynamic, with the
/// opt-in), in bytes, as the CUDA C++ Programming Guide's table of compute capabilities
/// gives it; `None` for an architecture not in the table. A kernel's `max_smem_bytes`
/// gate is never looser than this on each architecture it is built for: a limit written
/// for the H100 (227 KiB) must not let an L4 build (99 KiB) pass.
pub fn max_smem_per_block(arch: &str) -> Option<u64> {
    const KIB: u64 = 1024;
    Some(match base(arch) {
        "sm_70" | "sm_72" => 96 * KIB,
        "sm_75" => 64 * KIB,
        "sm_80" | "sm_87" => 163 * KIB,
        "sm_86" | "sm_89" | "sm_120" | "sm_121" => 99 * KIB,
        "sm_90" | "sm_100" | "sm_101" | "sm_103" => 227 * KIB,
        _ => return None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_memory_limit_is_the_architectures() {
        assert_eq!(max_smem_per_block("sm_89"), Some(101376));
        assert_eq!(max_smem_per_block("sm_90a"), Some(232448));
        assert_eq!(max_smem_per_block("sm_80"), Some(166912));
        assert_eq!(max_smem_per_block("sm_42"), None);
    }

    #[test]
    fn malformed_arch_is_rejected() {
        for bad in ["sm90", "compute_90", "sm_", "sm_9x0", "sm_90ab", "89"] {
            assert!(!is_valid(bad), "{bad}");
        }
        for good in ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100"] {
            assert!(is_valid(good), "{good}");
        }
    }
}
