//! A tune stage on a GPU of an architecture its `archs:` leave out: skipped, saying which
//! arch and which stage tunes there, with the outputs of a skipped tune. The GPU is an L4
//! that a probe job reports (the stage's executor says its jobs run elsewhere), so no GPU
//! is needed.

use super::*;
use repro_executor::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use repro_pipeline::kind::{Config, Configs};

/// Answers the GPU probe job with one NVIDIA L4 (sm_89); runs nothing else.
struct OnAnL4;

impl Executor for OnAnL4 {
    fn name(&self) -> &str {
        "l4-node"
    }
    fn run(&self, job: &Job, _cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        assert!(
            job.argv.iter().any(|a| a == "--query-devices"),
            "only the probe runs: {:?}",
            job.argv
        );
        let l4 = r#"[{"index":0,"name":"NVIDIA L4","uuid":"GPU-0","compute_capability":[8,9],"sm_count":58,"memory_bytes":24000000000,"cuda_driver_version":"13.0","driver_version":"580.95.05"}]"#;
        Ok(JobOutcome {
            exit: ExitKind::Code(0),
            stdout: l4.as_bytes().to_vec(),
            tail: String::new(),
            node: Some("l4-node".into()),
            elapsed: std::time::Duration::ZERO,
        })
    }
    fn gpu_slots(&self) -> u32 {
        1
    }
    fn runs_jobs_here(&self) -> bool {
        false
    }
}

const PIPELINE: &str = "arch: [sm_89, sm_90a]\nkernels:\n  ws: {source: kernels/ws.cu, entry: f}\n  mma: {source: kernels/mma.cu, entry: f}\nvariants:\n  ws-base: {kernel: ws}\n  mma-base: {kernel: mma}\nstages:\n  build: {uses: build}\n  evo-tune: {uses: tune, needs: [build], base: ws-base, archs: [sm_90a], space: {A: [1, 2]}}\n  evo-tune-mma: {uses: tune, needs: [build], base: mma-base, archs: [sm_89], dir: artifacts/tune-mma, space: {A: [1, 2]}}\n";

#[test]
fn off_its_archs_the_stage_is_skipped_naming_the_stage_that_tunes_there() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let p = repro_pipeline::workload::testing::tiny_pipeline(PIPELINE, &["ws", "mma"]);
    let peers = Configs::new(
        ["evo-tune", "evo-tune-mma"]
            .map(|n| {
                let config: Config = TuneStage.configure(n, &p.stages[n], &p).unwrap();
                (n.to_string(), config)
            })
            .to_vec(),
    );
    let staging = root.join(".repro/staging/evo-tune");
    let ctx = RunCtx {
        name: "evo-tune",
        spec: &p.stages["evo-tune"],
        config: peers.get("evo-tune").unwrap(),
        peers: &peers,
        pipeline: &p,
        root,
        staging: &staging,
        log: &root.join(".repro/logs/evo-tune.log"),
        executor: &OnAnL4,
        cancel: &CancelFlag::default(),
        repro_exe: Path::new("repro"),
        pipeline_file: &root.join("pipeline.yaml"),
        overrides: &Default::default(),
        progress: &|_| {},
    };
    let StageOutcome::Skipped { reason, fix } = TuneStage.run(&ctx).unwrap() else {
        panic!("the ws tune runs on sm_90a only")
    };
    assert_eq!(
        reason,
        "`evo-tune` tunes kernel `ws` on sm_90a only (its `archs:`), and this GPU runs sm_89 cubins; `evo-tune-mma` tunes workload `tiny` there"
    );
    assert!(
        fix.contains("`repro tune evo-tune` on a GPU that runs sm_90a"),
        "{fix}"
    );
    // The outputs of a skipped tune: an empty log and elite, no cubins.
    let log = std::fs::read_to_string(staging.join("artifacts/tune/tune_log.csv")).unwrap();
    assert_eq!(log.lines().count(), 1, "{log}");
    let elite = std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap();
    assert_eq!(elite.trim(), "[]");
    assert!(!staging.join(".repro/cubins").exists());
}
