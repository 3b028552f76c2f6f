//! Which targets a stage profiles: the variants, the tune's elite, the baselines.

use super::*;
use crate::profile::targets::elite_targets;

#[test]
fn topk_without_tune_results_is_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline("{uses: profile, needs: [tune], targets: [control, topk]}");
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    let spec = &p.stages["prof"];
    let (run, skipped) = resolve(&opts, spec, &p, dir.path());
    assert_eq!(run.len(), 1);
    assert_eq!(run[0].variant, "base");
    assert_eq!(run[0].entry, "k_fwd");
    assert_eq!(
        (run[0].workload.as_str(), run[0].shape.as_str()),
        ("tiny", "mission")
    );
    assert_eq!(skipped[0].status, RunStatus::Skipped);
    assert!(skipped[0]
        .reason
        .as_ref()
        .unwrap()
        .contains("run the tune stage"));

    std::fs::create_dir_all(dir.path().join("artifacts/tune")).unwrap();
    std::fs::create_dir_all(dir.path().join(".repro/cubins")).unwrap();
    std::fs::write(
        dir.path().join("artifacts/tune/topk.json"),
        r#"[{"rank": 1, "config": {"X": 2}}, {"rank": 2}]"#,
    )
    .unwrap();
    std::fs::write(dir.path().join(".repro/cubins/tune-top1.cubin"), "").unwrap();
    let (run, skipped) = resolve(&opts, spec, &p, dir.path());
    assert_eq!(
        run.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(),
        ["control", "top1"]
    );
    assert_eq!(skipped[0].target, "top2");
    assert!(skipped[0]
        .reason
        .as_ref()
        .unwrap()
        .contains("tune-top2.cubin is missing"));
    // The elite's launch reads the defines it was tuned with.
    assert_eq!(
        run[1].program,
        Program::Cubin {
            path: dir.path().join(".repro/cubins/tune-top1.cubin"),
            defines: [("X".to_string(), 2)].into(),
            rank: 1,
        }
    );
    // A profile stage that needs no tune stage has no elite to profile.
    let p = pipeline("{uses: profile, targets: [topk]}");
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    assert!(run.is_empty());
    assert!(skipped[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("needs no tune stage"));
}
#[test]
fn bad_baselines_name_their_key() {
    let e = options(&with_baseline("[mission, long]")).unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "shapes", "1"]);
    assert!(
        e.message
            .contains("unknown shape `long` of workload `tiny`")
            && e.message.contains("small, mission"),
        "{}",
        e.message
    );
    let e = options(&with_baseline("[]")).unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "shapes"]);
    let e = options(
        "{uses: profile, baselines: {torch: {run: [], workload: tiny, shapes: [mission]}}}",
    )
    .unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "run"]);
    let e = options(
        "{uses: profile, baselines: {torch: {run: [x], workload: nope, shapes: [mission]}}}",
    )
    .unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "workload"]);
    assert!(e.message.contains("expected one of: tiny"), "{}", e.message);
    let e =
        options("{uses: profile, baselines: {a@b: {run: [x], workload: tiny, shapes: [mission]}}}")
            .unwrap_err();
    assert_eq!(e.path, ["baselines", "a@b"]);
    let e = options("{uses: profile, baselines: {torch: {run: [x], workload: tiny, shapes: [mission], shape: x}}}")
        .unwrap_err();
    assert_eq!(e.path, ["baselines"]);
    assert!(e.message.contains("unknown field `shape`"), "{}", e.message);
}

