//! GPU tests (`REPRO_GPU_TESTS=1`; otherwise each prints a "skipped:" line): the bench
//! stage survives a faulting and a hanging kernel, a planted error fails the correctness
//! gate, and the GPU reference agrees with the CPU fp64 reference.

mod common;

use common::*;
use repro::engine::StageOutcome;
use repro::gpu::harness::{DeviceInputs, Reference, Session};
use repro::gpu::workload::{reference_f64, Inputs};
use repro::pipeline::{Recipe, Shape};
use repro::schema::BenchFile;

const REFERENCE_CU: &str = "kernels/reference.cu";

fn arch() -> String {
    repro::gpu::probe().expect("a GPU")[0].arch()
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
    let reference = Reference::load(&cubin, "sdpa_reference_f32").unwrap();
    for seed in 0..3 {
        let inputs = Inputs::generate(
            Shape {
                B: 1,
                H: 1,
                S: 32,
                D: 64,
            },
            Recipe::Gaussian,
            seed,
        );
        let io = DeviceInputs::upload(&inputs).unwrap();
        let gpu = session.run_reference(&reference, &io).unwrap();
        let cpu = reference_f64(&inputs);
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
    let cubins = root.join(".repro/cubins");
    std::fs::create_dir_all(&cubins).unwrap();
    let arch = arch();
    compile(REFERENCE_CU, &[], &arch, &cubins.join("reference.cubin"));
    compile(
        "tests/fixtures/cuda/naive.cu",
        &[],
        &arch,
        &cubins.join("naive.cubin"),
    );
    compile(
        "tests/fixtures/cuda/naive.cu",
        &["PLANTED_ERROR=1"],
        &arch,
        &cubins.join("planted.cubin"),
    );
    compile(
        "tests/fixtures/cuda/fault.cu",
        &[],
        &arch,
        &cubins.join("fault.cubin"),
    );
    compile(
        "tests/fixtures/cuda/hang.cu",
        &[],
        &arch,
        &cubins.join("hang.cubin"),
    );
    let (outcome, staging) = run_bench_stage(PIPELINE, root);
    let read = |v: &str| -> BenchFile {
        serde_json::from_slice(
            &std::fs::read(staging.join(format!("artifacts/bench/{v}.json"))).unwrap(),
        )
        .unwrap()
    };
    let naive = read("naive");
    assert_eq!(naive.status, "ok");
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
    assert_eq!(fault.status, "failed");
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
