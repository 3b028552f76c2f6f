//! Compiles with a real nvcc: every architecture cached, a broken variant, a broken reference.

use super::*;
use repro_pipeline::test_support::real_nvcc;
use sha2::Digest;

#[test]
fn builds_every_declared_arch_in_one_record_and_caches_them() {
    let Some(_) = real_nvcc("builds_every_declared_arch_in_one_record_and_caches_them") else {
        return;
    };
    let dir = project();
    let root = dir.path();
    let p = pipeline(&TWO_VARIANTS.replace("arch: sm_89", "arch: [sm_89, sm_90a]"));
    let stage = BuildStage::default();
    let ex = CountingExecutor::default();
    let (res, staging) = run_stage(&stage, &p, root, &ex);
    assert_eq!(res.unwrap(), StageOutcome::Passed);
    assert_eq!(ex.count(), 4, "two variants compiled for two archs");
    for v in ["double", "triple"] {
        let rec = record(&staging, v);
        assert_eq!(rec.status, BuildStatus::Ok);
        assert!(rec.nvcc_version.contains("release"), "{}", rec.nvcc_version);
        let archs: Vec<&str> = rec.archs.keys().map(String::as_str).collect();
        assert_eq!(archs, ["sm_89", "sm_90a"]);
        for (arch, build) in &rec.archs {
            assert!(build.ok());
            assert!(build.command.contains(&format!("-arch={arch}")));
            let e = rec.entry_on(arch).unwrap();
            assert_eq!(e.name, "scale_kernel");
            assert!(e.registers.unwrap() > 0);
            assert_eq!(build.gates.len(), 6, "3 gates x 2 entries");
            assert!(build.gates.iter().all(|g| g.pass));
            let cubin = std::fs::read(staging.join(cubin_path(v, arch))).unwrap();
            assert_eq!(&cubin[..4], b"\x7fELF");
            assert_eq!(
                build.cubin_sha256.as_deref(),
                Some(repro_base::tools::hex(&sha2::Sha256::digest(&cubin)).as_str())
            );
        }
        let text = std::fs::read_to_string(staging.join(record_path(v))).unwrap();
        assert!(!text.contains("driver"), "nothing of the GPU: {text}");
    }
    let triple = &record(&staging, "triple").archs["sm_90a"].command;
    assert!(triple.contains(&"-DSCALE=3".to_string()), "{triple:?}");

    let ex = CountingExecutor::default();
    let (res, again) = run_stage(&stage, &p, root, &ex);
    assert_eq!(res.unwrap(), StageOutcome::Passed);
    assert_eq!(ex.count(), 0, "an unchanged build runs no nvcc");
    assert_eq!(
        std::fs::read(again.join(record_path("double"))).unwrap(),
        std::fs::read(staging.join(record_path("double"))).unwrap(),
        "the same bytes"
    );
}

#[test]
fn one_broken_variant_fails_alone_as_a_failed_gate() {
    let Some(_) = real_nvcc("one_broken_variant_fails_alone_as_a_failed_gate") else {
        return;
    };
    let dir = project();
    let p = pipeline(
        &TWO_VARIANTS
            .replace(
                "  triple: {kernel: multi, defines: {SCALE: 3}}",
                "  broken: {kernel: bad, defines: {}}",
            )
            .replace(
                "kernels:\n",
                "kernels:\n  bad: {source: kernels/bad.cu, entry: bad}\n",
            ),
    );
    let (summary, staging) = gate_failure(&p, dir.path());
    assert!(summary.contains("did not compile"), "{summary}");
    assert!(
        summary.contains("broken (sm_89): ") && summary.contains("undefined_thing"),
        "{summary}"
    );
    assert!(!staging.join(cubin_path("broken", "sm_89")).exists());
    let broken = record(&staging, "broken");
    assert_eq!(broken.status, BuildStatus::CompileError);
    let sm89 = &broken.archs["sm_89"];
    assert_eq!(sm89.status, BuildStatus::CompileError);
    assert!(sm89
        .error
        .as_deref()
        .unwrap()
        .contains("identifier \"undefined_thing\" is undefined"));
    assert!(sm89.entries.is_empty() && sm89.cubin_sha256.is_none());
    let ok = record(&staging, "double");
    assert_eq!(ok.status, BuildStatus::Ok);
    assert!(staging.join(cubin_path("double", "sm_89")).is_file());
    let log = std::fs::read_to_string(dir.path().join(".repro/logs/build.log")).unwrap();
    assert!(
        log.contains("== broken sm_89 (FAILED)") && log.contains("undefined_thing"),
        "{log}"
    );
}

#[test]
fn a_reference_that_does_not_compile_fails_the_stage() {
    let Some(_) = real_nvcc("a_reference_that_does_not_compile_fails_the_stage") else {
        return;
    };
    let dir = project();
    let p = pipeline(&two_variants_in_tiny("kernels/bad.cu", "bad"));
    let (res, _) = run_stage(
        &BuildStage::default(),
        &p,
        dir.path(),
        &CountingExecutor::default(),
    );
    let err = format!("{:#}", res.unwrap_err());
    assert!(
        err.contains("the reference kernel failed to compile") && err.contains("undefined_thing"),
        "{err}"
    );
}
