//! Where results come from: the machine, the run and the build that made them.

use super::*;

/// A report whose bench results were measured on an H100, beside a tune measured on an L4,
/// says so at the top and names each row's machine and each stage's.
#[test]
fn a_report_of_results_from_two_machines_says_so_and_labels_each_row() {
    let root = fixture("green");
    let repro::pipeline::Project { pipeline, .. } =
        repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(&root).unwrap();
    let mut state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let bench = state.stages.get_mut("bench").unwrap();
    bench.hardware = Some("NVIDIA H100 80GB HBM3 sm_90 driver 580.95.05".into());
    state.stages.get_mut("evo-tune").unwrap().hardware =
        Some("NVIDIA L4 sm_89 driver 580.95.05".into());
    let md = green_summary(&artifacts, &state);
    assert!(
        md.contains("These results were measured on more than one machine"),
        "{md}"
    );
    assert!(
        md.contains("- M1: NVIDIA H100 80GB HBM3 sm_90 driver 580.95.05 — bench\n"),
        "{md}"
    );
    assert!(
        md.contains("- M2: NVIDIA L4 sm_89 driver 580.95.05 — evo-tune"),
        "{md}"
    );
    assert!(md.contains("| Status | Measured on |"), "{md}");
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name}")) || l.starts_with(&format!("| **{name}")))
            .unwrap_or_else(|| panic!("no row {name}:\n{md}"))
            .to_string()
    };
    assert!(row("stage2-baseline").ends_with("| M1 |"), "{md}");
    assert!(row("tune-top1").ends_with("| M2 |"), "{md}");
    assert!(row("bench | bench").contains("| M1 |"), "{md}");
    assert!(
        row("build | build").contains("| any machine (cross-compiled) |"),
        "{md}"
    );
}

/// Rendered from what was recorded: a stage whose last run was not on this machine shows the
/// time the previous manifest recorded for that same run, and none for another run.
#[test]
fn stage_times_come_from_the_run_that_made_the_results() {
    let root = fixture("green");
    let names = ["bench", "build"];
    let mut state = RunState::load(&root, names).unwrap();
    let fingerprint = state.stages["bench"].fingerprint.clone().unwrap();
    state.stages.get_mut("bench").unwrap().elapsed_s = None;
    let manifest: serde_yaml::Value = serde_yaml::from_str(&format!(
        "stages:\n  bench: {{elapsed_s: 112.617, fingerprint: \"{fingerprint}\"}}\n  build: {{elapsed_s: 3.2, fingerprint: other}}\n"
    ))
    .unwrap();
    let build_before = state.stages["build"].elapsed_s;
    state.carry_times(Some(&manifest));
    assert_eq!(state.stages["bench"].elapsed_s, Some(112.617));
    assert_eq!(
        state.stages["build"].elapsed_s, build_before,
        "another run's time"
    );
}

