//! The build stage through its `StageKind` API, with a local test executor.

use super::*;
use crate::tests::calls::Calls;
use repro_exec::CancelFlag;
use repro_pipeline::test_support::{fake_nvcc_version, real_nvcc, CountingExecutor};
use repro_pipeline::toolchain::NvccSearch;
use sha2::Digest;

/// A project folder holding `kernels/` (copies of `tests/fixtures/cuda/*.cu`).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let kernels = dir.path().join("kernels");
    std::fs::create_dir_all(&kernels).unwrap();
    let fixtures =
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("tests/fixtures/cuda");
    for f in ["multi.cu", "spill.cu", "bad.cu", "geometry.cu"] {
        std::fs::copy(fixtures.join(f), kernels.join(f)).unwrap();
    }
    dir
}

fn pipeline(yaml: &str) -> Pipeline {
    serde_yaml::from_str(yaml).unwrap()
}

/// The `tiny` workload (`(const float* x, float* y, int n)`), computed by `kernels`, with
/// the reference kernel `entry` of `source`: to put before a pipeline's `kernels:`.
fn tiny_workload(kernels: &[&str], source: &str, entry: &str) -> String {
    let yaml = repro_pipeline::workload::testing::tiny_yaml(kernels);
    let yaml = yaml.strip_prefix("version: 1\n").unwrap_or(&yaml);
    yaml.replace(
        "reference: {run: [\"true\"]}",
        &format!(
            "reference: {{source: {source}, entry: {entry}, launch: {{grid: [1], block: [256]}}}}"
        ),
    )
}

const TWO_VARIANTS: &str = r#"
version: 1
arch: sm_89
kernels:
  multi: {source: kernels/multi.cu, entry: scale_kernel}
variants:
  double: {kernel: multi, defines: {SCALE: 2}}
  triple: {kernel: multi, defines: {SCALE: 3}}
gates:
  ptxas: {max_registers: 128, max_smem_bytes: 49152, max_spill_bytes: 0}
stages:
  build: {uses: build}
"#;

/// [`TWO_VARIANTS`] with kernel `multi` in the `tiny` workload, whose reference is `entry`
/// of `source`.
fn two_variants_in_tiny(source: &str, entry: &str) -> String {
    TWO_VARIANTS.replace(
        "kernels:\n",
        &format!("{}kernels:\n", tiny_workload(&["multi"], source, entry)),
    )
}

/// Run the build stage of `p` in `root`, which must fail a gate: why, and the staging folder.
fn gate_failure(p: &Pipeline, root: &Path) -> (String, PathBuf) {
    let (res, staging) = run_stage(
        &BuildStage::default(),
        p,
        root,
        &CountingExecutor::default(),
    );
    match res.unwrap() {
        StageOutcome::GateFailed(why) => (why, staging),
        other => panic!("expected a gate failure, got {other:?}"),
    }
}

/// Run the pipeline's `build` stage; the outcome and the staging folder.
fn run_stage(
    stage: &BuildStage,
    p: &Pipeline,
    root: &Path,
    ex: &CountingExecutor,
) -> (anyhow::Result<StageOutcome>, PathBuf) {
    let staging = root.join(format!(".repro/staging/{}", ex as *const _ as usize));
    let peers = stage.configs("build", &p.stages["build"], p).unwrap();
    let ctx = RunCtx {
        name: "build",
        spec: &p.stages["build"],
        config: peers.get("build").unwrap(),
        peers: &peers,
        pipeline: p,
        root,
        staging: &staging,
        log: &root.join(".repro/logs/build.log"),
        executor: ex,
        cancel: &CancelFlag::default(),
        repro_exe: Path::new("repro"),
        pipeline_file: &root.join("pipeline.yaml"),
        overrides: &Default::default(),
        progress: &|_| {},
    };
    (stage.run(&ctx), staging)
}

