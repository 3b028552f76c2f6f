//! The PTXAS gates of `pipeline.yaml` (`gates.ptxas`, with a kernel's own `ptxas:` over
//! it: `Pipeline::ptxas_gates_for`), applied to every entry function of a cubin.
//!
//! ptxas leaves `smem` and the spill counts out of its report when they are zero, so a
//! missing figure counts as 0 for those gates. It always prints the register count, so a
//! missing one fails the register gate (measured as NaN: nothing to vouch for).

use repro_pipeline::PtxasGates;
use repro_schema::{ArchBuild, EntryResources, GateResult};

/// One result per (entry, configured gate): `ptxas.max_registers`, `ptxas.max_smem_bytes`,
/// `ptxas.max_spill_bytes` (spill stores + loads), with the entry name as subject.
pub fn ptxas_gates(entries: &[EntryResources], gates: &PtxasGates) -> Vec<GateResult> {
    let mut results = Vec::new();
    for e in entries {
        if let Some(max) = gates.max_registers {
            let measured = e.registers.map_or(f64::NAN, f64::from);
            results.push(GateResult::at_most(
                "ptxas.max_registers",
                &e.name,
                measured,
                f64::from(max),
            ));
        }
        if let Some(max) = gates.max_smem_bytes {
            let measured = e.smem_bytes.unwrap_or(0) as f64;
            results.push(GateResult::at_most(
                "ptxas.max_smem_bytes",
                &e.name,
                measured,
                max as f64,
            ));
        }
        if let Some(max) = gates.max_spill_bytes {
            let spills = e.spill_store_bytes.unwrap_or(0) + e.spill_load_bytes.unwrap_or(0);
            results.push(GateResult::at_most(
                "ptxas.max_spill_bytes",
                &e.name,
                spills as f64,
                max as f64,
            ));
        }
    }
    results
}

/// The gates of one architecture's build as the build stage writes them: the declared
/// `entry`'s shared memory is static plus dynamic (what a block needs at launch), judged
/// by the gates [`for_arch`].
pub fn record_gates(
    build: &ArchBuild,
    entry: &str,
    gates: &PtxasGates,
    arch: &str,
) -> Vec<GateResult> {
    ptxas_gates(
        &with_dynamic_smem(&build.entries, entry, build.dynamic_smem_bytes),
        &for_arch(gates, arch),
    )
}

/// `gates` on `arch`: a declared shared-memory limit is never above what one block may use
/// there ([`super::arch::max_smem_per_block`]), so one kernel's limit, written for the
/// architecture with the most, still gates each other one by its own.
pub fn for_arch(gates: &PtxasGates, arch: &str) -> PtxasGates {
    let hardware = super::arch::max_smem_per_block(arch);
    PtxasGates {
        max_smem_bytes: gates
            .max_smem_bytes
            .map(|declared| hardware.map_or(declared, |h| declared.min(h))),
        ..gates.clone()
    }
}

/// The entries as the gates see them: `entry`'s shared memory is static plus `dynamic`.
/// The build stage and the tuner both gate on this, so a configuration the tuner accepts
/// passes the build's gate too.
pub fn with_dynamic_smem(
    entries: &[EntryResources],
    entry: &str,
    dynamic: Option<u64>,
) -> Vec<EntryResources> {
    let mut entries = entries.to_vec();
    if let Some(dynamic) = dynamic {
        for e in entries.iter_mut().filter(|e| e.name == entry) {
            e.smem_bytes = Some(e.smem_bytes.unwrap_or(0) + dynamic);
        }
    }
    entries
}

