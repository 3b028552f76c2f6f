//! The tune stage without a GPU: its gates on real compile outputs and bench records, and
//! its orchestration (search, memo, CSV, elite, cubins, exhaustive comparison) with a fake
//! backend in place of nvcc and `repro exec`.

use super::gpu::GpuBackend;
use super::gpu::{compile_gates, judge, CompileGate, Verdict};
use super::*;
use crate::gpu::client::blank_result;
use crate::pipeline::{PtxasGates, Shape};
use crate::schema::{EliteEntry, EntryResources, TuneTrial};
use crate::stages::build::compile::CompileOutput;
use crate::stages::gpu_nodes::OneGpuModel;
use crate::tune::memo::Evaluation;
use crate::tune::search::Trial;
use crate::tune::search::{Candidate, Objective};
use crate::tune::space::{show, Config};

const PIPELINE: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small:   {B: 1, H: 1, S: 32,  D: 64}
    mission: {B: 2, H: 8, S: 512, D: 64}
  primary: mission
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  base: {kernel: sdpa_fp8, defines: {USE_CP_ASYNC: 1}}
stages:
  evo-tune:
    uses: tune
    base: base
    budget: 24
    population: 6
    elite: 3
    seed: 1
    space:
      TILE_M: [32, 64, 128]
      TILE_N: [32, 64, 128]
      NUM_WARPS: [2, 4, 8]
      USE_WARP_SPECIALIZATION: [0, 1]
      NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
    constraints: ["TILE_M * TILE_N <= 8192", "USE_WARP_SPECIALIZATION == 0 || NUM_PRODUCER_WARPS < NUM_WARPS"]
"#;

fn options() -> (Pipeline, TuneOptions) {
    let p: Pipeline = serde_yaml::from_str(PIPELINE).unwrap();
    let o = TuneOptions::parse(&p.stages["evo-tune"], &p).unwrap();
    (p, o)
}

fn settings(o: &TuneOptions) -> Settings {
    Settings {
        budget: o.budget,
        population: o.population,
        elite: o.elite,
        seed: o.seed,
        exhaustive: false,
    }
}

/// Stands in for nvcc + `repro exec`: a deterministic time per configuration, big tiles
/// fail a PTXAS gate, and cubins are small files naming their configuration.
struct Fake {
    dir: PathBuf,
    evaluated: usize,
    all_fail: bool,
}

impl Objective for Fake {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        for (i, c) in batch.iter().enumerate() {
            self.evaluated += 1;
            let (m, n, w) = (
                c.config["TILE_M"],
                c.config["TILE_N"],
                c.config["NUM_WARPS"],
            );
            let e = if self.all_fail || m == 128 || (w == 2 && n >= 64) {
                Evaluation::rejected("ptxas_gate", "ptxas.max_registers 168 > 128")
            } else {
                let ws = c.config["USE_WARP_SPECIALIZATION"] as f64;
                let time = 10.0
                    + ((m - 64) as f64 / 32.0).powi(2)
                    + (n as f64 / 64.0)
                    + (w as f64 - 4.0).abs()
                    - ws * 0.5
                    + c.config.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64 * 0.1;
                let mut e = Evaluation::ok(time);
                e.registers = Some(96);
                e.spill_bytes = Some(0);
                e.max_abs_err = Some(0.001);
                e.correctness_pass = Some(true);
                let mut r = blank_result("mission", &MISSION, 0, 10, 50, "ok");
                r.p50_us = Some(time);
                e.bench = vec![r];
                e
            };
            done(i, e);
        }
        Ok(())
    }
}

impl Backend for Fake {
    fn cubins(&mut self, configs: &[Config]) -> anyhow::Result<Vec<PathBuf>> {
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let path = self.dir.join(format!("{i}.cubin"));
                std::fs::write(&path, show(c))?;
                Ok(path)
            })
            .collect()
    }
}

const MISSION: Shape = Shape {
    B: 2,
    H: 8,
    S: 512,
    D: 64,
};

