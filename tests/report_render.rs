//! The report and manifest rendered from fixture artifacts (tests/fixtures/report/<scenario>,
//! written by its generate.py following src/schema.rs), as insta snapshots; what the charts
//! show, as data snapshots; determinism; template errors.

use repro::env::{Environment, GitState, GpuSnapshot};
use repro::report::charts::{self, BarKind};
use repro::report::{self, artifacts::Artifacts, manifest, render, state::RunState};
use repro::schema::RunStatus;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

/// A fixed environment so snapshots do not depend on this machine.
fn environment(with_tools: bool) -> Environment {
    Environment {
        git: Some(GitState {
            sha: Some("4f2c9a1e7b3d5c8f0a6e2d4b9c1f3a5e7d9b0c2e".into()),
            branch: Some("ws-producer-warps".into()),
            dirty: true,
        }),
        gpu: Some(GpuSnapshot {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: Some("GPU-5e1c7a2b-93d4-4f0e-8b6a-1c2d3e4f5a6b".into()),
            compute_capability: "9.0".into(),
            sm_count: Some(132),
            memory_bytes: Some(85_520_809_984),
            driver_version: Some("580.95.05".into()),
            cuda_driver_version: Some("13.0".into()),
        }),
        gpu_note: None,
        nvcc: Some("Cuda compilation tools, release 13.0, V13.0.88".into()),
        ncu: with_tools.then(|| "Version 2025.3.1.0 (build 36398880)".into()),
        python: with_tools.then(|| "Python 3.11.9".into()),
        torch: with_tools.then(|| "2.9.0+cu130".into()),
        host: Some("gpu-node-17".into()),
        repro_version: "0.1.0".into(),
        created_utc: "2026-11-22T03:00:00Z".into(),
    }
}

struct Rendered {
    report: report::Report,
    manifest: String,
}

/// With `REPRO_DUMP_REPORT=<folder>` set, the rendered report and charts of each scenario
/// are written to `<folder>/<scenario>/` to look at (e.g. converted to HTML and PNG).
fn dump(name: &str, report: &report::Report) {
    let Some(dir) = std::env::var_os("REPRO_DUMP_REPORT") else {
        return;
    };
    let dir = PathBuf::from(dir).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("summary.md"), &report.markdown).unwrap();
    for (file, svg) in &report.charts {
        std::fs::write(dir.join(file), svg).unwrap();
    }
}

fn render_fixture(name: &str, env: &Environment) -> Rendered {
    let root = fixture(name);
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(&root).unwrap();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let inputs = report::Inputs {
        pipeline: &pipeline,
        configs: &configs,
        artifacts: &artifacts,
        state: &state,
        env,
    };
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    let report = report::render_report(&inputs, &template).unwrap();
    dump(name, &report);
    // Lay the report out as the stage would stage it, so the manifest lists it.
    let staging = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(staging.path().join("reports")).unwrap();
    std::fs::write(staging.path().join(report::SUMMARY), &report.markdown).unwrap();
    for (file, svg) in &report.charts {
        std::fs::write(staging.path().join("reports").join(file), svg).unwrap();
    }
    let listed = manifest::list_artifacts(&root, Some(staging.path())).unwrap();
    let not_measured = report.context.not_measured.clone();
    let mctx = manifest::context(&pipeline, &state, env, "summarize", (listed, not_measured));
    let mtpl = report::load_template(&root, report::MANIFEST_TEMPLATE).unwrap();
    let manifest = render::render(&mtpl, &mctx).unwrap();
    Rendered { report, manifest }
}

/// The summary of the `green` fixture's pipeline from `artifacts` and `state`, by the
/// built-in template.
fn green_summary(artifacts: &Artifacts, state: &RunState) -> String {
    let root = fixture("green");
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let env = environment(true);
    let inputs = report::Inputs {
        pipeline: &pipeline,
        configs: &configs,
        artifacts,
        state,
        env: &env,
    };
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    report::render_report(&inputs, &template).unwrap().markdown
}

/// Every stage's options of `pipeline` as its built-in kind decodes them (what a load keeps),
/// for a pipeline the test parsed itself.
fn configs_of(pipeline: &repro::pipeline::Pipeline) -> repro::pipeline::kind::Configs {
    let kinds = repro::stages::kinds();
    repro::pipeline::kind::Configs::new(
        pipeline
            .stages
            .iter()
            .filter_map(|(name, spec)| {
                let kind = kinds.iter().find(|k| k.kind() == spec.uses)?;
                Some((name.clone(), kind.configure(name, spec, pipeline).ok()?))
            })
            .collect(),
    )
}

