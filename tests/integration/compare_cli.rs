//! `repro compare A B` without a GPU: what it is for is in `--help`, a name that is
//! neither a variant nor a cubin is bad usage (exit 2) listing the variants, a cubin beside
//! a variant runs as the variant does, and a machine without a driver gets the driver's
//! message. The measurement itself is checked on a GPU by tests/gpu_compare.rs.

use crate::common;

use assert_cmd::Command;
use predicates::prelude::*;

const PIPELINE: &str = "version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 2, S: 32, D: 64}
  primary: small
  seeds: [0]
kernels:
  k: {source: k.cu, entry: sdpa_fp8_fwd}
variants:
  v1: {kernel: k}
  v2: {kernel: k, defines: {X: 1}}
stages:
  bench: {uses: bench}
";

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), PIPELINE).unwrap();
    dir
}

#[test]
fn help_says_interleaved_ratio_and_interval() {
    Command::new(common::repro_bin())
        .args(["compare", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("interleaved"))
        .stdout(predicate::str::contains("95% confidence interval"))
        .stdout(predicate::str::contains("--pairs"));
}

#[test]
fn an_unknown_variant_is_bad_usage_listing_the_variants() {
    let dir = project();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["compare", "v1", "v3"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no variant `v3`"))
        .stderr(predicate::str::contains("variants: v1, v2"));
}

#[test]
fn a_cubin_needs_an_entry_point_when_no_pipeline_gives_one() {
    let dir = tempfile::tempdir().unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["compare", "a.cubin", "b.cubin", "--dims", "1,2,32,64"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--entry NAME"));
}

#[test]
fn without_a_driver_it_says_so() {
    if !common::no_driver_here() {
        return;
    }
    let dir = project();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["compare", "v1", "v2"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "no CUDA driver (libcuda.so.1) found",
        ));
}

/// A `.cubin` beside a variant runs as the variant does: its entry point and workload, in a
/// pipeline whose kernels share neither. Two cubins still need `--entry`.
#[test]
fn a_cubin_beside_a_variant_takes_its_entry_and_workload() {
    if !common::no_driver_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("pipeline.yaml"), dir.path().join("pipeline.yaml")).unwrap();
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["compare", "ws-c1-x2", "old/ws-c1-x2.sm_90a.cubin"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "no CUDA driver (libcuda.so.1) found",
        ));
    Command::new(common::repro_bin())
        .current_dir(dir.path())
        .args(["compare", "old/a.cubin", "old/b.cubin"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--entry NAME"));
}
