//! The tune stage's gates on real compile outputs and bench records, and its GPU backend
//! on a fake `repro exec` spread over GPUs.

use super::gpu::GpuBackend;
use super::gpu::{compile_gates, judge, CompileGate, Verdict};
use super::tests::mission;
use super::*;
use crate::build::compile::CompileOutput;
use crate::gpu_nodes::OneGpuModel;
use repro_pipeline::PtxasGates;
use repro_schema::BenchResult;
use repro_schema::EntryResources;
use repro_schema::RunStatus;
use repro_schema::TrialStatus;
use repro_tune::search::Trial;

fn output(ok: bool, registers: u32, spill: u64) -> CompileOutput {
    CompileOutput {
        ok,
        command: vec!["nvcc".into()],
        cubin: ok.then(|| PathBuf::from("/cache/x.cubin")),
        cubin_sha256: None,
        entries: vec![EntryResources {
            name: "attn_fp8_fwd".into(),
            registers: Some(registers),
            spill_store_bytes: Some(spill),
            spill_load_bytes: Some(spill),
            ..EntryResources::default()
        }],
        error: (!ok)
            .then(|| "kernels/attn_fp8.cu(12): error: static assertion failed\n\nmore".into()),
        cached: false,
    }
}

#[test]
fn compile_gates_reject_at_the_first_failure() {
    let rejected = |g: CompileGate| match g {
        CompileGate::Rejected(e) => e,
        other => panic!("expected a rejection, got {other:?}"),
    };
    let gates = PtxasGates {
        max_registers: Some(128),
        max_smem_bytes: None,
        max_spill_bytes: Some(0),
    };
    let e = rejected(compile_gates(
        &output(false, 0, 0),
        "attn_fp8_fwd",
        Some(&gates),
    ));
    assert_eq!(e.status, TrialStatus::CompileError);
    assert_eq!(
        e.note,
        "kernels/attn_fp8.cu(12): error: static assertion failed | more"
    );

    let e = rejected(compile_gates(
        &output(true, 168, 8),
        "attn_fp8_fwd",
        Some(&gates),
    ));
    assert_eq!(e.status, TrialStatus::PtxasGate);
    assert_eq!((e.registers, e.spill_bytes), (Some(168), Some(16)));
    assert!(
        e.note.contains("ptxas.max_registers 168 > 128"),
        "{}",
        e.note
    );
    assert!(
        e.note.contains("ptxas.max_spill_bytes 16 > 0"),
        "{}",
        e.note
    );

    let CompileGate::Passed(e, cubin) =
        compile_gates(&output(true, 96, 0), "attn_fp8_fwd", Some(&gates))
    else {
        panic!("a clean compile passes")
    };
    assert_eq!(
        (&e.status, e.score, e.registers),
        (&TrialStatus::Ok, None, Some(96))
    );
    assert_eq!(cubin, PathBuf::from("/cache/x.cubin"));
    assert!(matches!(
        compile_gates(&output(true, 250, 9), "attn_fp8_fwd", None),
        CompileGate::Passed(..)
    ));
}

#[test]
fn gpu_gates_judge_each_run() {
    let mut r = BenchResult::blank("small", mission(), 0, (10, 50), RunStatus::Failed);
    r.error = Some("timed out after 60.0 s".into());
    assert!(
        matches!(judge(&r, false), Verdict::Reject(TrialStatus::Failed, ref w) if w.contains("timed out"))
    );

    let mut r = BenchResult::blank("small", mission(), 0, (10, 50), RunStatus::Ok);
    r.correctness_pass = Some(false);
    r.max_abs_err = Some(0.5);
    r.nan_count = Some(3);
    assert!(
        matches!(judge(&r, false), Verdict::Reject(TrialStatus::Incorrect, ref w) if w.contains("max_abs_err 0.500000") && w.contains("non-finite 3"))
    );

    r.correctness_pass = Some(true);
    assert!(matches!(judge(&r, false), Verdict::Pass(None)));
    assert!(matches!(
        judge(&r, true),
        Verdict::Reject(TrialStatus::Failed, _)
    ));
    r.p50_us = Some(12.5);
    assert!(matches!(judge(&r, true), Verdict::Pass(Some(p)) if p == 12.5));
}

