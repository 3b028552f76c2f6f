//! The register-resident kernel family, `kernels/sdpa_fp8_mma.cu`, on a GPU
//! (`REPRO_GPU_TESTS=1`; otherwise each test prints a "skipped:" line): every variant of the
//! shipped pipeline.yaml that builds it, and three configurations that exercise the other code
//! paths (KV split with sub-steps, 16-key tiles, deep rings, integer dequantization, D = 128),
//! agree with the CPU fp64 reference through the pipeline's own harness, on partial tiles
//! (S = 1, 17, 100, 300) and on the mission shape, far inside the correctness gate.

mod common;

use common::*;
use repro::gpu::harness::{DeviceInputs, Kernel, Session};
use repro::gpu::workload::{reference_f64, Inputs};
use repro::pipeline::Shape;

const SOURCE: &str = "kernels/sdpa_fp8_mma.cu";
/// Measured worst cases on an H100 are 9.4e-4 (max |err|, S = 1) and 2.8e-4 (relative L2);
/// the pipeline's gate is 0.06.
const MAX_ABS: f64 = 2e-3;
const MAX_REL_L2: f64 = 2e-3;

/// `-D` arguments of every pipeline.yaml variant of the mma kernel, by name.
fn shipped_variants() -> Vec<(String, Vec<String>)> {
    let project = repro::pipeline::load(&source_root().join("pipeline.yaml")).unwrap();
    let p = project.pipeline;
    let kernel = p
        .kernels
        .iter()
        .find(|(_, k)| k.source == SOURCE)
        .map(|(name, _)| name.clone())
        .expect("pipeline.yaml names kernels/sdpa_fp8_mma.cu");
    let variants: Vec<_> = p
        .variants
        .iter()
        .filter(|(_, v)| v.kernel == kernel)
        .map(|(name, v)| {
            let defines = v
                .defines
                .iter()
                .map(|(k, val)| match val {
                    serde_yaml::Value::Number(n) => format!("{k}={n}"),
                    other => panic!("{name}: define {k} is not a number: {other:?}"),
                })
                .collect();
            (name.clone(), defines)
        })
        .collect();
    assert!(
        !variants.is_empty(),
        "no variant of {kernel} in pipeline.yaml"
    );
    variants
}

fn shape(b: u32, h: u32, s: u32, d: u32) -> Shape {
    Shape {
        B: b,
        H: h,
        S: s,
        D: d,
    }
}

/// Compile `defines`, run it on every shape and seed, and assert the accuracy.
fn check(name: &str, defines: &[String], shapes: &[(Shape, &[u64])]) {
    let dir = tempfile::tempdir().unwrap();
    let cubin = dir.path().join("k.cubin");
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    compile(SOURCE, &defines, &arch, &cubin);
    let session = Session::open(0).unwrap();
    let kernel = Kernel::load(&cubin, "sdpa_fp8_fwd", session.max_dynamic_smem).unwrap();
    for (shape, seeds) in shapes {
        for &seed in *seeds {
            let inputs = Inputs::generate(*shape, repro::pipeline::Recipe::Gaussian, seed);
            let io = DeviceInputs::upload(&inputs).unwrap();
            let acc = session
                .check(&kernel, &io, &reference_f64(&inputs), 0.06)
                .unwrap();
            let at = format!("{name} {shape:?} seed {seed}: {acc:?}");
            assert_eq!((acc.nan_count, acc.inf_count), (0, 0), "{at}");
            assert!(acc.max_abs_err <= MAX_ABS, "{at}");
            assert!(acc.rel_l2_err <= MAX_REL_L2, "{at}");
        }
    }
}

#[test]
fn shipped_mma_variants_match_fp64_on_partial_tiles_and_the_mission_shape() {
    if !gpu_tests_enabled("shipped_mma_variants_match_fp64_on_partial_tiles_and_the_mission_shape")
    {
        return;
    }
    let odd: &[u64] = &[0, 1, 2];
    let shapes = [
        (shape(1, 2, 1, 64), odd),
        (shape(1, 2, 17, 64), odd),
        (shape(1, 2, 100, 64), odd),
        (shape(1, 1, 300, 64), odd),
        (shape(2, 8, 512, 64), &[0][..]),
    ];
    for (name, defines) in shipped_variants() {
        check(&name, &defines, &shapes);
    }
}

#[test]
fn other_mma_code_paths_match_fp64() {
    if !gpu_tests_enabled("other_mma_code_paths_match_fp64") {
        return;
    }
    let seeds: &[u64] = &[0, 1];
    let d64 = [
        (shape(1, 2, 1, 64), seeds),
        (shape(1, 2, 17, 64), seeds),
        (shape(1, 1, 300, 64), seeds),
    ];
    let configs = [
        "TILE_M=16 TILE_N=16 KV_SPLIT=2 NUM_STAGES=4",
        "TILE_M=16 TILE_N=64 KV_SPLIT=2 NUM_STAGES=2",
        "TILE_M=128 TILE_N=64 NUM_STAGES=3 DEQUANT_INT=1",
    ];
    for c in configs {
        let defines: Vec<String> = c.split(' ').map(String::from).collect();
        check(c, &defines, &d64);
    }
    let d128 = [(shape(1, 2, 1, 128), seeds), (shape(1, 2, 100, 128), seeds)];
    check("HEAD_DIM=128", &["HEAD_DIM=128".to_string()], &d128);
}