/// The report of `pipeline` on the records in `root`, by the template of `templates` (its
/// own, else the built-in one), in the fixed environment.
fn render_in(
    root: &Path,
    pipeline: &repro::pipeline::Pipeline,
    configs: &repro::pipeline::kind::Configs,
    templates: &Path,
) -> anyhow::Result<report::Report> {
    let artifacts = Artifacts::load(root).unwrap();
    let state = RunState::load(root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let env = environment(true);
    let inputs = report::Inputs {
        pipeline,
        configs,
        artifacts: &artifacts,
        state: &state,
        env: &env,
    };
    let template = report::load_template(templates, report::SUMMARY_TEMPLATE).unwrap();
    report::render_report(&inputs, &template)
}

/// The manifest with its machine- and time-dependent values replaced.
fn redact(manifest: &str) -> String {
    manifest
        .lines()
        .map(|l| {
            let key = l.trim_start().split(':').next().unwrap_or("");
            match key {
                "created_utc" | "host" | "sha" | "branch" | "dirty" => {
                    let indent = &l[..l.len() - l.trim_start().len()];
                    format!("{indent}{key}: \"[redacted]\"")
                }
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn all_green() {
    let r = render_fixture("green", &environment(true));
    assert!(
        r.report.context.failed_gates.is_empty(),
        "{:?}",
        r.report.context.failed_gates
    );
    assert!(r.report.markdown.contains("**stage5-ws-p1** ★"));
    insta::assert_snapshot!("green_summary", r.report.markdown);
    insta::assert_snapshot!("green_manifest", redact(&r.manifest));
}

#[test]
fn gates_failing() {
    let r = render_fixture("failing", &environment(true));
    let failed = &r.report.context.failed_gates;
    assert!(
        failed
            .iter()
            .any(|g| g.starts_with("ptxas.max_registers stage5-ws-p2")),
        "{failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|g| g.contains("correctness stage5-ws-p2 mission/seed1")),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|g| g.starts_with("performance")),
        "{failed:?}"
    );
    insta::assert_snapshot!("failing_summary", r.report.markdown);
}

#[test]
fn stages_skipped_no_ncu_no_torch() {
    let r = render_fixture("skipped", &environment(false));
    let md = &r.report.markdown;
    assert!(md.contains("| ⏭ skipped [^1] |"), "{md}");
    assert!(
        md.contains(
            "[^1]: python3 cannot import torch (ModuleNotFoundError); fix: pip install torch"
        ),
        "{md}"
    );
    assert!(md.contains("[^2]: ncu not found on PATH"), "{md}");
    stated_once(
        md,
        &["python3 cannot import torch", "ncu not found on PATH"],
    );
    insta::assert_snapshot!("skipped_summary", r.report.markdown);
    insta::assert_snapshot!("skipped_manifest", redact(&r.manifest));
}

/// Real outputs of `repro run --arch sm_89` on a machine with nvcc but no GPU, ncu or torch.
#[test]
fn nothing_measured_is_not_all_gates_passed() {
    // As the summarize stage captures it on that machine: no GPU, and why.
    let env = Environment {
        gpu: None,
        gpu_note: Some(
            "no CUDA driver (libcuda.so.1) found: libcuda.so.1: cannot open shared object file: \
             No such file or directory. Install the NVIDIA driver, or run on a machine with an \
             NVIDIA GPU"
                .into(),
        ),
        ..environment(false)
    };
    let r = render_fixture("no-gpu", &env);
    let ctx = &r.report.context;
    assert!(ctx.failed_gates.is_empty(), "{:?}", ctx.failed_gates);
    let unchecked: Vec<&str> = ctx
        .unchecked_gates
        .iter()
        .map(|g| &g[..g.find(':').unwrap()])
        .collect();
    assert_eq!(unchecked, ["correctness", "performance"]);
    let md = &r.report.markdown;
    assert!(
        md.contains("**⏭ No gate failed, but 2 could not be checked:**"),
        "{md}"
    );
    assert!(
        !md.contains("All gates passed") && !md.contains("0 of 0"),
        "{md}"
    );
    assert!(md.contains("not checked: bench skipped [^1]"), "{md}");
    assert!(
        md.contains("| GPU | n/a: no result here was measured on a GPU |"),
        "{md}"
    );
    assert!(
        md.contains("[^1]: no CUDA driver (libcuda.so.1) found"),
        "{md}"
    );
    stated_once(
        md,
        &[
            "no CUDA driver (libcuda.so.1) found",
            "PyTorch is not installed",
            "Nsight Compute (ncu) was not found",
        ],
    );
    // Sections whose stage did not run say so, with no empty table.
    assert!(!md.contains("0 trials"), "{md}");
    let part = &ctx.workloads[0];
    for section in [
        &part.tunes[0].section.note,
        &ctx.profile.note,
        &part.baseline.note,
    ] {
        assert!(
            section.as_deref().unwrap().starts_with("not run: "),
            "{section:?}"
        );
    }
    assert!(md.contains(
        "## Tune\n\nnot run: stage `evo-tune` skipped: the tune stage times kernels on a GPU [^1]\n"
    ));
    assert!(
        md.contains("## Profile (Nsight Compute)\n\nnot run: stage `ncu-profile` skipped [^3]\n")
    );
    // Nothing measured: the p50 chart is not linked, and says why.
    assert_eq!(part.p50_chart, None);
    assert!(!md.contains("p50_by_shape.svg"), "{md}");
    assert!(r.report.charts[0].1.contains("nothing measured"));
    assert!(r.report.charts[1]
        .1
        .contains("tune: not run (the report says why)"));
    insta::assert_snapshot!("no_gpu_summary", r.report.markdown);
}

/// Each of `reasons` appears exactly once in `md` (in its footnote).
fn stated_once(md: &str, reasons: &[&str]) {
    for reason in reasons {
        assert_eq!(md.matches(reason).count(), 1, "`{reason}` in:\n{md}");
    }
}

#[test]
fn tune_absent() {
    let r = render_fixture("no-tune", &environment(true));
    assert!(r.report.context.workloads[0].tunes[0]
        .section
        .note
        .as_deref()
        .unwrap()
        .starts_with("not run: the pipeline has no `tune` stage"));
    assert_eq!(
        r.report.charts.len(),
        1,
        "no tune chart without a tune stage"
    );
    insta::assert_snapshot!("no_tune_summary", r.report.markdown);
}

#[test]
fn rendering_twice_gives_identical_bytes() {
    let env = environment(true);
    let a = render_fixture("green", &env);
    let b = render_fixture("green", &env);
    assert_eq!(a.report.markdown, b.report.markdown);
    assert_eq!(a.report.charts, b.report.charts);
    assert_eq!(a.manifest, b.manifest);
    let later = Environment {
        created_utc: "2026-11-23T09:30:00Z".into(),
        ..env
    };
    let c = render_fixture("green", &later);
    assert_eq!(
        a.report.markdown, c.report.markdown,
        "the report has no timestamp"
    );
    let changed: Vec<(&str, &str)> = a
        .manifest
        .lines()
        .zip(c.manifest.lines())
        .filter(|(x, y)| x != y)
        .collect();
    assert_eq!(
        changed,
        [(
            "created_utc: \"2026-11-22T03:00:00Z\"",
            "created_utc: \"2026-11-23T09:30:00Z\""
        )]
    );
}

#[test]
fn charts_are_svg_with_every_series() {
    let r = render_fixture("green", &environment(true));
    let names: Vec<&str> = r.report.charts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["p50_by_shape.svg", "tune_best_so_far.svg"]);
    let p50 = &r.report.charts[0].1;
    assert!(p50.starts_with("<svg"));
    for name in [
        "torch_sdpa",
        "torch_naive",
        "stage2-baseline",
        "stage5-ws-p1",
        "stage5-ws-p2",
        "tune-top1",
        "mission (B=2 H=8 S=512 D=64)",
    ] {
        assert!(p50.contains(name), "{name} missing from the p50 chart");
    }
    assert!(r.report.charts[1].1.contains("best so far"));
}

fn loaded(name: &str) -> (repro::pipeline::Pipeline, Artifacts) {
    let root = fixture(name);
    let repro::pipeline::Project { pipeline, .. } =
        repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    (pipeline, Artifacts::load(&root).unwrap())
}

/// What the attention fixtures' p50 chart marks.
fn marks<'a>(pipeline: &'a repro::pipeline::Pipeline, best: Option<&'a str>) -> charts::Marks<'a> {
    static DIMS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    charts::Marks {
        control: pipeline.control.as_deref(),
        best,
        tuned: "tune",
        dims: DIMS.get_or_init(|| ["B", "H", "S", "D"].map(String::from).to_vec()),
    }
}

/// The p50 chart's data: on every panel the "fastest" colour goes to the fastest variant
/// correct on that shape (never to a slower one), the report's ★ is marked on every panel,
/// whiskers span min to p90 around the median, and what has no p50 says "not measured".
#[test]
fn p50_chart_data() {
    for (name, best) in [
        ("green", "stage5-ws-p1"),
        ("failing", "stage5-ws-p1"),
        ("skipped", "stage5-ws-p1"),
    ] {
        let (pipeline, artifacts) = loaded(name);
        let panels = charts::p50_panels(&artifacts, marks(&pipeline, Some(best)));
        for p in &panels {
            let fastest: Vec<&charts::Bar> = p
                .bars
                .iter()
                .filter(|b| b.kind == BarKind::Fastest)
                .collect();
            assert_eq!(fastest.len(), 1, "{name} {}", p.title);
            let f = fastest[0];
            for b in p
                .bars
                .iter()
                .filter(|b| b.kind == BarKind::Variant && b.correct)
            {
                assert!(
                    f.p50 <= b.p50,
                    "{name} {}: {} is faster than {}",
                    p.title,
                    b.name,
                    f.name
                );
            }
            assert!(p.bars.iter().any(|b| b.star && b.name == best));
            for b in &p.bars {
                match (b.p50, b.spread) {
                    (Some(v), Some((lo, hi))) => assert!(lo <= v && v <= hi, "{b:?}"),
                    (None, _) => assert!(b.missing.as_deref().unwrap().starts_with("not measured")),
                    _ => {}
                }
            }
        }
        insta::assert_debug_snapshot!(format!("{name}_p50_panels"), panels);
    }
    // The skipped fixture's baselines were not measured: said so, in words.
    let (pipeline, artifacts) = loaded("skipped");
    let panels = charts::p50_panels(&artifacts, marks(&pipeline, None));
    let naive = panels[0]
        .bars
        .iter()
        .find(|b| b.name == "torch_naive")
        .unwrap();
    assert_eq!(naive.missing.as_deref(), Some("not measured (skipped)"));
    let svg = charts::p50_chart(&panels, "mission").unwrap();
    assert!(
        svg.contains("not measured (skipped)") && !svg.contains("n/a"),
        "{svg}"
    );
}

/// The tune chart's data and drawing: invalid trials are listed apart and drawn in the
/// strip below the latency plot, never on its axis.
#[test]
fn tune_chart_keeps_invalid_trials_off_the_latency_axis() {
    let (_, artifacts) = loaded("skipped");
    let tune = artifacts.tune.as_ref().unwrap();
    let series = charts::tune_series(tune);
    assert_eq!(series.invalid.len(), 5);
    assert!(series
        .valid
        .iter()
        .all(|(t, _)| !series.invalid.iter().any(|(i, _)| i == t)));
    insta::assert_debug_snapshot!("skipped_tune_series", series);
    let svg = charts::tune_chart(tune, Some(("stage2-baseline", 41.28))).unwrap();
    // The crosses are the only red strokes; each is two lines.
    let red: Vec<&str> = svg
        .lines()
        .filter(|l| l.contains("stroke=\"#C82828\""))
        .collect();
    assert_eq!(red.len(), 2 * series.invalid.len(), "{svg}");
    for line in red {
        for attr in ["y1=\"", "y2=\""] {
            let y: u32 = line
                .split(attr)
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                y > charts::TUNE_PLOT_HEIGHT,
                "a cross on the latency plot: {line}"
            );
        }
    }
    assert!(
        svg.contains(
            "invalid trials, no p50 (5): compile_error 1, ptxas_gate 2, incorrect 1, failed 1"
        ),
        "the strip says what it holds"
    );
}

#[test]
fn user_template_with_an_undefined_name_is_reported_with_line_and_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("templates")).unwrap();
    std::fs::write(
        dir.path().join(report::SUMMARY_TEMPLATE),
        "# Report\n\nShape: {{ primary_shape }}\n{{ profile.data.trails }}\n",
    )
    .unwrap();
    let root = fixture("green");
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let err = render_in(&root, &pipeline, &configs, dir.path()).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("templates/summary.md.j2:4: undefined value `profile.data.trails`"),
        "{msg}"
    );
}

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

