//! The ptxas, ABI and shared-memory gates, and the ptxas gates a kernel declares itself.

use super::*;
use repro_pipeline::test_support::real_nvcc;
use repro_pipeline::toolchain::NvccSearch;

#[test]
fn spills_and_register_limits_fail_the_gates_not_the_stage() {
    let Some(_) = real_nvcc("spills_and_register_limits_fail_the_gates_not_the_stage") else {
        return;
    };
    let dir = project();
    let p = pipeline(&format!(
        "version: 1\narch: sm_90\n{}{}",
        tiny_workload(&["spill"], "kernels/multi.cu", "reduce_smem"),
        r#"kernels:
  spill: {source: kernels/spill.cu, entry: spilly, flags: [-maxrregcount=16]}
variants:
  spilly: {kernel: spill}
gates:
  ptxas: {max_registers: 16, max_spill_bytes: 0}
stages:
  build: {uses: build, jobs: 1}
"#
    ));
    let (why, staging) = gate_failure(&p, dir.path());
    assert!(
        why.contains("spilly (sm_90) spilly: ptxas.max_registers 24 > 16"),
        "{why}"
    );
    assert!(why.contains("ptxas.max_spill_bytes"), "{why}");
    let rec = record(&staging, "spilly");
    let e = rec.entry_on("sm_90").unwrap();
    assert!(
        e.spill_store_bytes.unwrap() > 0 && e.spill_load_bytes.unwrap() > 0,
        "{e:?}"
    );
    assert!(rec.archs["sm_90"]
        .command
        .contains(&"-maxrregcount=16".to_string()));
    assert!(
        staging
            .join(cubin_path("reference-tiny", "sm_90"))
            .is_file(),
        "reference cubin written"
    );
    assert!(
        !staging.join(record_path("reference-tiny")).exists(),
        "no record for the reference"
    );
}

/// The ABI gate: each cubin's parameters against its workload's `args`, a mismatch failing
/// the gate at the argument's `file:line:col`, and a reference that does not match its
/// declaration failing the stage.
#[test]
fn the_abi_gate_checks_each_cubins_parameters_against_the_declaration() {
    let Some(_) = real_nvcc("the_abi_gate_checks_each_cubins_parameters_against_the_declaration")
    else {
        return;
    };
    let dir = project();
    let text = two_variants_in_tiny("kernels/multi.cu", "reduce_smem");
    let (res, staging) = run_stage(
        &BuildStage::default(),
        &pipeline(&text),
        dir.path(),
        &CountingExecutor::default(),
    );
    assert_eq!(res.unwrap(), StageOutcome::Passed);
    let gate = record(&staging, "double").archs["sm_89"]
        .gates
        .iter()
        .find(|g| g.gate == abi::GATE)
        .cloned()
        .unwrap();
    assert!(gate.pass && gate.detail.is_none(), "{gate:?}");

    // `n` declared as an int64: 8 bytes where the kernel takes 4.
    let wrong = text.replace("{name: n, dtype: int32", "{name: n, dtype: int64");
    std::fs::write(dir.path().join("pipeline.yaml"), &wrong).unwrap();
    let p = pipeline(&wrong);
    // The reference shares the signature: the stage fails on it, at the argument.
    let (res, _) = run_stage(
        &BuildStage::default(),
        &p,
        dir.path(),
        &CountingExecutor::default(),
    );
    let err = format!("{:#}", res.unwrap_err());
    let line = wrong
        .lines()
        .position(|l| l.contains("{name: n, dtype: int64"))
        .unwrap()
        + 1;
    let col = wrong.lines().nth(line - 1).unwrap().find("int64").unwrap() + 1;
    assert!(
        err.contains("the reference kernel `reduce_smem` does not match its declaration (sm_89)")
            && err.contains(&format!("pipeline.yaml:{line}:{col}: error: argument `n` is 8 bytes, but parameter 2 of kernel `reduce_smem` is 4 bytes")),
        "{err}"
    );
    // With a command reference, only the variants' gates fail.
    let commanded = wrong.replace(
        "reference: {source: kernels/multi.cu, entry: reduce_smem, launch: {grid: [1], block: [256]}}",
        "reference: {run: [\"true\"]}",
    );
    std::fs::write(dir.path().join("pipeline.yaml"), &commanded).unwrap();
    let (why, staging) = gate_failure(&pipeline(&commanded), dir.path());
    assert!(
        why.contains("double (sm_89) scale_kernel: abi.params 1 > 0"),
        "{why}"
    );
    assert!(
        why.contains(
            "argument `n` is 8 bytes, but parameter 2 of kernel `scale_kernel` is 4 bytes"
        ),
        "{why}"
    );
    let g = record(&staging, "triple").archs["sm_89"]
        .gates
        .iter()
        .find(|g| g.gate == abi::GATE)
        .cloned()
        .unwrap();
    assert!(
        !g.pass
            && g.detail.as_deref().unwrap().starts_with(&format!(
                "{}:{line}:{col}: error:",
                dir.path().join("pipeline.yaml").display()
            )),
        "{g:?}"
    );
}

