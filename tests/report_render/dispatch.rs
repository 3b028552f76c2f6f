//! "Which kernel for which shape" and `artifacts/dispatch.json`, on the green results edited
//! so every case shows: an ineligible kernel, a tie, a shape ncu did not measure, one where
//! it measured only another kernel, and a profile from another GPU.

use super::*;
use repro::schema::{DispatchFile, Measured};

const H100: &str = "NVIDIA H100 80GB HBM3";

/// A profile's record of where it ran, as the profile stage writes it.
fn measured_on(gpu: &str) -> Option<Measured> {
    Some(Measured {
        run: "2026-11-22T02:40:00Z".into(),
        commit: None,
        key: [("gpu".to_string(), gpu.to_string())].into(),
        reused: false,
    })
}

/// The green results with the edits the module comment lists.
fn edited() -> Artifacts {
    let mut a = Artifacts::load(&fixture("green")).unwrap();
    let ncu = a.ncu.as_mut().unwrap();
    for t in &mut ncu.targets {
        t.measured = measured_on(&format!("{H100} sm_90"));
    }
    ncu.targets[3].measured = measured_on("NVIDIA L4 sm_89");
    let mut long = ncu.targets[0].clone();
    (long.target, long.variant) = ("stage5-ws-p1@long".into(), "stage5-ws-p1".into());
    (long.shape, long.kernel_time_us) = (Some("long".into()), Some(240.0));
    (
        long.kernel_time_us_min,
        long.kernel_time_us_max,
        long.launches,
    ) = (Some(239.5), Some(241.0), Some(5));
    ncu.targets.push(long);
    let elite = &mut a.tunes.get_mut("artifacts/tune").unwrap().elite;
    // tune-top1 is wrong on one seed of `small`; tune-top2 is as fast on `mission`.
    let bad = elite[0]
        .bench
        .iter_mut()
        .find(|r| r.shape == "small" && r.seed == 2)
        .unwrap();
    bad.correctness_pass = Some(false);
    for r in elite[1].bench.iter_mut().filter(|r| r.shape == "mission") {
        r.p50_us = Some(30.95);
    }
    a
}

#[test]
fn each_shape_names_its_best_by_both_measures_and_what_rules_the_others_out() {
    let root = fixture("green");
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = edited();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let env = environment(true);
    let inputs = report::Inputs {
        pipeline: &pipeline,
        configs: &configs,
        artifacts: &artifacts,
        state: &state,
        env: &env,
    };
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    let rendered = report::render_report(&inputs, &template).unwrap();
    let section = rendered
        .markdown
        .split("## Which kernel for which shape")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    insta::assert_snapshot!("dispatch_section", section);
    let row = |shape: &str| {
        section
            .lines()
            .find(|l| l.starts_with(&format!("| {shape} |")))
            .unwrap()
    };
    // Both measures pick tune-top1 on the primary; tune-top2 is within its spread.
    assert!(
        row("mission").contains("| `tune-top1` 29.45 | ✅ yes | ≈ +0.2% (`tune-top2`)"),
        "{section}"
    );
    // ncu measured only stage5-ws-p1 on long: no verdict on the harness's best.
    assert!(
        row("long")
            .contains("the only one profiled | n/a: ncu did not profile `tune-top1` on it |"),
        "{section}"
    );
    assert!(row("small").contains("| `tune-top2` 5.69"), "{section}");
    assert!(
        row("small").contains("| n/a: not profiled on it | n/a |"),
        "{section}"
    );
    assert!(
        section.contains("- `tune-top1` on `small`: correctness failed on small/seed2"),
        "{section}"
    );
    assert!(section.contains("- `tune-top3` on `mission`: ncu profiled it on NVIDIA L4 sm_89, not NVIDIA H100 80GB HBM3"), "{section}");

    // The file the stage writes: the same ranking, with what to call.
    let (_, json) = rendered
        .files()
        .into_iter()
        .find(|(path, _)| path == report::dispatch::DISPATCH)
        .unwrap();
    insta::assert_snapshot!("dispatch_json", json);
    let file: DispatchFile = serde_json::from_str(&json).unwrap();
    let table = &file.workloads[0];
    assert_eq!(table.gpu.as_deref(), Some(H100));
    let tuned = &table.kernels["tune-top1"];
    assert_eq!(
        (tuned.source.as_str(), tuned.entry.as_str()),
        ("kernels/sdpa_fp8.cu", "sdpa_fp8_fwd")
    );
    assert!(!tuned.defines.is_empty());
}