/// The `green` fixture with a second, declared workload (RMSNorm, two variants and a
/// baseline): the report has one part per workload, each with its own headline, correctness
/// and performance, and a failed gate names its workload. The fixture's SDPA records are in
/// the form written before workloads were declared (`B H S D`), and still count.
#[test]
fn a_pipeline_of_two_workloads_reports_each_in_its_own_part() {
    use repro::schema::{to_json_pretty, BenchFile, BenchResult};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("green");
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(fixture("green"))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(cp.success());
    let yaml = std::fs::read_to_string(root.join("pipeline.yaml"))
        .unwrap()
        .replace(
            "kernels:\n",
            "kernels:\n  rmsnorm: {source: kernels/rmsnorm.cu, entry: rmsnorm_fwd}\n",
        )
        .replace(
            "variants:\n",
            "variants:\n  rms-a: {kernel: rmsnorm}\n  rms-b: {kernel: rmsnorm}\n",
        )
        // Two kernels now: the tune stage names its base.
        .replace("{uses: tune, ", "{uses: tune, base: stage2-baseline, ")
        + "workloads:
  rmsnorm:
    kernels: [rmsnorm]
    dims: [rows, hidden]
    shapes: {mission: {rows: 2048, hidden: 4096}}
    primary: mission
    control: rms-a
    args:
      - {name: x, dtype: fp16, role: input, shape: [rows, hidden], init: {normal: {}}}
      - {name: y, dtype: fp16, role: output, shape: [rows, hidden]}
    launch: {grid: [rows], block: [128]}
    reference: {run: [python3, reference.py]}
    gates:
      y: {max_abs_err: 0.01}
";
    let pipeline: repro::pipeline::Pipeline = serde_yaml::from_str(&yaml).unwrap();
    let dims: std::collections::BTreeMap<String, i64> = [("rows", 2048), ("hidden", 4096)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let file = |name: &str, kind: &str, p50: f64| {
        let mut r = BenchResult::blank("mission", dims.clone(), 0, (20, 100), RunStatus::Ok);
        r.p50_us = Some(p50);
        r.max_abs_err = Some(0.002);
        r.correctness_pass = Some(true);
        BenchFile {
            name: name.into(),
            kind: kind.into(),
            workload: Some("rmsnorm".into()),
            status: RunStatus::Ok,
            reason: None,
            defines: Default::default(),
            nvcc_version: None,
            precision: None,
            arch: None,
            driver: None,
            results: vec![r],
            gates: Vec::new(),
            measured: None,
        }
    };
    let bench = root.join("artifacts/bench");
    // rms-b is 1.05× rms-a: below the pipeline's 1.10 performance gate.
    for (name, kind, p50, path) in [
        ("rms-a", "variant", 21.0, bench.join("rms-a.json")),
        ("rms-b", "variant", 20.0, bench.join("rms-b.json")),
        (
            "torch-rmsnorm",
            "baseline",
            30.0,
            bench.join("baselines/torch-rmsnorm.json"),
        ),
    ] {
        std::fs::write(path, to_json_pretty(&file(name, kind, p50))).unwrap();
    }

    let r = render_in(&root, &pipeline, &configs_of(&pipeline), &root).unwrap();
    let md = &r.markdown;
    let part = |from: &str, to: &str| {
        let start = md
            .find(from)
            .unwrap_or_else(|| panic!("no {from:?} in\n{md}"));
        let len = md[start..].find(to).unwrap();
        md[start..start + len].to_string()
    };
    // The title names each workload's primary shape; declared workloads first, then the
    // built-in one.
    assert!(
        md.starts_with(
            "# Kernel report: `rmsnorm` on `mission`, `sdpa_fp8` on `mission`\n\nMeasured on "
        ),
        "{}",
        &md[..200]
    );
    let rmsnorm = part("## Headline: `rmsnorm`", "## Headline: `sdpa_fp8`");
    let attention = part("## Headline: `sdpa_fp8`", "## Gates");
    // Its baselines name no workload: theirs by their results' dims.
    assert!(
        attention.contains("**stage5-ws-p1** ★")
            && attention.contains("vs torch_sdpa")
            && !attention.contains("rms"),
        "{attention}"
    );
    assert!(
        rmsnorm.contains("| rms-a (control) | 21.00 | 1.43× |")
            && rmsnorm.contains("| **rms-b** ★ | 20.00 | 1.50× |")
            && rmsnorm.contains("vs torch-rmsnorm")
            && !rmsnorm.contains("stage2-baseline")
            && !rmsnorm.contains("torch_sdpa"),
        "{rmsnorm}"
    );
    assert!(rmsnorm.contains("![p50 per variant and shape](p50_by_shape.svg)"));
    assert!(attention.contains("![p50 per variant and shape](p50_by_shape_sdpa_fp8.svg)"));
    assert!(r
        .charts
        .iter()
        .any(|(f, _)| f == "p50_by_shape_sdpa_fp8.svg"));
    assert!(
        part("### Correctness: `rmsnorm`", "<details").contains("✅ 2 of 2 runs"),
        "{md}"
    );
    assert!(part("### Correctness: `sdpa_fp8`", "<details").contains("✅ 27 of 27 runs"));
    let failed = &r.context.failed_gates;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with("`rmsnorm`: performance rms-b vs rms-a (mission)"),
        "{failed:?}"
    );
    assert!(part("## Tune: `rmsnorm`", "## Tune: `sdpa_fp8`")
        .contains("not run: no tune stage tunes a kernel of `rmsnorm`"));
    assert!(part("## Tune: `sdpa_fp8`", "## Profile").contains("16 trials"));
}

