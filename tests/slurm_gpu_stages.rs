//! GPU stages through the real Slurm executor (`ci/slurm/setup.sh`): the GPUs are found by a
//! `repro exec --query-devices` job on a node, each measurement records the node that ran
//! it, and one result refuses a second GPU model. There is no GPU here, so a stand-in
//! `repro` script answers the probe and prints bench records the way `repro exec` does.
//! Runs only with REPRO_SLURM_TESTS=1 (and then fails if the cluster is not up).

#[path = "support/slurm.rs"]
mod support;

use repro::executor::slurm::{SlurmExecutor, SlurmSettings};
use repro::executor::{CancelFlag, Executor};
use repro::gpu::client::{ExecRequest, ExecTarget};
use repro::gpu::discover::{stage_gpus, StageJobs};
use repro::gpu::worker::pool::Workers;
use repro::schema::{BenchResult, RunStatus};
use repro::stages::gpu_nodes::{gpu_slots, OneGpuModel};
use repro::stages::slots::run_on_slots;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::{enabled, job_records};

/// Stands in for `repro`: `exec --query-devices` prints one GPU of model `$MODEL`;
/// `exec --worker` answers each request with a bench record measured on it, with the GPU
/// index Slurm gave the step (as `repro exec` does).
const FAKE_REPRO: &str = r#"#!/bin/sh
case "$*" in
  *--query-devices*)
    printf '[{"index":0,"name":"%s","uuid":"GPU-fake","compute_capability":[8,9],"sm_count":58,"memory_bytes":24000000000,"cuda_driver_version":"13.0","driver_version":"580.0"}]\n' "$MODEL"
    ;;
  *)
    while read -r line; do
      id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
      seed=$(printf '%s' "$line" | sed 's/.*"seed":\([0-9]*\).*/\1/')
      printf '{"id":%s,"result":{"shape":"small","B":1,"H":1,"S":32,"D":64,"seed":%s,"warmup":1,"iters":5,"status":"ok","device_index":%s,"device_name":"%s","timing_mode":null,"p50_us":4.0,"p90_us":null,"p99_us":null,"mean_us":null,"std_us":null,"min_us":null,"ci95_us":null,"cv":null,"samples":null,"max_abs_err":0.001,"mean_abs_err":null,"pct_bad":null,"rel_l2_err":null,"nan_count":null,"inf_count":null,"correctness_pass":true}}\n' \
        "$id" "$seed" "${SLURM_STEP_GPUS:-0}" "$MODEL"
    done
    ;;
esac
"#;

fn small() -> std::collections::BTreeMap<String, i64> {
    [("B", 1), ("H", 1), ("S", 32), ("D", 64)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn slurm() -> SlurmExecutor {
    SlurmExecutor::new(SlurmSettings {
        partition: Some("debug".into()),
        gres: Some("gpu:1".into()),
        time: Some("5".into()),
        ..SlurmSettings::default()
    })
    .unwrap_or_else(|e| {
        panic!("REPRO_SLURM_TESTS=1 but the Slurm cluster is not usable: {e}\nrun `bash ci/slurm/setup.sh`")
    })
}

/// A project directory with the stand-in `repro` that reports GPU model `model`.
fn project(model: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("fake-repro");
    std::fs::write(&exe, FAKE_REPRO.replace("$MODEL", model)).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), "version: 1\n").unwrap();
    (dir, exe)
}

/// The bench stage's loop in small: `seeds` measurements on one worker (a Slurm job) per
/// GPU slot, `gpu_slots` at a time.
fn measure(executor: &dyn Executor, root: &Path, exe: &Path, seeds: u64) -> Vec<BenchResult> {
    let cancel = CancelFlag::default();
    let pipeline = root.join("pipeline.yaml");
    let slots = executor.gpu_slots();
    let workers = Workers::new(
        StageJobs {
            executor,
            cancel: &cancel,
            repro_exe: exe,
            pipeline_file: &pipeline,
            root,
            log: None,
        },
        slots,
    );
    let items: Vec<u64> = (0..seeds).collect();
    let mut results = vec![None; items.len()];
    run_on_slots(
        slots,
        &items,
        &cancel,
        |slot, &seed| {
            let req = ExecRequest {
                target: ExecTarget::Variant("v".into()),
                workload: None,
                shape: "small".into(),
                inputs: None,
                precision: None,
                seed,
                warmup: 1,
                iters: 5,
                l2: "warm".into(),
                method: "graph".into(),
                timing: true,
                profile: None,
                check: true,
            };
            workers.run(slot, &req, &small(), Duration::from_secs(60))
        },
        |i, r| results[i] = Some(r),
    );
    results.into_iter().map(Option::unwrap).collect()
}

