//! The fixture scenarios rendered as snapshots, twice alike, and a template error.

use super::*;

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
