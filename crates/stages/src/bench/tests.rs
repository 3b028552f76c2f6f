//! The bench stage without a GPU: options, the job plan, speedups and gates, on made-up
//! records and on results recorded on an H100.

use super::gates::*;
use super::jobs::plan;
use super::options::*;
use super::records::read_baseline;
use super::*;
use repro_gpu::timing::L2Mode;
use repro_gpu::timing::Method;
use repro_pipeline::workload::accuracy::Accuracy;
use repro_pipeline::workload::compare::judge;
use repro_pipeline::workload::testing::attention;
use repro_pipeline::workload::testing::tiny_pipeline;
use repro_pipeline::workload::Declaration;
use repro_schema::to_json_pretty;
use std::time::Duration;

const REST: &str = r#"kernels:
  k: {source: kernels/k.cu, entry: k_fwd}
variants:
  ctrl: {kernel: k}
  fast: {kernel: k, defines: {X: 1}}
  faster-but-wrong: {kernel: k, defines: {X: 2}}
control: ctrl
gates:
  performance: {min_speedup_vs_control: 1.10, min_speedup_vs_baseline: {torch-best: 1.0}}
stages:
  bench: {uses: bench, warmup: 5, iters: 50, shapes: [mission], l2: flush, timeout: 30s}
"#;

fn pipeline() -> Pipeline {
    tiny_pipeline(REST, &["k"])
}

/// The `tiny` workload of [`pipeline`].
fn tiny() -> Declaration {
    pipeline().workloads["tiny"].clone()
}

/// A recorded-style result: `p50` µs, correct or not.
fn rec(shape: &str, seed: u64, p50: f64, max_err: f64) -> BenchResult {
    let dims = BTreeMap::from([("n".to_string(), 4096)]);
    let mut r = BenchResult::blank(shape, dims, seed, (20, 100), RunStatus::Ok);
    r.p50_us = Some(p50);
    r.max_abs_err = Some(max_err);
    r.mean_abs_err = Some(max_err / 10.0);
    r.pct_bad = Some(if max_err > 0.06 { 5.0 } else { 0.0 });
    r.nan_count = Some(0);
    r.inf_count = Some(0);
    r.correctness_pass = Some(max_err <= 0.06);
    r
}

#[test]
fn options_parse_and_reject_unknown_keys() {
    let p = pipeline();
    let o = options(&p.stages["bench"], &p).unwrap();
    assert_eq!((o.warmup, o.iters, o.l2), (5, 50, L2Mode::Flush));
    assert_eq!(o.shapes_of(&tiny()), ["mission"]);
    assert_eq!(o.timeout, Duration::from_secs(30));
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("itres".into(), 3.into());
    let err = options(&spec, &p).unwrap_err();
    assert_eq!(err.path, vec!["itres"]);
    assert!(
        err.message.ends_with("help: did you mean `iters`?"),
        "{}",
        err.message
    );
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("iters".into(), 0.into());
    assert_eq!(options(&spec, &p).unwrap_err().path, vec!["iters"]);
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("warmup".into(), (-1).into());
    assert_eq!(options(&spec, &p).unwrap_err().path, vec!["warmup"]);
    let mut spec = (*p.stages["bench"]).clone();
    spec.timeout = Some(serde_yaml::Value::from("2 weeks").into());
    assert_eq!(options(&spec, &p).unwrap_err().path, vec!["timeout"]);
    let mut spec = (*p.stages["bench"]).clone();
    spec.options
        .insert("shapes".into(), serde_yaml::from_str("[huge]").unwrap());
    assert!(options(&spec, &p)
        .unwrap_err()
        .message
        .contains("no workload has a shape `huge`"));
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("l2".into(), "cold".into());
    assert_eq!(options(&spec, &p).unwrap_err().path, vec!["l2"]);
    assert_eq!(
        o.method,
        Method::Isolated,
        "the ncu-comparable method by default"
    );
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("method".into(), "graph".into());
    assert_eq!(options(&spec, &p).unwrap().method, Method::Graph);
    spec.options.insert("method".into(), "cuda_graph".into());
    assert_eq!(options(&spec, &p).unwrap_err().path, vec!["method"]);
    assert!(!o.allow_mixed_gpus, "one GPU model per result by default");
    let mut spec = (*p.stages["bench"]).clone();
    spec.options.insert("allow_mixed_gpus".into(), true.into());
    assert!(options(&spec, &p).unwrap().allow_mixed_gpus);
    spec.options
        .insert("allow_mixed_gpus".into(), "sure".into());
    assert_eq!(
        options(&spec, &p).unwrap_err().path,
        vec!["allow_mixed_gpus"]
    );
}

