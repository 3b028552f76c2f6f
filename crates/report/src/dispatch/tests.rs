//! The table of a small workload (`tiny`: shapes `small` and `mission`, seeds 0 and 1, one
//! recipe) from records written here: who is eligible per shape, elites, ncu's shapes and GPUs.

use super::*;
use crate::artifacts::TuneData;
use repro_pipeline::kind::Config;
use repro_pipeline::workload::testing::tiny_pipeline;
use repro_schema::{
    BenchFile, BenchResult, CandidateKind, EliteEntry, Measured, NcuSummary, RunStatus,
};
use repro_tune::options::TuneOptions;

const H100: &str = "NVIDIA H100 80GB HBM3";

const REST: &str = "kernels:\n  k: {source: kernels/k.cu, entry: k_fwd, flags: [-lineinfo]}\n\
variants:\n  fast: {kernel: k, defines: {TILE: 64, FAST: true}}\n  slow: {kernel: k, defines: {TILE: 32}}\n\
stages:\n  evo-tune: {uses: tune, base: fast, budget: 4, space: {TILE: [16, 128]}}\n";

fn project() -> (Pipeline, Configs) {
    let pipeline = tiny_pipeline(REST, &["k"]);
    let tune = TuneOptions::parse(&pipeline.stages["evo-tune"], &pipeline).unwrap();
    let configs = Configs::new(vec![("evo-tune".into(), Config::new(tune))]);
    (pipeline, configs)
}

/// A correct record of `shape`, seed `seed`, on the H100, timed at `p50` ± 0.1 when given.
fn run(shape: &str, seed: u64, p50: Option<f64>) -> BenchResult {
    let mut r = BenchResult::blank(shape, BTreeMap::new(), seed, (1, 1), RunStatus::Ok);
    r.inputs = "default".into();
    (r.p50_us, r.ci95_us) = (p50, p50.map(|_| 0.1));
    r.correctness_pass = Some(true);
    r.device_name = Some(H100.into());
    r
}

/// `name`'s bench file: both seeds of `small` at `small` µs and of `mission` at `mission`.
fn bench(name: &str, small: f64, mission: f64) -> BenchFile {
    let results = [0, 1]
        .into_iter()
        .flat_map(|s| {
            [
                run("small", s, Some(small)),
                run("mission", s, Some(mission)),
            ]
        })
        .collect();
    serde_json::from_value::<BenchFile>(serde_json::json!({
        "name": name, "kind": "variant", "status": "ok", "results": [], "gates": [],
    }))
    .map(|f| BenchFile { results, ..f })
    .unwrap()
}

/// ncu's profile of `variant` on `shape` (`None`: the primary) at `us`, on `gpu`.
fn profile(variant: &str, shape: Option<&str>, us: f64, gpu: Option<&str>) -> NcuTarget {
    let mut t: NcuTarget = serde_json::from_value(serde_json::json!({
        "target": variant, "variant": variant, "kernel": "k_fwd", "status": "ok",
        "sm_util_pct": null, "tensor_core_util_pct": null, "achieved_occupancy_pct": null,
        "registers_per_thread": null, "l2_hit_rate_pct": null, "dram_bw_pct_peak": null,
        "kernel_time_us": us, "metric_names": {}, "raw": {}, "top_stalls": [],
    }))
    .unwrap();
    t.shape = shape.map(str::to_string);
    (t.kernel_time_us_min, t.kernel_time_us_max, t.launches) =
        (Some(us - 0.05), Some(us + 0.05), Some(5));
    t.measured = gpu.map(|g| Measured {
        run: "2026-11-28T04:51:06Z".into(),
        commit: None,
        key: BTreeMap::from([("gpu".to_string(), format!("{g} sm_90"))]),
        reused: false,
    });
    t
}

fn artifacts(benches: Vec<BenchFile>, targets: Vec<NcuTarget>) -> Artifacts {
    Artifacts {
        benches: Some(benches),
        ncu: Some(NcuSummary {
            ncu_version: None,
            clock_control: "none".into(),
            cache_control: "none".into(),
            targets,
            gates: Vec::new(),
        }),
        ..Artifacts::default()
    }
}

fn tiny(a: &Artifacts) -> DispatchTable {
    let (pipeline, configs) = project();
    let mut file = table(&pipeline, &configs, a);
    assert_eq!(file.workloads.len(), 1);
    file.workloads.remove(0)
}

fn shape<'t>(t: &'t DispatchTable, name: &str) -> &'t ShapeDispatch {
    t.shapes.iter().find(|s| s.shape == name).unwrap()
}