fn run(
    o: &TuneOptions,
    exhaustive: bool,
    fake: &mut Fake,
    memo: &mut Memo,
    staging: &Path,
) -> (StageOutcome, Vec<String>, String) {
    let lines = std::cell::RefCell::new(Vec::new());
    let progress = |l: &str| lines.borrow_mut().push(l.to_string());
    let mut log = Vec::new();
    let outcome = tune_and_write(
        o,
        &settings(o),
        exhaustive,
        fake,
        memo,
        staging,
        Reporter {
            progress: &progress,
            log: &mut log,
        },
    )
    .unwrap();
    (outcome, lines.into_inner(), String::from_utf8(log).unwrap())
}

fn read_csv(path: &Path) -> Vec<TuneTrial> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn writes_the_log_the_elite_and_their_cubins() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::in_memory();
    let (outcome, lines, log) = run(&o, false, &mut fake, &mut memo, &staging);
    assert_eq!(outcome, StageOutcome::Passed);
    assert_eq!(fake.evaluated, 24);

    let text = std::fs::read_to_string(staging.join("artifacts/tune/tune_log.csv")).unwrap();
    assert!(text.starts_with(
        "trial,generation,timestamp,config,status,registers,spill_bytes,max_abs_err,max_err_over_ref_std,p50_us,correctness_pass,note\n"
    ));
    let rows = read_csv(&staging.join("artifacts/tune/tune_log.csv"));
    assert_eq!(rows.len(), 24);
    assert_eq!(
        rows.iter().map(|r| r.trial).collect::<Vec<_>>(),
        (1..=24).collect::<Vec<_>>()
    );
    assert_eq!(rows.iter().map(|r| r.generation).max(), Some(3));
    assert!(rows
        .iter()
        .any(|r| r.status == "ptxas_gate" && r.p50_us.is_none()));
    assert!(rows.iter().any(|r| r.note.starts_with("parents ")));
    let configs: std::collections::HashSet<&str> = rows.iter().map(|r| r.config.as_str()).collect();
    assert_eq!(configs.len(), 24, "a configuration was tried twice");

    let topk: Vec<EliteEntry> = serde_json::from_str(
        &std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        topk.iter().map(|e| e.rank).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(topk.windows(2).all(|w| w[0].p50_us <= w[1].p50_us));
    let best_row = rows
        .iter()
        .filter_map(|r| r.p50_us)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(topk[0].p50_us, best_row);
    assert_eq!(topk[0].bench.len(), 1);
    for e in &topk {
        let cubin = std::fs::read_to_string(staging.join(elite_cubin_path(e.rank))).unwrap();
        assert_eq!(cubin, show(&e.config));
    }

    assert_eq!(lines.iter().filter(|l| l.starts_with("trial ")).count(), 24);
    assert!(lines[0].starts_with("trial 1/24 gen 0 "), "{}", lines[0]);
    assert!(lines
        .last()
        .unwrap()
        .starts_with("tune: 24 trials of 64 configurations (24 evaluated, 0 from the memo)"));
    assert!(log.contains("best "), "{log}");
}

#[test]
fn exhaustive_writes_the_sweep_and_the_comparison_and_replays_the_search() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::in_memory();
    let (outcome, lines, _) = run(&o, true, &mut fake, &mut memo, &staging);
    assert_eq!(outcome, StageOutcome::Passed);
    // The sweep evaluates all 64; the search then replays from the memo.
    assert_eq!(fake.evaluated, 64);
    assert_eq!(
        read_csv(&staging.join("artifacts/tune/exhaustive.csv")).len(),
        64
    );
    let search = read_csv(&staging.join("artifacts/tune/tune_log.csv"));
    assert_eq!(search.len(), 24);
    assert!(search.iter().all(|r| r.note.ends_with("(memo)")));
    let cmp: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(staging.join("artifacts/tune/comparison.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cmp["space"], 64);
    assert_eq!(cmp["search_trials"], 24);
    assert!(cmp["gap_pct"].as_f64().unwrap() >= 0.0);
    assert!(lines.last().unwrap().starts_with("search best "));
}

#[test]
fn nothing_passing_is_a_failed_gate_with_empty_elite() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: true,
    };
    let (outcome, _, _) = run(&o, false, &mut fake, &mut Memo::in_memory(), &staging);
    assert_eq!(
        outcome,
        StageOutcome::GateFailed(
            "no configuration passed the gates in 24 trials (24 ptxas_gate)".into()
        )
    );
    assert_eq!(
        std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap(),
        "[]\n"
    );
    for rank in 1..=3 {
        assert!(
            !staging.join(elite_cubin_path(rank)).exists(),
            "no cubin may stand in for rank {rank}"
        );
    }
}