#[test]
fn plan_covers_variant_shape_seed() {
    let p = pipeline();
    let o = options(&p.stages["bench"], &p).unwrap();
    let variants: Vec<&String> = p.variants.keys().collect();
    let jobs = plan(&Workloads::of(&p), &p, &variants, &o);
    assert_eq!(jobs.len(), 3 * 2);
    let first = &jobs[0];
    assert_eq!(
        (first.variant.as_str(), first.shape.as_str(), first.seed),
        ("ctrl", "mission", 0)
    );
    assert_eq!((first.workload.as_str(), first.dims["n"]), ("tiny", 4096));
    assert_eq!((first.inputs.as_str(), first.timed), ("default", true));
}

#[test]
fn every_recipe_of_a_shape_is_checked_and_only_the_first_timed() {
    let mut p = pipeline();
    let w = p.workloads.get_mut("tiny").unwrap();
    for r in ["gaussian", "sink", "sharp"] {
        w.recipes
            .insert(r.into(), serde_yaml::from_str("{}").unwrap());
    }
    w.inputs = BTreeMap::from([(
        "mission".to_string(),
        vec!["gaussian".into(), "sink".into(), "sharp".into()],
    )]);
    let o = options(&p.stages["bench"], &p).unwrap();
    let ctrl = "ctrl".to_string();
    let jobs = plan(&Workloads::of(&p), &p, &[&ctrl], &o);
    let seen: Vec<(&str, u64, bool)> = jobs
        .iter()
        .map(|j| (j.inputs.as_str(), j.seed, j.timed))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("gaussian", 0, true),
            ("gaussian", 1, true),
            ("sink", 0, false),
            ("sink", 1, false),
            ("sharp", 0, false),
            ("sharp", 1, false),
        ]
    );
}

#[test]
fn an_incorrect_untimed_recipe_voids_a_variants_time_but_not_a_baselines() {
    let mut sink = rec("mission", 0, 10.0, 0.01);
    sink.inputs = "sink".into();
    sink.p50_us = None;
    sink.correctness_pass = Some(false);
    let rs = vec![rec("mission", 0, 10.0, 0.01), sink];
    assert_eq!(primary_time(&rs, "mission"), None);
    assert_eq!(baseline_primary_time(&rs, "mission"), Some(10.0));
    let g = correctness_gates(&rs, &tiny(), None);
    assert!(g.iter().any(|x| x.subject == "mission/sink/seed0"));
}

#[test]
fn speedups_match_shape_and_seed_and_say_na_when_missing() {
    let mut mine = vec![rec("mission", 0, 10.0, 0.01), rec("mission", 1, 10.0, 0.01)];
    let base = vec![rec("mission", 0, 15.0, 0.01)];
    attach_speedup(&mut mine, "speedup_vs_torch", Some(&base));
    assert_eq!(mine[0].speedups["speedup_vs_torch"], Some(1.5));
    assert_eq!(mine[1].speedups["speedup_vs_torch"], None);
    attach_speedup(&mut mine, "speedup_vs_gone", None);
    assert_eq!(mine[0].speedups["speedup_vs_gone"], None);
    let json = serde_json::to_value(&mine[0]).unwrap();
    assert_eq!(json["speedup_vs_torch"], 1.5);
    assert!(json["speedup_vs_gone"].is_null());
}