/// A profile record of `target` (variant `variant`, shape `shape`) with `kernels`.
fn ncu_record(
    target: &str,
    variant: &str,
    shape: Option<&str>,
    kernels: &[(&str, f64)],
) -> repro::schema::NcuTarget {
    let summary: repro::schema::NcuSummary = serde_json::from_str(
        &std::fs::read_to_string(fixture("green").join("artifacts/ncu/summary.json")).unwrap(),
    )
    .unwrap();
    repro::schema::NcuTarget {
        target: target.into(),
        variant: variant.into(),
        shape: shape.map(str::to_string),
        kernel_time_us: Some(kernels.iter().map(|(_, t)| t).sum()),
        kernels: kernels
            .iter()
            .map(|(name, t)| repro::schema::NcuKernel {
                name: name.to_string(),
                time_us: Some(*t),
            })
            .collect(),
        ..summary.targets[0].clone()
    }
}

/// The report of the green results under their pipeline.yaml with `from` replaced by `to`,
/// after `edit` changed the artifacts.
fn green_report_with(from: &str, to: &str, edit: impl FnOnce(&mut Artifacts)) -> String {
    let root = fixture("green");
    let yaml = std::fs::read_to_string(root.join("pipeline.yaml"))
        .unwrap()
        .replace(from, to);
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("pipeline.yaml"), &yaml).unwrap();
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&project.path().join("pipeline.yaml")).unwrap();
    let mut artifacts = Artifacts::load(&root).unwrap();
    edit(&mut artifacts);
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
    report::render_report(&inputs, &template).unwrap().markdown
}

