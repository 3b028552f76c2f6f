//! GPU tests (`REPRO_GPU_TESTS=1`; otherwise each prints a "skipped:" line): the bench
//! stage survives a faulting and a hanging kernel, a planted error fails the correctness
//! gate, and the GPU reference agrees with the CPU fp64 reference.

#[path = "support/attention.rs"]
mod attention;
mod common;

use common::*;
use repro::engine::StageOutcome;
use repro::gpu::harness::{Kernel, Launch, Session};
use repro::gpu::launch::{launch_dims, reference_order, DeviceCase};
use repro::schema::{BenchFile, RunStatus};
use repro::workload::dtype::Dtype;
use repro::workload::exprs::Compiled;

const REFERENCE_CU: &str = "kernels/reference.cu";

/// The architecture the build compiles for GPU 0 when the pipeline declares none (`sm_90a`
/// on an H100), as the bench stage looks its cubins up.
fn arch() -> String {
    repro::stages::build::arch::target_for(&repro::gpu::probe().expect("a GPU")[0])
}

/// Where the build puts `name`'s cubin for `arch`, under `root`.
fn cubin(root: &std::path::Path, name: &str, arch: &str) -> std::path::PathBuf {
    root.join(repro::pipeline::paths::cubin_path(name, arch))
}

#[test]
fn gpu_reference_agrees_with_cpu_fp64_on_the_small_shape() {
    if !gpu_tests_enabled("gpu_reference_agrees_with_cpu_fp64_on_the_small_shape") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("reference.cubin");
    compile(REFERENCE_CU, &[], &arch(), &cubin);
    let session = Session::open(0).unwrap();
    let decl = attention::declaration();
    let c = Compiled::new("sdpa_fp8", &decl, &[]).unwrap();
    let entry = decl.reference.entry.as_deref().unwrap();
    let reference = Kernel::load(&cubin, entry, &[]).unwrap();
    for seed in 0..3 {
        let x = attention::inputs(attention::shape(1, 1, 32, 64), "gaussian", seed);
        // The reference writes its output in fp32.
        let device = DeviceCase::upload(&decl, &x.case, |_| Dtype::Fp32).unwrap();
        let params = device.params(&reference_order(&c, &x.case).unwrap());
        let geometry = c.reference_launch(&x.case.dims, "").unwrap().unwrap();
        let launch = Launch {
            kernel: &reference,
            dims: launch_dims(&geometry),
            params: &params,
        };
        let gpu = Dtype::Fp32.decode(&session.run_checked(&launch, &device).unwrap()[0]);
        let cpu = attention::reference_f64(&x);
        let max = gpu
            .iter()
            .zip(&cpu)
            .map(|(a, b)| (a - b).abs())
            .fold(0f64, f64::max);
        assert!(max < 1e-4, "seed {seed}: max |gpu f32 - cpu f64| = {max}");
    }
}

const PIPELINE: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 2, S: 128, D: 64}
  primary: small
  seeds: [0, 1]
kernels:
  fixture: {source: fixture.cu, entry: sdpa_fp8_fwd}
variants:
  naive:   {kernel: fixture}
  planted: {kernel: fixture, defines: {PLANTED_ERROR: 1}}
  fault:   {kernel: fixture}
  hang:    {kernel: fixture}
control: naive
gates:
  correctness: {max_abs_err: 0.06, mean_abs_err: 0.02, max_pct_bad: 1.0}
stages:
  bench: {uses: bench, warmup: 2, iters: 10, timeout: 15s}
"#;