#[test]
fn correctness_gates_fail_on_errors_nan_and_crashes() {
    let g = tiny();
    let ok = correctness_gates(&[rec("mission", 0, 10.0, 0.01)], &g, None);
    assert!(ok.iter().all(|x| x.pass));
    let planted = correctness_gates(&[rec("mission", 1, 10.0, 0.25)], &g, None);
    assert!(planted
        .iter()
        .any(|x| x.gate == "correctness.max_abs_err" && !x.pass));
    assert_eq!(planted[0].subject, "mission/seed1");
    let mut nan = rec("mission", 0, 10.0, 0.0);
    nan.nan_count = Some(3);
    assert!(correctness_gates(&[nan], &g, None)
        .iter()
        .any(|x| x.gate == "correctness.nonfinite" && !x.pass));
    let mut crashed = rec("mission", 0, 10.0, 0.0);
    crashed.status = RunStatus::Failed;
    let c = correctness_gates(&[crashed], &g, None);
    assert_eq!(
        (c.len(), c[0].gate.as_str(), c[0].pass),
        (1, "correctness.completed", false)
    );
    // An output never written: the record's error (placed in pipeline.yaml) is the gate's.
    let mut unwritten = rec("mission", 0, 10.0, 0.0);
    unwritten.correctness_pass = Some(false);
    unwritten.error = Some("pipeline.yaml:12:9: error: output `y` is never written".into());
    let c = correctness_gates(&[unwritten], &g, None);
    let written = c.iter().find(|x| x.gate == "correctness.written").unwrap();
    assert!(!written.pass);
    assert_eq!(
        written.detail.as_deref(),
        Some("pipeline.yaml:12:9: error: output `y` is never written")
    );
}

/// The run (`repro exec`, `workload::compare::judge`) and the stage judge a figure by one
/// rule, on the record as the worker sends it (JSON): NaN, +inf and -inf fail both with
/// the reason, and a figure exactly at its threshold passes both.
#[test]
fn the_run_and_the_stage_give_one_verdict_on_a_figure() {
    let decl = tiny();
    for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.02] {
        let accuracy = Accuracy {
            max_abs_err: 0.01,
            mean_abs_err: x,
            pct_bad: 0.0,
            rel_l2_err: 0.0,
            max_err_over_ref_std: 0.0,
            nan_count: 0,
            inf_count: 0,
        };
        let run = judge("y", accuracy, &decl.gates["y"], None, true);
        let mut r = rec("mission", 0, 10.0, 0.01);
        r.mean_abs_err = Some(x);
        r.correctness_pass = Some(run.pass());
        let sent: BenchResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        let stage = correctness_gates(&[sent], &decl, None);
        let failed: Vec<&GateResult> = stage.iter().filter(|g| !g.pass).collect();
        if x.is_finite() {
            assert!(run.pass() && failed.is_empty(), "{run:?} {failed:?}");
            continue;
        }
        let reason =
            |name: &str| format!("{name} is {x}: not a finite number, so it passes no limit");
        assert_eq!(run.failed, [reason("mean_abs_err")]);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].gate, "correctness.mean_abs_err");
        assert_eq!(failed[0].detail, Some(reason("correctness.mean_abs_err")));
        // And the gate as recorded reads back with its figure and verdict.
        let text = serde_json::to_string(failed[0]).unwrap();
        let recorded: GateResult = serde_json::from_str(&text).unwrap();
        assert!(!recorded.pass && !recorded.measured.is_finite(), "{text}");
        assert_eq!(recorded.measured.to_string(), x.to_string());
    }
}

#[test]
fn thresholds_follow_the_recipe_and_the_precision_class() {
    // The attention declaration: absolute gates off for `sink`, normalized ones per class.
    let decl = attention();
    let mut r = rec("mission", 0, 10.0, 0.5);
    r.inputs = "sink".into();
    r.rel_l2_err = Some(0.05);
    r.max_err_over_ref_std = Some(0.5);
    let gates = |r: &BenchResult, class| {
        correctness_gates(std::slice::from_ref(r), &decl, Some(class))
            .into_iter()
            .filter(|g| !g.pass)
            .map(|g| g.gate)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        gates(&r, "fp16-pv"),
        [
            "correctness.max_err_over_ref_std",
            "correctness.max_rel_l2_err"
        ]
    );
    assert_eq!(gates(&r, "fp8-pv"), Vec::<String>::new());
    r.inputs = "gaussian".into();
    assert_eq!(
        gates(&r, "fp8-pv"),
        [
            "correctness.max_abs_err",
            "correctness.mean_abs_err",
            "correctness.max_pct_bad"
        ]
    );
    // Several outputs: each is gated against its own thresholds.
    let mut two = rec("mission", 0, 10.0, 0.01);
    two.outputs = BTreeMap::from([
        (
            "y".to_string(),
            repro_schema::OutputAccuracy {
                max_abs_err: 0.01,
                correctness_pass: true,
                ..Default::default()
            },
        ),
        (
            "z".to_string(),
            repro_schema::OutputAccuracy {
                max_abs_err: 0.5,
                ..Default::default()
            },
        ),
    ]);
    let mut decl = tiny();
    decl.gates.insert("z".into(), decl.gates["y"].clone());
    let g = correctness_gates(&[two], &decl, None);
    let failed: Vec<&str> = g
        .iter()
        .filter(|g| !g.pass)
        .map(|g| g.subject.as_str())
        .collect();
    assert_eq!(failed, ["mission/seed0 z"]);
}