#[test]
fn every_baseline_row_gives_both_ratios_or_says_why_not() {
    let to = "targets: [control, topk], baselines: {torch_sdpa: {run: [python3, b.py], workload: sdpa_fp8, shapes: [mission, long]}}}";
    let md = green_report_with("targets: [control, topk]}", to, |artifacts| {
        let ncu = artifacts.ncu.as_mut().unwrap();
        // The best variant on the primary (a record from before `shape` existed), the baseline's
        // call on it (two kernels), and on `long` a skipped baseline call.
        ncu.targets.push(ncu_record(
            "stage5-ws-p1",
            "stage5-ws-p1",
            None,
            &[("sdpa_fp8_fwd", 36.0)],
        ));
        let long_kernel = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_";
        ncu.targets.push(ncu_record(
            "torch_sdpa@mission",
            "torch_sdpa",
            Some("mission"),
            &[("fill_kernel", 1.0), (long_kernel, 28.0)],
        ));
        ncu.targets.push(repro::schema::NcuTarget {
            status: RunStatus::Skipped,
            reason: Some("PyTorch sees no CUDA GPU".into()),
            ..ncu_record("torch_sdpa@long", "torch_sdpa", Some("long"), &[])
        });
        // One untimed record of the baseline fails its gate; the timed ones pass.
        let baselines = artifacts.baselines.as_mut().unwrap();
        let sdpa = baselines
            .iter_mut()
            .find(|b| b.name == "torch_sdpa")
            .unwrap();
        let mut bad = sdpa.results[0].clone();
        (bad.shape, bad.inputs, bad.seed) = ("mission".into(), "sharp".into(), 2);
        (bad.p50_us, bad.rel_l2_err, bad.correctness_pass) = (None, Some(0.0036), Some(false));
        sdpa.results.push(bad);
    });
    let section = md
        .split("### Baselines by harness and by ncu")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    insta::assert_snapshot!("baseline_ratios", section);
    // Mission: both ratios (by the harness, by ncu) and the call's kernels.
    assert!(
        section.contains("| torch_sdpa | mission | stage5-ws-p1 | 0.92× (31.84 ÷ 34.61 µs) | 0.81× (29.00 ÷ 36.00 µs) |"),
        "{section}"
    );
    assert!(
        section.contains("`fill_kernel` 1.00 µs + `cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_…` 28.00 µs"),
        "{section}"
    );
    // Long: the harness ratio, and why ncu has none.
    assert!(
        section.contains("| torch_sdpa | long | stage5-ws-p1 | 0.81× (198.40 ÷ 243.88 µs) | n/a: torch_sdpa skipped: PyTorch sees no CUDA GPU |"),
        "{section}"
    );
    // A baseline the profile stage does not list: its primary row says so.
    assert!(section.contains("| torch_naive | mission |"), "{section}");
    assert!(section.contains("does not list it"), "{section}");
    // The headline's correctness label names the record, the gate and the margin; the
    // baseline's row has its call's profile.
    assert!(
        md.contains("| 31.8 | 23.9 | 38.2 | ❌ correctness: mission sharp seed 2 (untimed): rel_l2_err 0.003600 > 0.002; every timed record passes |"),
        "{md}"
    );
}