#[test]
fn baselines_and_the_best_variant_off_the_primary_become_targets() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(&with_baseline("[mission, small]"));
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    // No bench records yet: the best variant's side is skipped with the fix.
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    let labels: Vec<&str> = run.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(labels, ["control", "torch@mission", "torch@small"]);
    assert_eq!(
        run[2].program,
        Program::Script(vec!["python3".into(), "b.py".into(), "--profile".into()])
    );
    assert_eq!(
        (run[2].variant.as_str(), run[2].shape.as_str()),
        ("torch", "small")
    );
    assert_eq!(skipped[0].target, "best@small");
    assert_eq!(skipped[0].shape.as_deref(), Some("small"));
    assert!(skipped[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("run the bench stage"));

    // `ws` is the faster correct variant on the primary: it is profiled on `small` too; and
    // `mm`, the fastest there, beside it.
    let bench = dir.path().join("artifacts/bench");
    std::fs::create_dir_all(&bench).unwrap();
    for (name, mission, small) in [("base", 20.0, 9.0), ("ws", 10.0, 5.0), ("mm", 15.0, 3.0)] {
        let result = |shape: &str, p50: f64| {
            let mut r = repro_schema::BenchResult::blank(
                shape,
                Default::default(),
                0,
                (1, 1),
                RunStatus::Ok,
            );
            r.p50_us = Some(p50);
            r.correctness_pass = Some(true);
            r
        };
        let file = serde_json::json!({
            "name": name, "kind": "variant", "status": "ok", "defines": {},
            "results": [result("mission", mission), result("small", small)], "gates": []
        });
        std::fs::write(bench.join(format!("{name}.json")), file.to_string()).unwrap();
    }
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    assert!(skipped.is_empty());
    let fastest = run.last().unwrap();
    assert_eq!(fastest.label, "mm@small");
    assert_eq!(fastest.program, Program::Variant("mm".into()));
    let best = &run[run.len() - 2];
    assert_eq!(best.label, "ws@small");
    assert_eq!(best.program, Program::Variant("ws".into()));
    assert_eq!(
        (best.entry.as_str(), best.shape.as_str()),
        ("k_fwd", "small")
    );

    // The full profile goes to the fastest variant on each shape; the control (slower than
    // `ws` on mission), `ws` on small and the baselines' calls get one pass.
    let full = crate::profile::depth::full(&run, &opts, &p, dir.path());
    let chosen: Vec<&str> = run
        .iter()
        .zip(&full)
        .filter(|(_, f)| **f)
        .map(|(t, _)| t.label.as_str())
        .collect();
    assert_eq!(chosen, ["mm@small"]);
    // Of a tune's elite, only its best (rank 1) gets the full list.
    let elite = |rank: u32| Target {
        label: format!("top{rank}"),
        variant: format!("tune-top{rank}"),
        entry: "k_fwd".into(),
        program: Program::Cubin {
            path: format!("/p/.repro/cubins/tune-top{rank}.cubin").into(),
            defines: Default::default(),
            rank,
        },
        workload: run[0].workload.clone(),
        shape: run[0].shape.clone(),
    };
    let with_elite: Vec<Target> = run.iter().cloned().chain([elite(1), elite(2)]).collect();
    let full_elite = crate::profile::depth::full(&with_elite, &opts, &p, dir.path());
    assert_eq!(full_elite[..run.len()], full[..]);
    assert_eq!(full_elite[run.len()..], [true, false]);
    let all = ProfileOptions {
        full_profile: repro_ncu::options::FullProfile::All,
        ..opts.clone()
    };
    assert!(crate::profile::depth::full(&run, &all, &p, dir.path())
        .iter()
        .all(|f| *f));
    // A profile gate on the SM throughput needs it of every target it judges.
    let mut gated = p.clone();
    gated.gates.profile.insert(
        "busy".into(),
        repro_pipeline::profile_rules::ProfileRule {
            metric: Some("sm_util_pct".into()),
            min: Some(10.0),
            ..Default::default()
        },
    );
    assert!(crate::profile::depth::full(&run, &opts, &gated, dir.path())
        .iter()
        .all(|f| *f));
    gated.gates.profile.get_mut("busy").unwrap().metric = Some("tensor_core_util_pct".into());
    assert_eq!(
        crate::profile::depth::full(&run, &opts, &gated, dir.path()),
        full
    );
}

#[test]
fn the_elite_of_a_tune_off_its_archs_is_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = repro_pipeline::workload::testing::tiny_pipeline(
        "arch: [sm_89, sm_90a]\nkernels:\n  k: {source: kernels/k.cu, entry: k_fwd}\nvariants:\n  base: {kernel: k}\nstages:\n  ws-tune: {uses: tune, base: base, archs: [sm_90a], space: {X: [1, 2]}}\n  mma-tune: {uses: tune, base: base, archs: [sm_89], dir: artifacts/tune-mma, space: {X: [1, 2]}}\n",
        &["k"],
    );
    let ws = TuneOptions::parse(&p.stages["ws-tune"], &p).unwrap();
    let mma = TuneOptions::parse(&p.stages["mma-tune"], &p).unwrap();
    // The ws tune ran on an sm_90a GPU; the mma tune was skipped there (an empty elite).
    for folder in ["artifacts/tune", "artifacts/tune-mma", ".repro/cubins"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    std::fs::write(
        dir.path().join("artifacts/tune/topk.json"),
        "[{\"rank\": 1}]",
    )
    .unwrap();
    std::fs::write(dir.path().join("artifacts/tune-mma/topk.json"), "[]").unwrap();
    std::fs::write(dir.path().join(".repro/cubins/tune-top1.cubin"), "").unwrap();
    let tunes = [("ws-tune", &ws), ("mma-tune", &mma)];
    let resolve_on = |arch: Option<&str>| {
        let (mut run, mut skipped) = (Vec::new(), Vec::new());
        elite_targets(&tunes, arch, &p, dir.path(), (&mut run, &mut skipped));
        let run: Vec<String> = run.into_iter().map(|t| t.label).collect();
        let skipped: Vec<(String, String)> = skipped
            .into_iter()
            .map(|t| (t.target, t.reason.unwrap_or_default()))
            .collect();
        (run, skipped)
    };
    let (run, skipped) = resolve_on(Some("sm_90a"));
    assert_eq!(run, ["top1"]);
    assert_eq!(
        skipped,
        [(
            "mma-topk".to_string(),
            "`mma-tune` tunes kernel `k` on sm_89 only (its `archs:`), and this GPU runs sm_90a cubins: its elite is not profiled here".to_string()
        )]
    );
    // On an sm_89 GPU the committed sm_90a elite is not profiled; nothing fails.
    let (run, skipped) = resolve_on(Some("sm_89"));
    assert!(run.is_empty(), "{run:?}");
    assert_eq!(skipped[0].0, "topk");
    assert!(skipped[0].1.contains("on sm_90a only"), "{}", skipped[0].1);
    assert!(
        skipped[1].1.contains("tune-mma/topk.json lists no elite"),
        "{}",
        skipped[1].1
    );
    // Where the GPU is unknown, each elite is read as it is.
    let (run, skipped) = resolve_on(None);
    assert_eq!(run, ["top1"]);
    assert!(skipped[0].1.contains("lists no elite"), "{skipped:?}");
}