/// `repro exec --worker` stand-in: notes each start (GPU and arguments) and each request
/// (GPU and the request line), and answers with a bench record whose p50 is the cubin's size
/// (so different configurations time differently).
const FAKE_WORKER: &str = r#"#!/bin/sh
echo "gpu=$CUDA_VISIBLE_DEVICES $*" >> "$(dirname "$0")/starts.txt"
while read -r line; do
  echo "gpu=$CUDA_VISIBLE_DEVICES $line" >> "$(dirname "$0")/calls.txt"
  id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
  cubin=$(printf '%s' "$line" | sed 's/.*"path":"\([^"]*\)".*/\1/')
  shape=$(printf '%s' "$line" | sed 's/.*"shape":"\([^"]*\)".*/\1/')
  p50=null
  case "$line" in *'"timing":false'*) ;; *) p50=$(stat -c %s "$cubin") ;; esac
  printf '{"id":%s,"result":{"shape":"%s","B":1,"H":1,"S":32,"D":64,"seed":0,"warmup":10,"iters":50,"status":"ok","p50_us":%s,"max_abs_err":0.001,"correctness_pass":true}}\n' "$id" "$shape" "$p50"
done
"#;

const GATED_KERNEL: &str = r#"
#ifndef TILE
#define TILE 1
#endif
#ifndef SCALE
#define SCALE 1
#endif
static_assert(TILE != 3, "TILE == 3 is not supported");
extern "C" __global__ void k(float* out, int n) {
    float acc[TILE * 8];
#pragma unroll
    for (int i = 0; i < TILE * 8; ++i) acc[i] = out[(i + 1) * threadIdx.x % n];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < TILE * 8; ++i) s += acc[i] * acc[(i * 7 + 3) % (TILE * 8)];
    out[threadIdx.x] = s * SCALE;
}
"#;

/// An exhaustive sweep of `space` (YAML), six candidates per generation.
fn sweep(space: &str, budget: u32, elite: u32) -> (repro_tune::space::Space, Settings) {
    let space =
        repro_tune::space::Space::from_yaml(&serde_yaml::from_str(space).unwrap(), None).unwrap();
    let settings = Settings {
        budget,
        population: 6,
        elite,
        seed: 0,
        exhaustive: true,
        start: Vec::new(),
    };
    (space, settings)
}

fn write_fake_exec(root: &Path, script: &str) -> PathBuf {
    let exe = root.join("fake-repro");
    std::fs::write(&exe, script).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    exe
}

/// A project for the real backend: `k.cu` (GATED_KERNEL), a `repro exec --worker` stand-in
/// running `worker`, and real nvcc (`None` when there is none: the test says it skipped).
struct Rig {
    dir: tempfile::TempDir,
    exe: PathBuf,
    log: PathBuf,
    executor: repro_executor::local::LocalExecutor,
    cancel: repro_executor::CancelFlag,
    tc: repro_pipeline::toolchain::Toolchain,
}

impl Rig {
    fn new(test: &str, worker: &str) -> Option<Rig> {
        let tc = repro_pipeline::test_support::real_nvcc(test)?;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("k.cu"), GATED_KERNEL).unwrap();
        let exe = write_fake_exec(dir.path(), worker);
        let log = dir.path().join("tune.log");
        Some(Rig {
            dir,
            exe,
            log,
            executor: repro_executor::local::LocalExecutor::new(),
            cancel: Default::default(),
            tc,
        })
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Two GPU slots' workers over the rig.
    fn workers(&self) -> repro_gpu::worker::pool::Workers<'_> {
        repro_gpu::worker::pool::Workers::new(
            repro_gpu::discover::StageJobs {
                executor: &self.executor,
                cancel: &self.cancel,
                repro_exe: self.exe.as_path(),
                pipeline_file: Path::new("pipeline.yaml"),
                root: self.root(),
                log: Some(self.log.as_path()),
            },
            2,
        )
    }

    /// The real backend over the rig and its `workers`.
    fn backend<'a, 'w>(
        &'a self,
        workers: &'w repro_gpu::worker::pool::Workers<'a>,
        gpu_use: &'w super::cases::GpuUse,
        one_model: OneGpuModel,
    ) -> GpuBackend<'a, 'w> {
        let (executor, cancel, root, tc) = (
            &self.executor as &dyn repro_executor::Executor,
            &self.cancel,
            self.root(),
            self.tc.clone(),
        );
        let decl = repro_pipeline::workload::testing::tiny_pipeline("stages: {}\n", &["k"])
            .workloads["tiny"]
            .clone();
        GpuBackend {
            executor,
            cancel,
            root,
            workers,
            gpu_use,
            tc,
            arch: "sm_90".into(),
            kernel: KernelSpec {
                source: "k.cu".into(),
                entry: "k".into(),
                flags: vec![],
                precision: None,
                ptxas: None,
                ..KernelSpec::default()
            },
            base_defines: BTreeMap::from([("SCALE".to_string(), "3".to_string())]),
            gates: Some(PtxasGates {
                max_registers: Some(60),
                max_smem_bytes: None,
                max_spill_bytes: Some(0),
            }),
            workload: "tiny".into(),
            decl,
            precision: None,
            check_shapes: vec!["small".into(), "mission".into()],
            timed_shapes: vec!["mission".into()],
            seed: 0,
            warmup: 10,
            iters: 50,
            l2: "warm".into(),
            method: "isolated".into(),
            timeout: std::time::Duration::from_secs(30),
            slots: 2,
            jobs: 2,
            one_model,
            measured: Default::default(),
        }
    }
}