/// A one-line summary of the failed gates, e.g.
/// `v1 rmsnorm_fwd: ptxas.max_registers 168 > 120`, with what a gate's `detail` says.
pub fn describe_failures(variant: &str, results: &[GateResult]) -> Vec<String> {
    results
        .iter()
        .filter(|g| !g.pass)
        .map(|g| {
            let line = format!(
                "{variant} {}: {} {} > {}",
                g.subject, g.gate, g.measured, g.threshold
            );
            match &g.detail {
                Some(detail) => format!("{line}\n{detail}"),
                None => line,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(registers: Option<u32>, smem: Option<u64>, spills: (u64, u64)) -> EntryResources {
        EntryResources {
            name: "k".into(),
            registers,
            smem_bytes: smem,
            spill_store_bytes: Some(spills.0),
            spill_load_bytes: Some(spills.1),
            ..EntryResources::default()
        }
    }

    const ALL: PtxasGates = PtxasGates {
        max_registers: Some(128),
        max_smem_bytes: Some(49152),
        max_spill_bytes: Some(0),
    };

    #[test]
    fn passing_entry_passes_every_gate() {
        let r = ptxas_gates(&[entry(Some(128), Some(49152), (0, 0))], &ALL);
        assert_eq!(r.len(), 3);
        assert!(r.iter().all(|g| g.pass), "{r:?}");
        assert_eq!(r[0].subject, "k");
        assert_eq!(r[0].op, "<=");
    }

    #[test]
    fn each_limit_fails_on_its_own() {
        let r = ptxas_gates(&[entry(Some(129), Some(49153), (4, 0))], &ALL);
        assert!(r.iter().all(|g| !g.pass), "{r:?}");
        assert_eq!(r[2].measured, 4.0);
        let lines = describe_failures("v", &r);
        assert_eq!(lines[0], "v k: ptxas.max_registers 129 > 128");
    }

    #[test]
    fn spill_gate_adds_stores_and_loads() {
        let gates = PtxasGates {
            max_registers: None,
            max_smem_bytes: None,
            max_spill_bytes: Some(10),
        };
        let r = ptxas_gates(&[entry(Some(1), None, (6, 6))], &gates);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].measured, 12.0);
        assert!(!r[0].pass);
    }

    #[test]
    fn missing_smem_counts_as_zero_but_missing_registers_fails() {
        let r = ptxas_gates(&[entry(None, None, (0, 0))], &ALL);
        assert!(!r[0].pass, "registers unknown must fail: {r:?}");
        assert!(r[1].pass && r[2].pass, "{r:?}");
        assert_eq!(
            r[0].detail.as_deref(),
            Some("ptxas.max_registers is NaN: not a finite number, so it passes no limit")
        );
        // Written as "NaN", not null, the record reads back as it was judged.
        let text = serde_json::to_string(&r[0]).unwrap();
        assert!(text.contains(r#""measured":"NaN""#), "{text}");
        let back: GateResult = serde_json::from_str(&text).unwrap();
        assert!(back.measured.is_nan() && !back.pass);
    }

    #[test]
    fn dynamic_smem_counts_for_the_declared_entry_only() {
        let mut other = entry(Some(64), Some(1024), (0, 0));
        other.name = "helper".into();
        let entries = [entry(Some(64), Some(34816), (0, 0)), other];
        let seen = with_dynamic_smem(&entries, "k", Some(45056));
        assert_eq!(seen[0].smem_bytes, Some(79872));
        assert_eq!(seen[1].smem_bytes, Some(1024));
        let gates = PtxasGates {
            max_registers: None,
            max_smem_bytes: Some(65536),
            max_spill_bytes: None,
        };
        let r = ptxas_gates(&seen, &gates);
        assert_eq!((r[0].measured, r[0].pass), (79872.0, false));
        assert!(r[1].pass);
        assert_eq!(with_dynamic_smem(&entries, "k", None), entries.to_vec());
    }

    #[test]
    fn no_gates_configured_gives_no_results() {
        let none = PtxasGates {
            max_registers: None,
            max_smem_bytes: None,
            max_spill_bytes: None,
        };
        assert!(ptxas_gates(&[entry(Some(300), None, (9, 9))], &none).is_empty());
    }

    #[test]
    fn a_limit_written_for_the_h100_still_holds_an_l4_build_to_the_l4s() {
        let h100 = PtxasGates {
            max_smem_bytes: Some(232448),
            ..PtxasGates::default()
        };
        assert_eq!(for_arch(&h100, "sm_89").max_smem_bytes, Some(101376));
        assert_eq!(for_arch(&h100, "sm_90a").max_smem_bytes, Some(232448));
        let low = PtxasGates {
            max_smem_bytes: Some(65536),
            ..PtxasGates::default()
        };
        assert_eq!(for_arch(&low, "sm_89"), low, "a tighter limit stays");
        let over_l4 = [entry(Some(100), Some(120_000), (0, 0))];
        assert!(ptxas_gates(&over_l4, &for_arch(&h100, "sm_90a"))[0].pass);
        assert!(!ptxas_gates(&over_l4, &for_arch(&h100, "sm_89"))[0].pass);
    }
}