/// A record whose error figure is NaN (the worker writes it as `"NaN"`) is shown failed,
/// as the run judged it: its figure as NaN, not n/a, and the reason the one rule gives.
#[test]
fn a_record_with_a_nan_figure_shows_its_failing_verdict_and_why() {
    let md = green_report_with("", "", |artifacts| {
        let benches = artifacts.benches.as_mut().unwrap();
        let ws = benches
            .iter_mut()
            .find(|b| b.name == "stage5-ws-p1")
            .unwrap();
        let r = &mut ws.results[0];
        (r.mean_abs_err, r.correctness_pass) = (Some(f64::NAN), Some(false));
    });
    let why = "❌ correctness: small gaussian seed 0 (timed): mean_abs_err is NaN: not a finite number, so it passes no limit";
    assert!(
        md.lines()
            .any(|l| l.starts_with("| stage5-ws-p1 |") && l.contains(why)),
        "{md}"
    );
    assert!(
        md.contains("| stage5-ws-p1 | small | gaussian | 0 | 0.015625 | NaN | 0.000 | n/a | 0.003628 | ❌ |"),
        "{md}"
    );
}

/// On the committed results, a "❌ correctness" label never stands bare: it names each
/// failing record, the threshold it exceeded and whether the timed records pass.
#[test]
fn the_committed_reports_correctness_labels_say_which_record_failed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let md = render_in(root, &pipeline, &configs, root).unwrap().markdown;
    let labels: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with('|') && l.contains("❌ correctness"))
        .collect();
    for line in &labels {
        assert!(
            line.contains("❌ correctness: ") && line.contains(" seed ") && line.contains(" > "),
            "{line}"
        );
    }
    eprintln!("{}", labels.join("\n"));
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

