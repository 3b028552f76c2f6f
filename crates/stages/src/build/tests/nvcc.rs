//! Which nvcc builds: none found, the pinned one, and the one a record names.

use super::*;
use repro_pipeline::test_support::fake_nvcc_version;
use repro_pipeline::toolchain::NvccSearch;

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