#[test]
fn a_rerun_reads_every_trial_from_the_memo() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let key = serde_json::json!({"test": "rerun"});
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::open(&dir.path().join("memo"), &key).unwrap();
    run(&o, false, &mut fake, &mut memo, &dir.path().join("a"));
    drop(memo);
    let mut memo = Memo::open(&dir.path().join("memo"), &key).unwrap();
    let (_, lines, _) = run(&o, false, &mut fake, &mut memo, &dir.path().join("b"));
    assert_eq!(fake.evaluated, 24);
    assert!(lines
        .last()
        .unwrap()
        .contains("(0 evaluated, 24 from the memo)"));
    let a = std::fs::read_to_string(dir.path().join("a/artifacts/tune/topk.json")).unwrap();
    let b = std::fs::read_to_string(dir.path().join("b/artifacts/tune/topk.json")).unwrap();
    assert_eq!(a, b);
}

fn output(ok: bool, registers: u32, spill: u64) -> CompileOutput {
    CompileOutput {
        ok,
        command: vec!["nvcc".into()],
        cubin: ok.then(|| PathBuf::from("/cache/x.cubin")),
        cubin_sha256: None,
        entries: vec![EntryResources {
            name: "sdpa_fp8_fwd".into(),
            registers: Some(registers),
            spill_store_bytes: Some(spill),
            spill_load_bytes: Some(spill),
            ..EntryResources::default()
        }],
        error: (!ok)
            .then(|| "kernels/sdpa_fp8.cu(12): error: static assertion failed\n\nmore".into()),
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
        "sdpa_fp8_fwd",
        Some(&gates),
    ));
    assert_eq!(e.status, "compile_error");
    assert_eq!(
        e.note,
        "kernels/sdpa_fp8.cu(12): error: static assertion failed | more"
    );

    let e = rejected(compile_gates(
        &output(true, 168, 8),
        "sdpa_fp8_fwd",
        Some(&gates),
    ));
    assert_eq!(e.status, "ptxas_gate");
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
        compile_gates(&output(true, 96, 0), "sdpa_fp8_fwd", Some(&gates))
    else {
        panic!("a clean compile passes")
    };
    assert_eq!(
        (e.status.as_str(), e.score, e.registers),
        ("ok", None, Some(96))
    );
    assert_eq!(cubin, PathBuf::from("/cache/x.cubin"));
    assert!(matches!(
        compile_gates(&output(true, 250, 9), "sdpa_fp8_fwd", None),
        CompileGate::Passed(..)
    ));
}

#[test]
fn gpu_gates_judge_each_run() {
    let mut r = blank_result("small", &MISSION, 0, 10, 50, "failed");
    r.error = Some("timed out after 60.0 s".into());
    assert!(
        matches!(judge(&r, false), Verdict::Reject("failed", ref w) if w.contains("timed out"))
    );

    let mut r = blank_result("small", &MISSION, 0, 10, 50, "ok");
    r.correctness_pass = Some(false);
    r.max_abs_err = Some(0.5);
    r.nan_count = Some(3);
    assert!(
        matches!(judge(&r, false), Verdict::Reject("incorrect", ref w) if w.contains("max_abs_err 0.500000") && w.contains("non-finite 3"))
    );

    r.correctness_pass = Some(true);
    assert!(matches!(judge(&r, false), Verdict::Pass(None)));
    assert!(matches!(judge(&r, true), Verdict::Reject("failed", _)));
    r.p50_us = Some(12.5);
    assert!(matches!(judge(&r, true), Verdict::Pass(Some(p)) if p == 12.5));
}

