//! The stage's declaration: its checks, its outputs and its inputs (the fingerprint).

use super::*;
use repro_pipeline::toolchain::NvccSearch;

#[test]
fn a_build_stage_needs_declared_architectures() {
    let p = pipeline(&TWO_VARIANTS.replace("arch: sm_89\n", ""));
    let e = BuildStage::default()
        .check("build", &p.stages["build"], &p)
        .unwrap_err();
    assert!(e.message.contains("declares none"), "{}", e.message);
    assert!(
        e.message.contains("help: add e.g. `arch: [sm_89, sm_90a]`"),
        "{}",
        e.message
    );
}

#[test]
fn validate_rejects_a_variant_named_reference_and_unknown_options() {
    let stage = BuildStage::default();
    let with_tiny = two_variants_in_tiny("kernels/multi.cu", "reduce_smem");
    let p = pipeline(&with_tiny.replace("triple:", "reference-tiny:"));
    let e = stage.check("build", &p.stages["build"], &p).unwrap_err();
    assert!(
        e.message.contains("may not be named `reference-tiny`"),
        "{}",
        e.message
    );

    let p = pipeline(&TWO_VARIANTS.replace("triple:", "\"../escape\":"));
    let e = stage.check("build", &p.stages["build"], &p).unwrap_err();
    assert!(
        e.message.contains("`../escape` cannot name its files"),
        "{}",
        e.message
    );

    let p = pipeline(&TWO_VARIANTS.replace("{uses: build}", "{uses: build, jbos: 4}"));
    let e = stage.check("build", &p.stages["build"], &p).unwrap_err();
    assert_eq!(e.path, ["jbos"]);
    assert!(e.message.contains("did you mean `jobs`?"), "{}", e.message);

    let p = pipeline(&TWO_VARIANTS.replace("{uses: build}", "{uses: build, jobs: 0}"));
    assert_eq!(
        stage
            .check("build", &p.stages["build"], &p)
            .unwrap_err()
            .path,
        ["jobs"]
    );

    let p = pipeline(&TWO_VARIANTS.replace("kernel: multi, defines: {SCALE: 3}", "kernel: nope"));
    let e = stage.check("build", &p.stages["build"], &p).unwrap_err();
    assert!(e.message.contains("kernel `nope`"), "{}", e.message);

    let p = pipeline(&TWO_VARIANTS.replace(
        "{uses: build}",
        "{uses: build, jobs: 2, flags: [-lineinfo]}",
    ));
    assert!(stage.check("build", &p.stages["build"], &p).is_ok());
    assert_eq!(
        options(&p.stages["build"]).unwrap(),
        Options {
            jobs: Some(2),
            flags: vec!["-lineinfo".into()]
        }
    );
}

#[test]
fn outputs_list_records_and_cubins_including_the_reference() {
    let p = pipeline(
        &two_variants_in_tiny("kernels/multi.cu", "reduce_smem")
            .replace("arch: sm_89", "arch: [sm_89, sm_90a]"),
    );
    let outs = BuildStage::default().outputs_of("build", &p.stages["build"], &p);
    let outs: Vec<String> = outs.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        outs,
        [
            "artifacts/build/double.json",
            "artifacts/build/triple.json",
            ".repro/cubins/double.sm_89.cubin",
            ".repro/cubins/double.sm_90a.cubin",
            ".repro/cubins/triple.sm_89.cubin",
            ".repro/cubins/triple.sm_90a.cubin",
            ".repro/cubins/reference-tiny.sm_89.cubin",
            ".repro/cubins/reference-tiny.sm_90a.cubin",
        ]
    );
}

#[test]
fn inputs_cover_sources_arch_and_defines_and_nothing_of_the_machine() {
    let dir = project();
    // Notes beside the kernels are not inputs of the build; a header is, included or not.
    std::fs::write(dir.path().join("kernels/README.md"), "notes\n").unwrap();
    std::fs::write(dir.path().join("kernels/tile.cuh"), "#define T 1\n").unwrap();
    let stage = BuildStage::with_nvcc_search(NvccSearch::default());
    let p = pipeline(TWO_VARIANTS);
    let spec = &p.stages["build"];
    let base = stage.inputs_of("build", spec, &p, dir.path()).unwrap();
    assert_eq!(base.params["arch"], "sm_89");
    assert_eq!(
        base.hardware, None,
        "no GPU, no driver: nothing of the machine"
    );
    let keys: Vec<&str> = base.params.keys().map(String::as_str).collect();
    assert_eq!(keys, ["arch", "target.double", "target.triple"]);
    assert_eq!(base.tools["nvcc"], "not found");
    assert!(base.files.is_empty(), "sources count by their code");
    let files: Vec<String> = base.code.iter().map(|f| f.display().to_string()).collect();
    assert_eq!(
        files,
        [
            "kernels/bad.cu",
            "kernels/geometry.cu",
            "kernels/multi.cu",
            "kernels/spill.cu",
            "kernels/tile.cuh"
        ]
    );
    assert!(
        base.params["target.double"].contains(r#""SCALE":"2""#),
        "{:?}",
        base.params
    );

    let two = pipeline(&TWO_VARIANTS.replace("arch: sm_89", "arch: [sm_89, sm_90a]"));
    let both = stage
        .inputs_of("build", &two.stages["build"], &two, dir.path())
        .unwrap();
    assert_eq!(both.params["arch"], "sm_89,sm_90a");
}

#[test]
fn a_comment_only_kernel_edit_leaves_the_builds_fingerprint_and_lock_as_they_were() {
    let dir = project();
    let root = dir.path();
    let file = root.join("pipeline.yaml");
    std::fs::write(&file, TWO_VARIANTS).unwrap();
    let fingerprint = || {
        let project = crate::load(&file).unwrap();
        repro_engine::fingerprint::compute(
            &project,
            &project.stages[0],
            Default::default(),
            &Default::default(),
            &mut repro_engine::statcache::StatCache::default(),
        )
        .unwrap()
    };
    let before = fingerprint();
    let source = root.join("kernels/multi.cu");
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(&source, format!("// a note on the kernel\n{text}")).unwrap();
    assert_eq!(
        fingerprint(),
        before,
        "the lock records code digests, not bytes"
    );
    std::fs::write(&source, format!("{text}\n#define EXTRA 1\n")).unwrap();
    assert_ne!(fingerprint().deps, before.deps, "a code edit is seen");
}