/// Timings from one architecture must not pass for another the pipeline declares: with
/// `arch: [sm_89]` (an L4's) and timings of an `sm_90` GPU the headline says `sm_89` is not
/// measured, and so with `[sm_89, sm_90a]`; with only the measured one declared (`sm_90a`
/// counts as `sm_90`), or none, it says nothing. The fixture's records predate the bench
/// records' `arch`: the build records of that time, one architecture each, say it.
#[test]
fn timings_from_another_architecture_say_the_pipelines_own_is_not_measured() {
    let root = fixture("green");
    let repro::pipeline::Project {
        mut pipeline,
        configs,
        ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(&root).unwrap();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    let env = environment(true);
    let line = |on: &str| {
        format!("**Timings for `sm_89` (declared in `arch:` in pipeline.yaml; built and gated, see PTXAS below) are not measured: every timing here ran on `{on}` builds.**")
    };
    for (arch, says) in [
        (&["sm_89"][..], Some(line("sm_90"))),
        (&["sm_89", "sm_90a"][..], Some(line("sm_90"))),
        (&["sm_90a"][..], None),
        (&["sm_90"][..], None),
        (&[][..], None),
    ] {
        pipeline.arch = arch.iter().map(|a| a.to_string()).collect();
        let inputs = report::Inputs {
            pipeline: &pipeline,
            configs: &configs,
            artifacts: &artifacts,
            state: &state,
            env: &env,
        };
        let markdown = report::render_report(&inputs, &template).unwrap().markdown;
        if let Some(line) = &says {
            assert!(markdown.contains(line), "arch {arch:?}:\n{markdown}");
        }
        assert_eq!(
            markdown.contains("are not measured: every timing"),
            says.is_some(),
            "arch {arch:?}"
        );
    }
}

/// Results a run copied from an earlier one instead of measuring (bench variants, profile
/// targets) are named under the headline with the run that measured them.
#[test]
fn results_reused_from_an_earlier_run_name_that_run() {
    let root = fixture("green");
    let repro::pipeline::Project { pipeline, .. } =
        repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let mut artifacts = Artifacts::load(&root).unwrap();
    let earlier = repro::schema::Measured {
        run: "2026-11-25T10:00:00Z".into(),
        commit: Some("61c0dd9c1234".into()),
        key: Default::default(),
        reused: true,
    };
    let benches = artifacts.benches.as_mut().unwrap();
    benches[0].measured = Some(earlier.clone());
    benches[1].measured = Some(repro::schema::Measured {
        reused: false,
        ..earlier.clone()
    });
    let reused_bench = benches[0].name.clone();
    let ncu = artifacts.ncu.as_mut().unwrap();
    ncu.targets[0].measured = Some(earlier);
    let reused_target = ncu.targets[0].target.clone();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let md = green_summary(&artifacts, &state);
    let want = format!(
        "Reused, not measured again (cubin, workload, harness options, GPU and driver unchanged): \
         bench `{reused_bench}`, profile `{reused_target}` from the run of 2026-11-25T10:00:00Z at 61c0dd9c1234."
    );
    assert!(md.contains(&want), "{want}\n{md}");
    let plain = render_fixture("green", &environment(true)).report.markdown;
    assert!(!plain.contains("Reused, not measured again"), "{plain}");
}

/// A record that names a cubin the build no longer makes (kept from another build) is not
/// measured: the report lists it first and never reads "all gates passed" over it; a
/// record of the cubin built now reads as before.
#[test]
fn a_result_kept_from_another_build_is_never_shown_as_measured() {
    let root = fixture("green");
    let repro::pipeline::Project { pipeline, .. } =
        repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let mut artifacts = Artifacts::load(&root).unwrap();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let variant = artifacts.benches.as_ref().unwrap()[0].name.clone();
    let built = artifacts
        .builds
        .as_ref()
        .unwrap()
        .iter()
        .find(|b| b.variant == variant)
        .and_then(|b| b.archs.values().find_map(|a| a.cubin_sha256.clone()))
        .expect("the fixture's build records name their cubins");
    let measured = |cubin: &str| repro::schema::Measured {
        run: "2026-11-25T10:00:00Z".into(),
        commit: None,
        key: [("cubin_sha256".to_string(), cubin.to_string())].into(),
        reused: false,
    };
    artifacts.benches.as_mut().unwrap()[0].measured = Some(measured(&built));
    let current = green_summary(&artifacts, &state);
    assert!(current.contains("All gates passed"), "{current}");
    assert!(
        !current.contains("not measured for these sources"),
        "{current}"
    );

    artifacts.benches.as_mut().unwrap()[0].measured = Some(measured("0123456789abcdef"));
    let kept = green_summary(&artifacts, &state);
    let head: Vec<&str> = kept.lines().take(10).collect();
    assert!(!kept.contains("All gates passed"), "{kept}");
    assert!(
        head.iter()
            .any(|l| l.contains("1 result was not measured for these sources")),
        "{head:#?}"
    );
    assert!(
        head.iter()
            .any(|l| l.starts_with(&format!("- `{variant}`: measured cubin 0123456789ab"))),
        "{head:#?}"
    );
    let row = kept
        .lines()
        .find(|l| {
            l.starts_with(&format!("| {variant}")) || l.starts_with(&format!("| **{variant}"))
        })
        .unwrap();
    assert!(row.contains("⏸ not measured for these sources"), "{row}");
}