#[test]
fn declared_outputs_and_fingerprint_overrides() {
    let (p, _) = options();
    let spec = &p.stages["evo-tune"];
    assert_eq!(
        TuneStage.outputs("evo-tune", spec, &p),
        vec![
            PathBuf::from("artifacts/tune"),
            PathBuf::from(".repro/cubins/tune-top1.cubin"),
            PathBuf::from(".repro/cubins/tune-top2.cubin"),
            PathBuf::from(".repro/cubins/tune-top3.cubin"),
        ]
    );
    assert_eq!(
        TuneStage.optional_outputs("evo-tune", spec, &p),
        TuneStage.outputs("evo-tune", spec, &p)[1..],
        "the elite cubins are optional"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
    std::fs::write(
        dir.path().join("kernels/sdpa_fp8.cu"),
        "#include \"common.cuh\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("kernels/common.cuh"), "\n").unwrap();
    let plain = TuneStage.inputs("evo-tune", spec, &p, dir.path()).unwrap();
    assert!(plain.code.contains(&PathBuf::from("kernels/common.cuh")));
    assert_eq!(plain.params["budget"], "24");
    assert_eq!(plain.params["exhaustive"], "false");
    let overrides = BTreeMap::from([
        ("exhaustive".to_string(), "true".to_string()),
        ("budget".to_string(), "40".to_string()),
    ]);
    let over = TuneStage
        .inputs_with_overrides("evo-tune", spec, &p, dir.path(), &overrides)
        .unwrap();
    assert_eq!(
        (
            over.params["budget"].as_str(),
            over.params["exhaustive"].as_str()
        ),
        ("40", "true")
    );
    let bad = BTreeMap::from([("budget".to_string(), "0".to_string())]);
    let e = TuneStage
        .inputs_with_overrides("evo-tune", spec, &p, dir.path(), &bad)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "--budget 0: expected a positive number of trials"
    );
}

/// `repro exec` stand-in: records its GPU and arguments, prints one bench-result line whose
/// p50 is the cubin's size (so different configurations time differently).
const FAKE_EXEC: &str = r#"#!/bin/sh
echo "gpu=$CUDA_VISIBLE_DEVICES $*" >> "$(dirname "$0")/calls.txt"
cubin=$5
shape=$9
p50=null
case "$*" in *--no-timing*) ;; *) p50=$(stat -c %s "$cubin") ;; esac
printf '{"shape":"%s","B":1,"H":1,"S":32,"D":64,"seed":0,"warmup":10,"iters":50,"status":"ok","p50_us":%s,"max_abs_err":0.001,"correctness_pass":true}\n' "$shape" "$p50"
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
fn sweep(space: &str, budget: u32, elite: u32) -> (crate::tune::space::Space, Settings) {
    let space =
        crate::tune::space::Space::from_yaml(&serde_yaml::from_str(space).unwrap(), None).unwrap();
    let settings = Settings {
        budget,
        population: 6,
        elite,
        seed: 0,
        exhaustive: true,
    };
    (space, settings)
}

fn write_fake_exec(root: &Path, script: &str) -> PathBuf {
    let exe = root.join("fake-repro");
    std::fs::write(&exe, script).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    exe
}

/// The real backend over `k.cu` (GATED_KERNEL) with a `repro exec` stand-in, two GPU slots.
fn fake_backend<'a>(
    executor: &'a dyn crate::executor::Executor,
    cancel: &'a crate::executor::CancelFlag,
    root: &'a Path,
    exe: &'a Path,
    log: &'a Path,
    tc: crate::toolchain::Toolchain,
    one_model: OneGpuModel,
) -> GpuBackend<'a> {
    let shapes = BTreeMap::from([
        (
            "small".to_string(),
            Shape {
                B: 1,
                H: 1,
                S: 32,
                D: 64,
            },
        ),
        ("mission".to_string(), MISSION),
    ]);
    GpuBackend {
        executor,
        cancel,
        root,
        repro_exe: exe,
        pipeline_file: Path::new("pipeline.yaml"),
        log,
        tc,
        arch: "sm_90".into(),
        kernel: KernelSpec {
            source: "k.cu".into(),
            entry: "k".into(),
            flags: vec![],
            precision: None,
        },
        base_defines: BTreeMap::from([("SCALE".to_string(), "3".to_string())]),
        gates: Some(PtxasGates {
            max_registers: Some(60),
            max_smem_bytes: None,
            max_spill_bytes: Some(0),
        }),
        shapes,
        recipes: BTreeMap::new(),
        precision: crate::pipeline::Precision::Fp16Pv,
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
    }
}