#[test]
fn gpus_are_probed_on_a_node_and_each_record_names_its_node() {
    if !enabled() {
        return;
    }
    let executor = slurm();
    let (dir, exe) = project("Fake L4");
    let cancel = CancelFlag::default();
    let log = dir.path().join("bench.log");
    let gpus = stage_gpus(&StageJobs {
        executor: &executor,
        cancel: &cancel,
        repro_exe: &exe,
        pipeline_file: &dir.path().join("pipeline.yaml"),
        root: dir.path(),
        log: Some(&log),
    })
    .unwrap();
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].name, "Fake L4");
    assert_eq!(gpus[0].arch(), "sm_89");
    // The probe ran as a Slurm job in the project directory.
    let workdir = format!("WorkDir={}", dir.path().display());
    let records = job_records();
    assert!(
        records
            .lines()
            .any(|l| l.contains(&workdir) && l.contains("Name=exec:query-devices ")),
        "no Slurm record of the probe job in:\n{records}"
    );
    // The probe saw one node's GPUs; concurrency is the cluster's, not the probe's.
    assert!(executor.gpu_slots() >= 2, "the CI cluster has 2 fake GPUs");
    assert_eq!(gpu_slots(&executor, &gpus), executor.gpu_slots());

    let records = measure(&executor, dir.path(), &exe, 4);
    // The one node of the CI cluster, by Slurm's name for it.
    let node = std::process::Command::new("sinfo")
        .args(["-h", "-p", "debug", "-o", "%N"])
        .output()
        .unwrap();
    let node = String::from_utf8_lossy(&node.stdout).trim().to_string();
    assert!(!node.is_empty());
    assert_eq!(records.len(), 4);
    for r in &records {
        assert_eq!(r.status, RunStatus::Ok, "{r:?}");
        assert_eq!(r.node.as_deref(), Some(node.as_str()), "{r:?}");
        assert_eq!(r.device_name.as_deref(), Some("Fake L4"));
        assert!(r.device_index.is_some());
    }
    let line = serde_json::to_string(&records[0]).unwrap();
    assert!(line.contains(&format!(r#""node":"{node}""#)), "{line}");
    OneGpuModel::new(false).admit(&records).unwrap();
}

#[test]
fn a_second_gpu_model_in_one_result_is_refused_naming_node_and_model() {
    if !enabled() {
        return;
    }
    let executor = slurm();
    let (l4_dir, l4) = project("Fake L4");
    let (h100_dir, h100) = project("Fake H100");
    let mut records = measure(&executor, l4_dir.path(), &l4, 1);
    records.extend(measure(&executor, h100_dir.path(), &h100, 1));
    let node = records[0].node.clone().unwrap();

    let err = OneGpuModel::new(false).admit(&records).unwrap_err();
    assert!(err.contains("2 different GPU models"), "{err}");
    assert!(
        err.contains(&format!("  {node} → Fake H100, Fake L4")),
        "{err}"
    );
    OneGpuModel::new(true).admit(&records).unwrap();
}

#[test]
fn a_bench_stage_on_slurm_probes_the_node_not_this_machine() {
    if !enabled() {
        return;
    }
    // The real binary: its `repro exec --query-devices` runs on the node through srun and,
    // with no GPU there, the stage is skipped with the node's answer and a Slurm fix.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.yaml"),
        r#"version: 1
executor: {kind: slurm, partition: debug, gres: "gpu:1", time: "5"}
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 1, S: 32, D: 64}
  primary: small
  seeds: [0]
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  v1: {kernel: sdpa_fp8, defines: {}}
stages:
  bench: {uses: bench, warmup: 1, iters: 5}
"#,
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("repro")
        .unwrap()
        .current_dir(dir.path())
        .args(["stage", "bench"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = std::fs::read_to_string(dir.path().join("artifacts/bench/v1.json"))
        .unwrap_or_else(|e| panic!("no bench file ({e}); stderr:\n{stderr}"));
    let bench: repro::schema::BenchFile = serde_json::from_str(&file).unwrap();
    assert_eq!(bench.status, RunStatus::Skipped, "{file}");
    let reason = bench.reason.unwrap();
    assert!(
        reason.contains(
            "the GPU probe job (repro exec --query-devices) through the slurm executor on "
        ),
        "{reason}"
    );
    assert!(
        stderr.contains("partition"),
        "the fix names the Slurm settings:\n{stderr}"
    );
}