fn record(staging: &Path, variant: &str) -> BuildRecord {
    let text = std::fs::read_to_string(staging.join(record_path(variant))).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn without_nvcc_the_stage_fails_saying_how_to_fix_it() {
    let dir = project();
    let empty = dir.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let stage = BuildStage::with_nvcc_search(NvccSearch {
        path_var: Some(empty.into_os_string()),
        ..NvccSearch::default()
    });
    let ex = CountingExecutor::default();
    let (res, staging) = run_stage(&stage, &pipeline(TWO_VARIANTS), dir.path(), &ex);
    let err = format!("{:#}", res.unwrap_err());
    assert!(
        err.contains("nvcc (the CUDA compiler) was not found"),
        "{err}"
    );
    assert!(
        err.contains("help: run `repro toolchain install 13.0.88`") && err.contains("CUDA_HOME"),
        "{err}"
    );
    assert_eq!(ex.count(), 0);
    assert!(!staging.exists(), "nothing written");
}

#[test]
fn a_pinned_nvcc_is_the_only_one_used_and_is_recorded_without_its_path() {
    let dir = project();
    let on_path = dir.path().join("path");
    let home = dir.path().join("cuda");
    std::fs::create_dir_all(&on_path).unwrap();
    std::fs::create_dir_all(home.join("bin")).unwrap();
    fake_nvcc_version(&on_path, "12.4.131");
    let search = NvccSearch {
        path_var: Some(on_path.clone().into_os_string()),
        cuda_home: Some(home.clone()),
        ..NvccSearch::default()
    };
    let stage = BuildStage::with_nvcc_search(search);
    let unpinned = pipeline(TWO_VARIANTS);
    let pinned = pipeline(&format!("toolchain: {{nvcc: 13.0.88}}\n{TWO_VARIANTS}"));
    let nvcc_input = |p: &Pipeline| {
        stage
            .inputs_of("build", &p.stages["build"], p, dir.path())
            .unwrap()
            .tools["nvcc"]
            .clone()
    };
    assert_eq!(
        nvcc_input(&unpinned),
        "Cuda compilation tools, release 12.4, V12.4.131"
    );
    assert_eq!(
        nvcc_input(&pinned),
        "not found (pipeline.yaml pins nvcc 13.0.88: run `repro toolchain install`)"
    );
    let (res, _) = run_stage(&stage, &pinned, dir.path(), &CountingExecutor::default());
    let err = format!("{:#}", res.unwrap_err());
    assert!(err.contains("pipeline.yaml pins nvcc 13.0.88"), "{err}");
    assert!(
        err.contains("found instead: nvcc 12.4.131 from PATH"),
        "{err}"
    );
    assert!(err.contains("help: run `repro toolchain install`"), "{err}");

    // The pinned version in CUDA_HOME is used although PATH comes first.
    let system = fake_nvcc_version(&home.join("bin"), "13.0.88");
    assert_eq!(
        nvcc_input(&pinned),
        "Cuda compilation tools, release 13.0, V13.0.88"
    );
    let ex = CountingExecutor::default();
    let (res, staging) = run_stage(&stage, &pinned, dir.path(), &ex);
    assert!(matches!(
        res.unwrap(),
        StageOutcome::GateFailed(_) | StageOutcome::Passed
    ));
    assert!(ex
        .jobs
        .lock()
        .unwrap()
        .iter()
        .all(|argv| Path::new(&argv[0]) == system));
    let rec = record(&staging, "double");
    assert_eq!(
        rec.nvcc_version,
        "Cuda compilation tools, release 13.0, V13.0.88"
    );
    assert_eq!(rec.archs["sm_89"].command[0], "nvcc");
    let text = std::fs::read_to_string(staging.join(record_path("double"))).unwrap();
    assert!(
        !text.contains(&dir.path().display().to_string()),
        "no machine path: {text}"
    );
}

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

#[test]
fn later_stages_read_which_nvcc_built_a_variant_from_its_record() {
    let dir = project();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    fake_nvcc_version(&bin, "13.0.88");
    let stage = BuildStage::with_nvcc_search(NvccSearch {
        path_var: Some(bin.into_os_string()),
        ..NvccSearch::default()
    });
    let (_, staging) = run_stage(
        &stage,
        &pipeline(TWO_VARIANTS),
        dir.path(),
        &CountingExecutor::default(),
    );
    assert_eq!(
        recorded_nvcc(&staging, "double").as_deref(),
        Some("Cuda compilation tools, release 13.0, V13.0.88")
    );
    assert_eq!(recorded_nvcc(&staging, "no-such-variant"), None);
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