#[test]
fn each_shape_has_its_own_best_with_the_call_that_runs_it() {
    let a = artifacts(
        vec![bench("fast", 2.0, 12.0), bench("slow", 3.0, 10.0)],
        vec![],
    );
    let t = tiny(&a);
    assert_eq!(t.gpu.as_deref(), Some(H100));
    assert_eq!(t.launch.grid, ["(n + 255) / 256"]);
    let small = shape(&t, "small").harness.as_ref().unwrap();
    assert_eq!(
        (small.best.name.as_str(), small.best.us, small.best.count),
        ("fast", 2.0, 2)
    );
    assert!((small.margin_pct.unwrap() - 50.0).abs() < 1e-9);
    assert!(!small.overlap);
    let mission = shape(&t, "mission");
    assert_eq!(mission.harness.as_ref().unwrap().best.name, "slow");
    assert_eq!(mission.dims["n"], 4096);
    let fast = &t.kernels["fast"];
    assert_eq!(fast.kind, CandidateKind::Variant);
    assert_eq!(
        (fast.source.as_str(), fast.entry.as_str()),
        ("kernels/k.cu", "k_fwd")
    );
    assert_eq!(fast.defines["FAST"], "1", "as it goes after -DFAST=");
    assert_eq!(fast.flags, ["-lineinfo"]);
}

#[test]
fn a_variant_incorrect_on_a_shape_is_not_eligible_there_however_fast() {
    let mut fast = bench("fast", 2.0, 8.0);
    // Seed 1 of mission fails correctness: fast is out on mission, still in on small.
    let bad = fast
        .results
        .iter_mut()
        .find(|r| r.shape == "mission" && r.seed == 1)
        .unwrap();
    bad.correctness_pass = Some(false);
    let t = tiny(&artifacts(vec![fast, bench("slow", 3.0, 10.0)], vec![]));
    let mission = shape(&t, "mission");
    let ranked = mission.harness.as_ref().unwrap();
    assert_eq!((ranked.best.name.as_str(), ranked.ranked), ("slow", 1));
    assert_eq!(ranked.runner_up, None);
    assert_eq!(mission.ineligible.len(), 1);
    assert_eq!(mission.ineligible[0].name, "fast");
    assert_eq!(
        mission.ineligible[0].reason,
        "correctness failed on mission/default/seed1"
    );
    assert_eq!(
        shape(&t, "small").harness.as_ref().unwrap().best.name,
        "fast"
    );
    assert!(shape(&t, "small").ineligible.is_empty());
}

#[test]
fn a_margin_within_the_spread_is_a_tie() {
    // 10.0 ± 0.1 against 10.15 ± 0.1: 1.5 % apart, the intervals overlap.
    let t = tiny(&artifacts(
        vec![bench("fast", 2.0, 10.0), bench("slow", 3.0, 10.15)],
        vec![],
    ));
    let mission = shape(&t, "mission").harness.as_ref().unwrap();
    assert_eq!(mission.best.name, "fast");
    assert!(mission.overlap);
    assert!((mission.margin_pct.unwrap() - 1.5).abs() < 1e-9);
}

#[test]
fn ncu_ranks_only_the_shapes_it_measured_and_agrees_only_when_it_measured_the_harness_best() {
    let benches = vec![bench("fast", 2.0, 8.0), bench("slow", 3.0, 10.0)];
    // The primary (a profile from before `shape` was recorded): both; small: only slow.
    let targets = vec![
        profile("fast", None, 7.9, Some(H100)),
        profile("slow", Some("mission"), 9.5, Some(H100)),
        profile("slow", Some("small"), 2.9, Some(H100)),
    ];
    let t = tiny(&artifacts(benches, targets));
    let mission = shape(&t, "mission");
    let ncu = mission.ncu.as_ref().unwrap();
    assert_eq!(
        (ncu.best.name.as_str(), ncu.ranked, ncu.best.count),
        ("fast", 2, 5)
    );
    assert_eq!(mission.agree, Some(true));
    let small = shape(&t, "small");
    assert_eq!(small.ncu.as_ref().unwrap().best.name, "slow");
    assert_eq!(
        small.agree, None,
        "ncu did not profile fast, the harness's best, on small"
    );

    // ncu profiled the harness's best alone: it confirms nothing.
    let alone = vec![profile("fast", None, 7.9, Some(H100))];
    let t = tiny(&artifacts(
        vec![bench("fast", 2.0, 8.0), bench("slow", 3.0, 10.0)],
        alone,
    ));
    let mission = shape(&t, "mission");
    assert_eq!(mission.ncu.as_ref().unwrap().best.name, "fast");
    assert_eq!(mission.agree, None);
}