/// Trials timed on two GPU models (the stand-in names its model after the GPU it was
/// given) stop the tune with the node → model listing, unless `allow_mixed_gpus`.
#[test]
fn trials_on_two_gpu_models_stop_the_tune_unless_allowed() {
    let two_models = FAKE_WORKER.replace(
        r#""status":"ok","#,
        // Leaves the script's single-quoted printf format to expand the variable.
        r#""status":"ok","device_name":"Model '"$CUDA_VISIBLE_DEVICES"'","#,
    );
    let Some(rig) = Rig::new(
        "trials_on_two_gpu_models_stop_the_tune_unless_allowed",
        &two_models,
    ) else {
        return;
    };
    let (space, settings) = sweep("{TILE: [1, 2, 4], SCALE: [1, 2]}", 6, 1);
    for allow in [false, true] {
        let (workers, gpu_use) = (rig.workers(), super::cases::GpuUse::default());
        let mut backend = rig.backend(&workers, &gpu_use, OneGpuModel::new(allow));
        let mut memo = Memo::in_memory();
        let run = repro_tune::search::run(&space, &settings, &mut backend, &mut memo, &mut |_| {});
        if allow {
            assert_eq!(run.unwrap().trials.len(), 6);
            continue;
        }
        let Err(err) = run else {
            panic!("mixed models stop the tune")
        };
        let err = format!("{err:#}");
        assert!(err.contains("2 different GPU models"), "{err}");
        assert!(err.contains("Model 0, Model 1"), "{err}");
        assert!(memo.len() < 6, "a mixed trial is not remembered");
    }
}