/// The committed report names the GPU in its first lines, says why a baseline's ❌ fails
/// no gate, lists the runs a baseline skipped inside a file that ran, explains an L2 hit
/// rate above 100 %, and its "no profile" note names only rows of its table.
#[test]
fn the_committed_report_says_where_it_was_measured_and_what_it_does_not_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(root).unwrap();
    let md = render_in(root, &pipeline, &configs, root).unwrap().markdown;
    let third = md.lines().nth(2).unwrap_or_default();
    assert!(third.starts_with("Measured on NVIDIA"), "{third}");

    let baseline_fails = md
        .lines()
        .any(|l| l.contains(" (baseline) |") && l.contains("❌"));
    assert_eq!(
        baseline_fails,
        md.contains("a baseline's correctness is shown, not gated"),
        "a baseline's ❌ is explained exactly when one is shown"
    );

    let skipped_runs: Vec<(String, String)> = artifacts
        .baselines
        .iter()
        .flatten()
        .flat_map(|f| {
            f.results
                .iter()
                .filter(|r| r.status == RunStatus::Skipped)
                .map(|r| (f.name.clone(), r.shape.clone()))
        })
        .collect();
    for (name, shape) in &skipped_runs {
        assert!(
            md.contains(&format!("baseline `{name}` on `{shape}`")),
            "{name} on {shape} is not in Skipped"
        );
    }
    if !skipped_runs.is_empty() {
        assert!(!md.contains("Nothing was skipped."));
    }

    let over_100 = artifacts
        .ncu
        .iter()
        .flat_map(|n| &n.targets)
        .any(|t| t.l2_hit_rate_pct.is_some_and(|p| p > 100.0));
    assert_eq!(over_100, md.contains("L2 hit % above 100 ("));

    for note in md.lines().filter_map(|l| {
        l.strip_prefix("TC util / Occupancy / DRAM: no profile of the primary shape for ")
    }) {
        for name in note.split(", ") {
            assert!(
                md.lines().any(|l| l.starts_with(&format!("| {name} "))
                    || l.starts_with(&format!("| **{name}**"))),
                "{name} is named by the profile note but has no row"
            );
        }
    }
}