#[test]
fn bench_stage_survives_fault_and_hang_and_fails_the_planted_error() {
    if !gpu_tests_enabled("bench_stage_survives_fault_and_hang_and_fails_the_planted_error") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    std::fs::create_dir_all(root.join(".repro/cubins")).unwrap();
    let arch = arch();
    compile(REFERENCE_CU, &[], &arch, &cubin(root, "reference", &arch));
    compile(
        "tests/fixtures/cuda/naive.cu",
        &[],
        &arch,
        &cubin(root, "naive", &arch),
    );
    compile(
        "tests/fixtures/cuda/naive.cu",
        &["PLANTED_ERROR=1"],
        &arch,
        &cubin(root, "planted", &arch),
    );
    compile(
        "tests/fixtures/cuda/fault.cu",
        &[],
        &arch,
        &cubin(root, "fault", &arch),
    );
    compile(
        "tests/fixtures/cuda/hang.cu",
        &[],
        &arch,
        &cubin(root, "hang", &arch),
    );
    let (outcome, staging) = run_bench_stage(PIPELINE, root);
    let read = |v: &str| -> BenchFile {
        serde_json::from_slice(
            &std::fs::read(staging.join(format!("artifacts/bench/{v}.json"))).unwrap(),
        )
        .unwrap()
    };
    let naive = read("naive");
    assert_eq!(naive.status, RunStatus::Ok);
    assert_eq!(naive.results.len(), 2);
    for r in &naive.results {
        assert_eq!(r.correctness_pass, Some(true), "{r:?}");
        assert!(r.p50_us.unwrap() > 0.0);
    }
    assert!(naive.gates.iter().all(|g| g.pass));
    let planted = read("planted");
    assert!(planted
        .results
        .iter()
        .all(|r| r.correctness_pass == Some(false)));
    assert!(planted
        .gates
        .iter()
        .any(|g| g.gate == "correctness.max_abs_err" && !g.pass));
    let fault = read("fault");
    assert_eq!(fault.status, RunStatus::Failed);
    for r in &fault.results {
        let e = r.error.as_deref().unwrap();
        assert!(e.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{e}");
    }
    let hang = read("hang");
    for r in &hang.results {
        assert!(r.error.as_deref().unwrap().contains("timed out"), "{r:?}");
    }
    match outcome {
        StageOutcome::GateFailed(summary) => assert!(summary.contains("correctness"), "{summary}"),
        other => panic!("expected a gate failure, got {other:?}"),
    }
}

/// One worker takes a batch; a fault in the middle fails that run alone (the worker answers,
/// says its context is lost and exits), a hang is killed at its timeout, and a fresh worker
/// takes the rest, measuring what the first one did.
#[test]
fn a_fault_in_the_middle_of_a_batch_fails_that_run_and_a_fresh_worker_takes_the_rest() {
    use repro::executor::CancelFlag;
    use repro::gpu::client::{ExecRequest, ExecTarget};
    use repro::gpu::discover::StageJobs;
    use repro::gpu::worker::pool::Workers;
    use std::time::Duration;
    if !gpu_tests_enabled(
        "a_fault_in_the_middle_of_a_batch_fails_that_run_and_a_fresh_worker_takes_the_rest",
    ) {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    std::fs::create_dir_all(root.join(".repro/cubins")).unwrap();
    let arch = arch();
    compile(REFERENCE_CU, &[], &arch, &cubin(root, "reference", &arch));
    for (variant, source) in [("naive", "naive"), ("fault", "fault"), ("hang", "hang")] {
        let cu = format!("tests/fixtures/cuda/{source}.cu");
        compile(&cu, &[], &arch, &cubin(root, variant, &arch));
    }
    std::fs::write(root.join("pipeline.yaml"), PIPELINE).unwrap();
    let log = root.join("bench.log");
    let (cancel, exe) = (CancelFlag::default(), repro_bin());
    let pipeline_file = root.join("pipeline.yaml");
    let workers = Workers::new(
        StageJobs {
            executor: &TestExecutor,
            cancel: &cancel,
            repro_exe: &exe,
            pipeline_file: &pipeline_file,
            root,
            log: Some(&log),
        },
        1,
    );
    let small = [("B", 1), ("H", 2), ("S", 128), ("D", 64)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let run = |variant: &str, seed: u64| {
        let req = ExecRequest {
            target: ExecTarget::Variant(variant.into()),
            workload: None,
            shape: "small".into(),
            inputs: None,
            precision: None,
            seed,
            warmup: 2,
            iters: 10,
            l2: "warm".into(),
            method: "isolated".into(),
            timing: true,
            profile: None,
            check: true,
        };
        workers.run(0, &req, &small, Duration::from_secs(10))
    };
    let batch = [
        ("naive", 0),
        ("naive", 1),
        ("fault", 0),
        ("naive", 0),
        ("hang", 0),
        ("naive", 1),
    ];
    let got: Vec<_> = batch.iter().map(|&(v, s)| run(v, s)).collect();
    for i in [0, 1, 3, 5] {
        assert_eq!(got[i].status, RunStatus::Ok, "run {i}: {:?}", got[i]);
        assert_eq!(got[i].correctness_pass, Some(true), "run {i}");
        assert!(got[i].p50_us.unwrap() > 0.0);
    }
    let fault = got[2].error.as_deref().unwrap();
    assert!(
        fault.starts_with("repro exec: ") && fault.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{fault}"
    );
    let hang = got[4].error.as_deref().unwrap();
    assert!(hang.starts_with("timed out after"), "{hang}");
    // Fresh workers compute the same reference and check.
    assert_eq!(got[0].max_abs_err, got[3].max_abs_err);
    assert_eq!(got[1].max_abs_err, got[5].max_abs_err);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("its CUDA context was lost"), "{log}");
    assert!(log.contains("ended (TimedOut)"), "{log}");
}
