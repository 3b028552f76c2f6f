//! The green results edited: baseline ratios, ncu medians and the profile gate they judge.

use super::*;
use repro::schema::RunStatus;

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

/// The green report with the profile stage listing baseline `torch_sdpa` on `shapes` (e.g.
/// `mission, long`), the best variant's profile on the primary, and `edit`'s changes.
fn report_with_sdpa_baseline(shapes: &str, edit: impl FnOnce(&mut Artifacts)) -> String {
    let to = format!("targets: [control, topk], baselines: {{torch_sdpa: {{run: [python3, b.py], workload: sdpa_fp8, shapes: [{shapes}]}}}}}}");
    green_report_with("targets: [control, topk]}", &to, |artifacts| {
        // The best variant on the primary (a record from before `shape` existed).
        artifacts.ncu.as_mut().unwrap().targets.push(ncu_record(
            "stage5-ws-p1",
            "stage5-ws-p1",
            None,
            &[("sdpa_fp8_fwd", 36.0)],
        ));
        edit(artifacts);
    })
}

#[test]
fn every_baseline_row_gives_both_ratios_or_says_why_not() {
    let md = report_with_sdpa_baseline("mission, long", |artifacts| {
        let ncu = artifacts.ncu.as_mut().unwrap();
        // The baseline's call on the primary (two kernels), and on `long` a skipped call.
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

/// A baseline call the script did not run again (it repeats another's): its row names whose
/// profile it is.
#[test]
fn a_baseline_call_profiled_as_another_says_so_in_its_row() {
    let md = report_with_sdpa_baseline("mission", |artifacts| {
        artifacts
            .ncu
            .as_mut()
            .unwrap()
            .targets
            .push(repro::schema::NcuTarget {
                reason: Some(
                    "profiled once as torch_naive@mission, the same kernel on the same inputs: \
                 PyTorch's own choice on mission is the backend torch_naive runs"
                        .into(),
                ),
                ..ncu_record(
                    "torch_sdpa@mission",
                    "torch_sdpa",
                    Some("mission"),
                    &[("k", 28.0)],
                )
            });
    });
    assert!(
        md.contains(
            "`k` 28.00 µs (profiled once as torch_naive@mission, the same kernel on the same inputs) |"
        ),
        "{md}"
    );
    // And its row of the profile table.
    let row = md
        .lines()
        .find(|l| l.starts_with("| torch_sdpa@mission |"))
        .unwrap_or_else(|| panic!("no profile row: {md}"));
    assert!(
        row.ends_with(
            "| ✅ ok: profiled once as torch_naive@mission, the same kernel on the same inputs |"
        ),
        "{row}"
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