#[test]
fn a_profile_from_another_gpu_or_none_recorded_does_not_count() {
    let benches = vec![bench("fast", 2.0, 8.0), bench("slow", 3.0, 10.0)];
    let targets = vec![
        profile("fast", Some("mission"), 7.9, Some("NVIDIA L4")),
        profile("slow", Some("mission"), 9.5, None),
    ];
    let t = tiny(&artifacts(benches, targets));
    let mission = shape(&t, "mission");
    assert_eq!(mission.ncu, None);
    assert_eq!(mission.agree, None);
    let reasons: Vec<(&str, &str)> = mission
        .not_counted
        .iter()
        .map(|e| (e.name.as_str(), e.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "fast",
                "ncu profiled it on NVIDIA L4 sm_90, not NVIDIA H100 80GB HBM3"
            ),
            ("slow", "its ncu profile does not record the GPU"),
        ]
    );
}

#[test]
fn harness_records_from_another_gpu_leave_their_kernel_out() {
    let mut slow = bench("slow", 1.0, 10.0);
    for r in slow.results.iter_mut().filter(|r| r.shape == "small") {
        r.device_name = Some("NVIDIA L4".into());
    }
    let t = tiny(&artifacts(vec![bench("fast", 2.0, 8.0), slow], vec![]));
    assert_eq!(t.gpu.as_deref(), Some(H100), "the model most records name");
    let small = shape(&t, "small");
    assert_eq!(small.harness.as_ref().unwrap().best.name, "fast");
    assert_eq!(small.ineligible[0].name, "slow");
    assert_eq!(
        small.ineligible[0].reason,
        format!("small/default/seed0 was measured on NVIDIA L4, not {H100}")
    );
    assert_eq!(shape(&t, "mission").harness.as_ref().unwrap().ranked, 2);
}

#[test]
fn a_tuned_configuration_competes_on_the_shapes_its_tune_timed() {
    let mut a = artifacts(
        vec![bench("fast", 2.0, 8.0), bench("slow", 3.0, 10.0)],
        vec![],
    );
    // Correct on every shape and seed; timed on the primary only, as a tune stage times.
    let mut records = vec![run("mission", 0, Some(6.0))];
    for s in [0, 1] {
        records.extend([run("small", s, None), run("mission", s, None)]);
    }
    let elite = EliteEntry {
        rank: 1,
        trial: 7,
        config: BTreeMap::from([("TILE".to_string(), 128)]),
        parents: vec![],
        p50_us: 6.0,
        nvcc_version: None,
        source: None,
        diff: None,
        lineage: vec![],
        bench: records,
    };
    a.tunes.insert(
        "artifacts/tune".into(),
        TuneData {
            trials: vec![],
            elite: vec![elite],
            diffs: BTreeMap::new(),
        },
    );
    let t = tiny(&a);
    let mission = shape(&t, "mission").harness.as_ref().unwrap();
    assert_eq!(
        (mission.best.name.as_str(), mission.best.count),
        ("tune-top1", 1)
    );
    assert_eq!(mission.runner_up.as_ref().unwrap().name, "fast");
    // Not timed on small: eligible, but not ranked, and not ruled out.
    let small = shape(&t, "small");
    assert_eq!(small.harness.as_ref().unwrap().ranked, 2);
    assert!(small.ineligible.is_empty());
    let tuned = &t.kernels["tune-top1"];
    assert_eq!(tuned.kind, CandidateKind::Tuned);
    assert_eq!(
        tuned.defines["TILE"], "128",
        "its configuration over the base's"
    );
    assert_eq!(tuned.defines["FAST"], "1", "the base variant's, kept");
    let origin = tuned.tune.as_ref().unwrap();
    assert_eq!(
        (origin.stage.as_str(), origin.rank, origin.trial),
        ("evo-tune", 1, 7)
    );
}

#[test]
fn nothing_measured_names_no_gpu_and_ranks_nothing() {
    let t = tiny(&Artifacts::default());
    assert_eq!(t.gpu, None);
    assert!(t.kernels.is_empty());
    assert!(t
        .shapes
        .iter()
        .all(|s| s.harness.is_none() && s.ncu.is_none() && s.agree.is_none()));
    let json = repro_schema::to_json_pretty(&DispatchFile { workloads: vec![t] });
    let back: DispatchFile = serde_json::from_str(&json).unwrap();
    assert_eq!(back.workloads[0].shapes.len(), 2);
}
