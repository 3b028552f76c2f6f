//! The build stage through its `StageKind` API, with a local test executor.

mod compile;
mod declaration;
mod gates;
mod nvcc;

use super::*;
use crate::tests::calls::Calls;
use repro_executor::CancelFlag;
use repro_pipeline::test_support::CountingExecutor;
use repro_schema::BuildStatus;

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