fn variants(ctrl: f64, fast: f64, wrong: f64) -> BTreeMap<String, Vec<BenchResult>> {
    BTreeMap::from([
        (
            "ctrl".into(),
            vec![rec("mission", 0, ctrl, 0.01), rec("mission", 1, ctrl, 0.01)],
        ),
        (
            "fast".into(),
            vec![
                rec("mission", 0, fast, 0.01),
                rec("mission", 1, fast + 0.2, 0.01),
            ],
        ),
        (
            "faster-but-wrong".into(),
            vec![rec("mission", 0, wrong, 0.3), rec("mission", 1, wrong, 0.3)],
        ),
    ])
}

#[test]
fn performance_gate_uses_the_best_correct_variant() {
    let p = pipeline();
    let gates = performance_gates(&variants(12.0, 10.0, 1.0), Some("ctrl"), "mission", &p, &[]);
    assert_eq!(
        gates.len(),
        1,
        "the baseline gate is n/a without the baseline"
    );
    let (owner, g) = &gates[0];
    assert_eq!(owner, "fast");
    assert_eq!(g.subject, "fast vs ctrl on mission");
    assert!((g.measured - 12.0 / 10.1).abs() < 1e-12, "{}", g.measured);
    assert!(g.pass);
    let slow = performance_gates(&variants(10.5, 10.0, 1.0), Some("ctrl"), "mission", &p, &[]);
    assert!(!slow[0].1.pass);
}

#[test]
fn baseline_gate_and_missing_control() {
    let p = pipeline();
    let base = BenchFile {
        name: "torch-best".into(),
        kind: "baseline".into(),
        workload: Some("tiny".into()),
        status: RunStatus::Ok,
        reason: None,
        defines: BTreeMap::new(),
        nvcc_version: None,
        precision: None,
        arch: None,
        driver: None,
        results: vec![
            rec("mission", 0, 20.0, 0.001),
            rec("mission", 1, 20.0, 0.001),
        ],
        gates: vec![],
        measured: None,
    };
    let gates = performance_gates(
        &variants(12.0, 10.0, 1.0),
        Some("ctrl"),
        "mission",
        &p,
        &[("torch-best".into(), Some(base))],
    );
    let b = &gates[1].1;
    assert_eq!(b.gate, "performance.min_speedup_vs_torch-best");
    assert!((b.measured - 20.0 / 10.1).abs() < 1e-12);
    let mut v = variants(12.0, 10.0, 1.0);
    v.get_mut("ctrl").unwrap()[0].status = RunStatus::Failed;
    let g = performance_gates(&v, Some("ctrl"), "mission", &p, &[]);
    assert!(!g[0].1.pass);
    assert!(g[0]
        .1
        .subject
        .contains("control ctrl has no correct mission result"));
}