/// The real backend end to end without a GPU: real nvcc compiles a generation in parallel,
/// the PTXAS gate rejects the register-hungry configurations, and the GPU workers (a script
/// here) run correctness before timing, spread over two GPU slots, one worker per slot for
/// the whole sweep.
#[test]
fn gpu_backend_compiles_gates_and_spreads_exec_children_over_gpus() {
    let Some(rig) = Rig::new(
        "gpu_backend_compiles_gates_and_spreads_exec_children_over_gpus",
        FAKE_WORKER,
    ) else {
        return;
    };
    let root = rig.root();
    let (workers, gpu_use) = (rig.workers(), super::cases::GpuUse::default());
    let mut backend = rig.backend(&workers, &gpu_use, OneGpuModel::new(false));
    let (space, settings) = sweep("{TILE: [1, 2, 3, 4, 8, 16], SCALE: [1, 2]}", 100, 3);
    let outcome = repro_tune::search::run(
        &space,
        &settings,
        &mut backend,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();
    let status = |tile: i64| -> Vec<TrialStatus> {
        outcome
            .trials
            .iter()
            .filter(|t| t.candidate.config["TILE"] == tile)
            .map(|t| t.evaluation.status.clone())
            .collect()
    };
    assert_eq!(status(1), [TrialStatus::Ok, TrialStatus::Ok]);
    assert_eq!(status(4), [TrialStatus::Ok, TrialStatus::Ok]);
    let compile_errors = [TrialStatus::CompileError, TrialStatus::CompileError];
    assert_eq!(status(3), compile_errors);
    assert_eq!(status(16), [TrialStatus::PtxasGate, TrialStatus::PtxasGate]);
    let compile_error = outcome
        .trials
        .iter()
        .find(|t| t.candidate.config["TILE"] == 3)
        .unwrap();
    assert!(
        compile_error
            .evaluation
            .note
            .contains("TILE == 3 is not supported"),
        "{}",
        compile_error.evaluation.note
    );
    let gated = outcome
        .trials
        .iter()
        .find(|t| t.candidate.config["TILE"] == 16)
        .unwrap();
    assert!(gated.evaluation.registers.unwrap() > 60);
    assert!(
        gated.evaluation.note.contains("ptxas.max_registers"),
        "{}",
        gated.evaluation.note
    );

    let ok: Vec<&Trial> = outcome
        .trials
        .iter()
        .filter(|t| t.evaluation.status.is_ok())
        .collect();
    for t in &ok {
        // small and mission checked without timing, then mission timed.
        assert_eq!(t.evaluation.bench.len(), 3);
        assert_eq!(t.evaluation.correctness_pass, Some(true));
        assert_eq!(t.evaluation.score, t.evaluation.bench[2].p50_us);
        assert!(t.evaluation.registers.unwrap() <= 60);
    }
    let calls = std::fs::read_to_string(root.join("calls.txt")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 3 * ok.len());
    assert!(calls.iter().any(|c| c.starts_with("gpu=0 ")));
    assert!(calls.iter().any(|c| c.starts_with("gpu=1 ")));
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.contains(r#""timing":false"#))
            .count(),
        2 * ok.len()
    );
    assert!(calls
        .iter()
        .all(|c| c.contains(r#""entry":"k""#) && c.contains(r#""cubin":{"path":"#)));
    // One worker per GPU slot for the whole sweep, both generations.
    let starts = std::fs::read_to_string(root.join("starts.txt")).unwrap();
    let mut starts: Vec<&str> = starts.lines().collect();
    starts.sort();
    assert_eq!(
        starts,
        [
            "gpu=0 -f pipeline.yaml exec --worker",
            "gpu=1 -f pipeline.yaml exec --worker"
        ]
    );

    let elite: Vec<repro_tune::search::Candidate> = outcome
        .elite
        .iter()
        .map(|&i| outcome.trials[i].candidate.clone())
        .collect();
    let cubins = backend.cubins(&elite).unwrap();
    assert_eq!(cubins.len(), 3);
    assert!(cubins.iter().all(|c| c.is_file()));
}

#[test]
fn a_program_identical_to_an_earlier_trials_takes_its_measurement() {
    let Some(rig) = Rig::new(
        "a_program_identical_to_an_earlier_trials_takes_its_measurement",
        FAKE_WORKER,
    ) else {
        return;
    };
    let root = rig.root();
    let (workers, gpu_use) = (rig.workers(), super::cases::GpuUse::default());
    let mut backend = rig.backend(&workers, &gpu_use, OneGpuModel::new(false));
    // One slot: the second of two identical programs runs after the first is recorded.
    backend.slots = 1;
    // The kernel never reads IGNORED: two programs, four trials.
    let (space, settings) = sweep("{TILE: [1, 2], IGNORED: [0, 1]}", 4, 1);
    let outcome = repro_tune::search::run(
        &space,
        &settings,
        &mut backend,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(outcome.trials.len(), 4);
    let calls = std::fs::read_to_string(root.join("calls.txt")).unwrap();
    assert_eq!(calls.lines().count(), 3 * 2, "each program measured once");
    for tile in [1, 2] {
        let pair: Vec<&Trial> = outcome
            .trials
            .iter()
            .filter(|t| t.candidate.config["TILE"] == tile)
            .collect();
        assert_eq!(pair[0].evaluation.score, pair[1].evaluation.score);
        let (first, second) = match pair[0].evaluation.note.contains("the same cubin") {
            true => (pair[1], pair[0]),
            false => (pair[0], pair[1]),
        };
        assert_eq!(
            second.evaluation.note,
            format!(
                "the same cubin and launch as trial {}: its measurement",
                first.candidate.trial
            )
        );
    }
}

#[test]
fn the_memo_is_shared_by_gpus_of_one_model() {
    let gpu = |index: u32, name: &str| repro_gpu::GpuInfo {
        index,
        name: name.into(),
        uuid: format!("GPU-{index}"),
        compute_capability: [9, 0],
        sm_count: 132,
        memory_bytes: 1 << 30,
        cuda_driver_version: "13.0".into(),
        driver_version: Some("580.1".into()),
    };
    let one = gpu_models(&[gpu(0, "NVIDIA H200")]);
    assert_eq!(one, vec!["NVIDIA H200 sm_90 driver 580.1".to_string()]);
    assert_eq!(
        gpu_models(&[gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA H200")]),
        one
    );
    assert_eq!(
        gpu_models(&[gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA H100")]).len(),
        2
    );
}
