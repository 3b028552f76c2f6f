//! The bench stage reuses a variant's committed results while its key is unchanged, and
//! measures only what changed (docs/guide/results.md, "Reused results"). No GPU: the stage
//! runs through an executor that says its jobs run elsewhere, so the GPUs come from a
//! `repro exec --query-devices` job, and a stand-in `repro` answers that and the worker's
//! requests, noting each request.

use crate::lock;

use lock::lock_outputs;
use repro::engine::{Configs, Overrides, RunCtx, StageKind, StageOutcome};
use repro::executor::local::LocalExecutor;
use repro::executor::{CancelFlag, Executor, Job, JobOutcome};
use repro::schema::BenchFile;
use repro::stages::bench::BenchStage;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Local processes, presented as a cluster's (the stage then probes the GPUs with a job).
struct Elsewhere(LocalExecutor);

impl Executor for Elsewhere {
    fn name(&self) -> &str {
        "elsewhere"
    }
    fn run(&self, job: &Job, cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        self.0.run(job, cancel)
    }
    fn gpu_slots(&self) -> u32 {
        1
    }
    fn runs_jobs_here(&self) -> bool {
        false
    }
}

const FAKE_REPRO: &str = r#"#!/bin/sh
case "$*" in
  *--query-devices*)
    echo '[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-0","compute_capability":[9,0],"sm_count":132,"memory_bytes":85000000000,"cuda_driver_version":"13.0","driver_version":"580.159.04"}]'
    ;;
  *--worker*)
    while read -r line; do
      echo "$line" >> "$(dirname "$0")/requests.txt"
      id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
      seed=$(printf '%s' "$line" | sed 's/.*"seed":\([0-9]*\).*/\1/')
      printf '{"id":%s,"result":{"shape":"small","B":1,"H":1,"S":32,"D":64,"seed":%s,"warmup":1,"iters":5,"status":"ok","device_index":0,"device_name":"NVIDIA H100 80GB HBM3","p50_us":10.0,"max_abs_err":0.001,"mean_abs_err":0.0001,"pct_bad":0.0,"nan_count":0,"inf_count":0,"correctness_pass":true}}\n' "$id" "$seed"
    done
    ;;
esac
"#;

const PIPELINE: &str = "version: 1
workload:
  op: sdpa_fp8
  shapes:
    small: {B: 1, H: 1, S: 32, D: 64}
  primary: small
  seeds: [0, 1]
kernels:
  k: {source: k.cu, entry: sdpa_fp8_fwd}
variants:
  a: {kernel: k}
  b: {kernel: k, defines: {TILE_M: 64}}
control: a
stages:
  bench: {uses: bench, warmup: 1, iters: 5}
";

struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    exe: PathBuf,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let exe = root.join("fake-repro");
        std::fs::write(&exe, FAKE_REPRO).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(root.join("pipeline.yaml"), PIPELINE).unwrap();
        std::fs::create_dir_all(root.join(".repro/cubins")).unwrap();
        for cubin in ["a", "b", "reference"] {
            std::fs::write(
                root.join(format!(".repro/cubins/{cubin}.sm_90a.cubin")),
                cubin,
            )
            .unwrap();
        }
        Project {
            _dir: dir,
            root,
            exe,
        }
    }

    /// Run the bench stage as the engine would: into staging, then the outputs moved in
    /// and their digests locked. Returns the variants measured (from the requests seen).
    fn bench(&self, remeasure: bool) -> Vec<String> {
        let requests = self.root.join("requests.txt");
        let _ = std::fs::remove_file(&requests);
        let pipeline: repro::pipeline::Pipeline = serde_yaml::from_str(PIPELINE).unwrap();
        let staging = self.root.join(".repro/staging/bench");
        let _ = std::fs::remove_dir_all(&staging);
        let overrides = Overrides {
            remeasure,
            ..Overrides::default()
        };
        let cancel = CancelFlag::default();
        let spec = &pipeline.stages["bench"];
        let config = BenchStage.configure("bench", spec, &pipeline).unwrap();
        let peers = Configs::new(vec![("bench".into(), config.clone())]);
        let ctx = RunCtx {
            name: "bench",
            spec,
            config: &config,
            peers: &peers,
            pipeline: &pipeline,
            root: &self.root,
            staging: &staging,
            log: &self.root.join("bench.log"),
            executor: &Elsewhere(LocalExecutor::new()),
            cancel: &cancel,
            repro_exe: &self.exe,
            pipeline_file: &self.root.join("pipeline.yaml"),
            overrides: &overrides,
            progress: &|line| eprintln!("bench: {line}"),
        };
        let outcome = BenchStage.run(&ctx).unwrap();
        assert_eq!(outcome, StageOutcome::Passed);
        let out = self.root.join("artifacts/bench");
        std::fs::create_dir_all(&out).unwrap();
        let outputs: Vec<String> = ["a", "b"]
            .map(|v| format!("artifacts/bench/{v}.json"))
            .to_vec();
        for rel in &outputs {
            std::fs::copy(staging.join(rel), self.root.join(rel)).unwrap();
        }
        lock_outputs(&self.root, "bench", &outputs);
        let seen = std::fs::read_to_string(&requests).unwrap_or_default();
        let mut variants: Vec<String> = seen
            .lines()
            .map(|l| {
                let v = l.split(r#""variant":""#).nth(1).unwrap();
                v[..v.find('"').unwrap()].to_string()
            })
            .collect();
        variants.dedup();
        variants
    }

    fn file(&self, v: &str) -> BenchFile {
        let text = std::fs::read(self.root.join(format!("artifacts/bench/{v}.json"))).unwrap();
        serde_json::from_slice(&text).unwrap()
    }
}

fn p(root: &Path, rel: &str) -> PathBuf {
    root.join(rel)
}

#[test]
fn only_changed_variants_are_measured_again() {
    let project = Project::new();
    assert_eq!(project.bench(false), ["a", "b"]);
    let first = project.file("a").measured.unwrap();
    assert!(!first.reused);
    for part in [
        "cubin_sha256",
        "workload_sha256",
        "harness_sha256",
        "gpu",
        "driver",
    ] {
        assert!(first.key.contains_key(part), "{:?}", first.key);
    }
    assert_eq!(first.key["gpu"], "NVIDIA H100 80GB HBM3 sm_90");
    assert_eq!(first.key["driver"], "580.159.04");

    // Nothing changed: nothing is measured; the records say so and from which run.
    assert!(project.bench(false).is_empty());
    for v in ["a", "b"] {
        let m = project.file(v).measured.unwrap();
        assert!(m.reused, "{v}");
        assert_eq!(m.run, project.file(v).measured.unwrap().run);
    }
    assert_eq!(project.file("a").measured.unwrap().run, first.run);
    let a = project.file("a");
    assert_eq!(a.results.len(), 2);
    assert_eq!(
        a.results[0].speedups.get("speedup_vs_control"),
        Some(&Some(1.0)),
        "speedups are computed again"
    );
    let log = std::fs::read_to_string(p(&project.root, "bench.log")).unwrap();
    assert!(log.contains("a: reused the results measured "), "{log}");

    // A rebuilt b: only b.
    std::fs::write(
        p(&project.root, ".repro/cubins/b.sm_90a.cubin"),
        "b, edited",
    )
    .unwrap();
    assert_eq!(project.bench(false), ["b"]);
    assert!(project.file("a").measured.unwrap().reused);
    assert!(!project.file("b").measured.unwrap().reused);

    // --force measures everything again.
    assert_eq!(project.bench(true), ["a", "b"]);

    // A record the lock does not vouch for is never reused.
    let path = p(&project.root, "artifacts/bench/a.json");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"p50_us\": 10.0", "\"p50_us\": 1.0");
    std::fs::write(&path, edited).unwrap();
    assert_eq!(project.bench(false), ["a"]);

    // Another workload (the reference kernel changed): everything.
    std::fs::write(
        p(&project.root, ".repro/cubins/reference.sm_90a.cubin"),
        "new",
    )
    .unwrap();
    assert_eq!(project.bench(false), ["a", "b"]);
}