#[test]
fn a_baseline_timed_by_another_method_is_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(BASELINE_DIR)).unwrap();
    // The recorded baseline was timed with CUDA graphs.
    let recorded = include_str!("../../../../tests/fixtures/bench/torch-attention-best.json");
    let path = dir.path().join(BASELINE_DIR).join("torch-best.json");
    std::fs::write(&path, recorded).unwrap();
    let root = dir.path();
    assert!(read_baseline(root, "torch-best", "graph").is_ok());
    let why = read_baseline(root, "torch-best", "isolated").unwrap_err();
    assert!(
        why.contains("timed by the graph method and the variants by the isolated method"),
        "{why}"
    );
    let isolated = recorded.replace("\"cuda_graph\"", "\"isolated\"");
    std::fs::write(&path, isolated).unwrap();
    assert!(read_baseline(root, "torch-best", "isolated").is_ok());
    let skipped = r#"{"name": "torch-best", "kind": "baseline", "status": "skipped",
        "reason": "PyTorch is not installed", "results": [], "gates": []}"#;
    std::fs::write(&path, skipped).unwrap();
    let why = read_baseline(root, "torch-best", "isolated").unwrap_err();
    assert_eq!(why, "it was skipped (PyTorch is not installed)");
    assert!(read_baseline(root, "torch-default", "isolated")
        .unwrap_err()
        .starts_with("cannot read"));
}

#[test]
fn bench_files_round_trip_through_json() {
    let mut r = rec("mission", 0, 10.0, 0.01);
    r.speedups
        .insert("speedup_vs_torch-default".into(), Some(2.0));
    r.speedups.insert("speedup_vs_torch-best".into(), None);
    let file = BenchFile {
        name: "fast".into(),
        kind: "variant".into(),
        workload: Some("tiny".into()),
        status: RunStatus::Ok,
        reason: None,
        defines: BTreeMap::from([("X".into(), "1".into())]),
        nvcc_version: None,
        precision: Some("fp16-pv".into()),
        arch: Some("sm_90a".into()),
        driver: Some(repro_schema::DriverCheck {
            check: "ok".into(),
            registers: Some(96),
            static_smem_bytes: Some(0),
        }),
        results: vec![r],
        gates: correctness_gates(&[rec("mission", 0, 10.0, 0.01)], &tiny(), None),
        measured: None,
    };
    let text = to_json_pretty(&file);
    let back: BenchFile = serde_json::from_str(&text).unwrap();
    assert_eq!(back, file);
}

/// Results recorded on an H100 (docs/PERFORMANCE.md): `repro exec` lines for three
/// variants × small/mission/long × seeds 0-2, and the baseline script's output.
#[test]
fn gates_and_speedups_on_results_recorded_on_an_h100() {
    let records: Vec<BenchResult> =
        include_str!("../../../../tests/fixtures/bench/h100-exec.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(records.len(), 27);
    let names = ["stage2-baseline", "stage5-ws-p1", "stage5-ws-p2"];
    let mut by_variant: BTreeMap<String, Vec<BenchResult>> = names
        .iter()
        .zip(records.chunks(9))
        .map(|(n, rs)| (n.to_string(), rs.to_vec()))
        .collect();
    let best: BenchFile = serde_json::from_str(include_str!(
        "../../../../tests/fixtures/bench/torch-attention-best.json"
    ))
    .unwrap();
    assert_eq!(best.defines["backend"], "cudnn");
    assert_eq!(records[0].dims["S"], 32, "B H S D read into the dimensions");
    let decl = attention();
    for rs in by_variant.values_mut() {
        attach_speedup(rs, "speedup_vs_torch-best", Some(&best.results));
        let g = correctness_gates(rs, &decl, Some("fp16-pv"));
        assert!(g.iter().all(|x| x.pass), "{g:?}");
    }
    let ws1_mission0 = &by_variant["stage5-ws-p1"][3];
    assert_eq!(
        (ws1_mission0.shape.as_str(), ws1_mission0.seed),
        ("mission", 0)
    );
    let s = ws1_mission0.speedups["speedup_vs_torch-best"].unwrap();
    assert!((s - 9.3293 / 21.296).abs() < 1e-3, "{s}");

    let p = pipeline();
    let gates = performance_gates(
        &by_variant,
        Some("stage2-baseline"),
        "mission",
        &p,
        &[("torch-best".into(), Some(best))],
    );
    let (owner, control_gate) = &gates[0];
    assert_eq!(owner, "stage5-ws-p1");
    assert!(
        (control_gate.measured - 23.5838 / 21.2856).abs() < 1e-3,
        "{}",
        control_gate.measured
    );
    assert!(control_gate.pass, "1.108× >= 1.10×");
    let (_, baseline_gate) = &gates[1];
    assert!(
        !baseline_gate.pass,
        "cuDNN is faster: {}",
        baseline_gate.measured
    );
}