#[test]
fn the_smem_gate_counts_dynamic_shared_memory() {
    let Some(_) = real_nvcc("the_smem_gate_counts_dynamic_shared_memory") else {
        return;
    };
    let dir = project();
    let p = pipeline(
        r#"
version: 1
arch: sm_89
kernels:
  geometry: {source: kernels/geometry.cu, entry: tiled}
variants:
  tiled: {kernel: geometry}
gates:
  ptxas: {max_smem_bytes: 32768}
stages:
  build: {uses: build}
"#,
    );
    let (why, staging) = gate_failure(&p, dir.path());
    let rec = record(&staging, "tiled");
    assert_eq!(rec.archs["sm_89"].dynamic_smem_bytes, Some(40000));
    assert_eq!(
        rec.entry_on("sm_89").unwrap().smem_bytes,
        Some(128),
        "ptxas: static only"
    );
    assert!(
        why.contains("tiled (sm_89) tiled: ptxas.max_smem_bytes 40128 > 32768"),
        "{why}"
    );
}
/// Two kernels of the same source: `roomy` declares its own shared-memory limit and a
/// spill gate the pipeline lacks, `plain` declares none.
const KERNEL_GATES: &str = r#"
version: 1
arch: sm_89
kernels:
  roomy: {source: kernels/geometry.cu, entry: tiled, ptxas: {max_smem_bytes: 49152, max_spill_bytes: 0}}
  plain: {source: kernels/geometry.cu, entry: tiled}
variants:
  big: {kernel: roomy}
  small: {kernel: plain}
gates:
  ptxas: {max_registers: 255, max_smem_bytes: 32768}
stages:
  build: {uses: build}
"#;

/// A kernel's `ptxas:` judges its variants in place of the pipeline's fields it names (and
/// adds the gate the pipeline lacks); a kernel without one keeps `gates.ptxas`.
#[test]
fn a_kernels_own_ptxas_gates_judge_its_variants_and_only_them() {
    let Some(_) = real_nvcc("a_kernels_own_ptxas_gates_judge_its_variants_and_only_them") else {
        return;
    };
    let dir = project();
    let (why, staging) = gate_failure(&pipeline(KERNEL_GATES), dir.path());
    assert!(
        why.contains("small (sm_89) tiled: ptxas.max_smem_bytes 40128 > 32768"),
        "{why}"
    );
    assert!(!why.contains("big"), "{why}");
    let judged = |variant: &str| -> Vec<(String, f64, bool)> {
        record(&staging, variant).archs["sm_89"]
            .gates
            .iter()
            .map(|g| (g.gate.clone(), g.threshold, g.pass))
            .collect()
    };
    let own = |gate: &str, max: f64, pass: bool| (gate.to_string(), max, pass);
    assert_eq!(
        judged("big"),
        [
            own("ptxas.max_registers", 255.0, true),
            own("ptxas.max_smem_bytes", 49152.0, true),
            own("ptxas.max_spill_bytes", 0.0, true),
        ]
    );
    assert_eq!(
        judged("small"),
        [
            own("ptxas.max_registers", 255.0, true),
            own("ptxas.max_smem_bytes", 32768.0, false),
        ]
    );
}

/// A variant's effective PTXAS gates are an input of the build: a kernel's `ptxas:`
/// changes only its variants' part of the fingerprint, `gates.ptxas` every variant's.
#[test]
fn the_effective_ptxas_gates_are_inputs_of_each_variant() {
    let dir = project();
    let stage = BuildStage::with_nvcc_search(NvccSearch::default());
    let targets_of = |yaml: &str| {
        let p = pipeline(yaml);
        let inputs = stage
            .inputs_of("build", &p.stages["build"], &p, dir.path())
            .unwrap();
        (
            inputs.params["target.big"].clone(),
            inputs.params["target.small"].clone(),
        )
    };
    let (big, small) = targets_of(KERNEL_GATES);
    assert!(
        big.contains(r#""ptxas":{"max_registers":255,"max_smem_bytes":49152,"max_spill_bytes":0}"#),
        "{big}"
    );
    let (big2, small2) =
        targets_of(&KERNEL_GATES.replace("max_smem_bytes: 49152", "max_smem_bytes: 65536"));
    assert_ne!(big2, big, "the kernel's own gate changed");
    assert_eq!(
        small2, small,
        "another kernel's gates are not this one's input"
    );
    let (big3, small3) =
        targets_of(&KERNEL_GATES.replace("max_registers: 255", "max_registers: 128"));
    assert!(
        big3 != big && small3 != small,
        "the pipeline's gate judges both"
    );
}