/// The green results with a profile gate declared, and ncu medians over five launches: the
/// control's close to its harness p50, the best variant's 12.7 % above it, so that by ncu
/// the best misses the speedup gate the harness passes.
#[test]
fn ncu_medians_show_their_spread_the_harness_gap_and_a_gate_they_judge_otherwise() {
    let to = "  performance: {min_speedup_vs_control: 1.10}\n  profile:\n    bound: {any_of: [{metric: tensor_core_util_pct, min: 50}, {metric: dram_bw_pct_peak, max: 50}]}\n";
    let md = green_report_with(
        "  performance: {min_speedup_vs_control: 1.10}\n",
        to,
        |artifacts| {
            let ncu = artifacts.ncu.as_mut().unwrap();
            let control = &mut ncu.targets[0];
            (
                control.kernel_time_us_min,
                control.kernel_time_us_max,
                control.launches,
            ) = (Some(40.5), Some(43.25), Some(5));
            ncu.targets.push(repro::schema::NcuTarget {
                kernel_time_us_min: Some(38.5),
                kernel_time_us_max: Some(39.75),
                launches: Some(5),
                ..ncu_record("stage5-ws-p1", "stage5-ws-p1", None, &[])
            });
            ncu.targets.last_mut().unwrap().kernel_time_us = Some(39.0);
            ncu.gates = vec![repro::schema::GateResult {
                detail: Some(
                    "tensor_core_util_pct 31.80 ≥ 50 ❌ or dram_bw_pct_peak 38.20 ≤ 50 ✅".into(),
                ),
                ..repro::schema::GateResult::at_most("profile.bound", "control", 38.2, 50.0)
            }];
            ncu.gates.push(repro::schema::GateResult {
                detail: Some(
                    "tensor_core_util_pct 44.60 ≥ 50 ❌ or dram_bw_pct_peak 52.70 ≤ 50 ❌".into(),
                ),
                ..repro::schema::GateResult::at_least("profile.bound", "tune-top1", 44.6, 50.0)
            });
        },
    );
    // The median with its range and count, and how far it lies from the harness p50.
    assert!(
        md.contains("| control | stage2-baseline | 40.91 (40.50–43.25, n=5) | −0.9% |"),
        "{md}"
    );
    assert!(
        md.contains("| stage5-ws-p1 | stage5-ws-p1 | 39.00 (38.50–39.75, n=5) | ⚠ +12.7% |"),
        "{md}"
    );
    // The speedup gate passes by the harness (1.193×) and fails by ncu (40.91 ÷ 39.00).
    assert!(
        md.contains("| 1.193× | ≥ 1.10× | ✅ | 1.049× ⚠ fails by ncu, passes by the harness |"),
        "{md}"
    );
    // The profile gates with what each check measured; a failed rule is a failed gate.
    let gates = md
        .split("### Profile (Nsight Compute)")
        .nth(1)
        .unwrap()
        .split("\n### ")
        .next()
        .unwrap();
    insta::assert_snapshot!("profile_gates", gates);
    assert!(
        md.contains("- profile bound (tune-top1): tensor_core_util_pct 44.60 ≥ 50 ❌ or dram_bw_pct_peak 52.70 ≤ 50 ❌"),
        "{md}"
    );
}