/// Trials timed on two GPU models (the stand-in names its model after the GPU it was
/// given) stop the tune with the node → model listing, unless `allow_mixed_gpus`.
#[test]
fn trials_on_two_gpu_models_stop_the_tune_unless_allowed() {
    use crate::executor::local::LocalExecutor;
    use crate::executor::CancelFlag;
    let Some(tc) = crate::stages::build::test_support::real_nvcc(
        "trials_on_two_gpu_models_stop_the_tune_unless_allowed",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("k.cu"), GATED_KERNEL).unwrap();
    let two_models = FAKE_EXEC.replace(
        r#""status":"ok","#,
        // Leaves the script's single-quoted printf format to expand the variable.
        r#""status":"ok","device_name":"Model '"$CUDA_VISIBLE_DEVICES"'","#,
    );
    let exe = write_fake_exec(root, &two_models);
    let log = root.join("tune.log");
    let executor = LocalExecutor::new();
    let cancel = CancelFlag::default();
    let (space, settings) = sweep("{TILE: [1, 2, 4], SCALE: [1, 2]}", 6, 1);
    for allow in [false, true] {
        let mut backend = fake_backend(
            &executor,
            &cancel,
            root,
            &exe,
            &log,
            tc.clone(),
            OneGpuModel::new(allow),
        );
        let mut memo = Memo::in_memory();
        let run = crate::tune::search::run(&space, &settings, &mut backend, &mut memo, &mut |_| {});
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
/// the PTXAS gate rejects the register-hungry configurations, and the `repro exec` children
/// (a script here) run correctness before timing, spread over two GPU slots.
#[test]
fn gpu_backend_compiles_gates_and_spreads_exec_children_over_gpus() {
    use crate::executor::local::LocalExecutor;
    use crate::executor::CancelFlag;
    let Some(tc) = crate::stages::build::test_support::real_nvcc(
        "gpu_backend_compiles_gates_and_spreads_exec_children_over_gpus",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("k.cu"), GATED_KERNEL).unwrap();
    let exe = write_fake_exec(root, FAKE_EXEC);
    let log = root.join("tune.log");
    let executor = LocalExecutor::new();
    let cancel = CancelFlag::default();
    let mut backend = fake_backend(
        &executor,
        &cancel,
        root,
        &exe,
        &log,
        tc,
        OneGpuModel::new(false),
    );
    let (space, settings) = sweep("{TILE: [1, 2, 3, 4, 8, 16], SCALE: [1, 2]}", 100, 3);
    let outcome = crate::tune::search::run(
        &space,
        &settings,
        &mut backend,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();
    let status = |tile: i64| -> Vec<String> {
        outcome
            .trials
            .iter()
            .filter(|t| t.candidate.config["TILE"] == tile)
            .map(|t| t.evaluation.status.clone())
            .collect()
    };
    assert_eq!(status(1), ["ok", "ok"]);
    assert_eq!(status(4), ["ok", "ok"]);
    assert_eq!(status(3), ["compile_error", "compile_error"]);
    assert_eq!(status(16), ["ptxas_gate", "ptxas_gate"]);
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
        .filter(|t| t.evaluation.status == "ok")
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
        calls.iter().filter(|c| c.contains("--no-timing")).count(),
        2 * ok.len()
    );
    assert!(calls
        .iter()
        .all(|c| c.contains(" --entry k ") && c.contains("-f pipeline.yaml exec --cubin ")));

    let elite: Vec<Config> = outcome
        .elite
        .iter()
        .map(|&i| outcome.trials[i].candidate.config.clone())
        .collect();
    let cubins = backend.cubins(&elite).unwrap();
    assert_eq!(cubins.len(), 3);
    assert!(cubins.iter().all(|c| c.is_file()));
}

#[test]
fn the_memo_is_shared_by_gpus_of_one_model() {
    let gpu = |index: u32, name: &str| crate::gpu::GpuInfo {
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
