//! GPU test (`REPRO_GPU_TESTS=1`; otherwise it prints a "skipped:" line): the profile stage's
//! `baselines:` for real — one ncu process runs the PyTorch SDPA baselines' three calls, each
//! five times in its own NVTX range, on two shapes, beside the best variant off the primary,
//! and the report's both ratios. Needs python3 with torch (CUDA) and ncu with access to the counters.

mod common;

use common::*;
use repro::schema::{MetricSet, NcuSummary, RunStatus};
use std::path::Path;

/// The shipped control on two shapes, both SDPA baselines timed and profiled on both.
const PIPELINE: &str = r#"
version: 1
workload:
  op: sdpa_fp8
  shapes:
    small:   {B: 1, H: 2, S: 128, D: 64}
    mission: {B: 2, H: 8, S: 512, D: 64}
  primary: small
  seeds: [0]
  reference: {source: kernels/reference.cu, entry: sdpa_reference_f32}
kernels:
  sdpa_fp8: {source: kernels/sdpa_fp8.cu, entry: sdpa_fp8_fwd}
variants:
  stage2-baseline: {kernel: sdpa_fp8, defines: {USE_CP_ASYNC: 1, USE_WMMA_PV: 1, USE_WARP_SPECIALIZATION: 0}}
control: stage2-baseline
stages:
  build: {uses: build}
  baselines:
    uses: cmd
    run: [python3, kernels/baselines/torch_baselines.py, --workload, sdpa_fp8, --out, artifacts/bench/baselines, --max-time, "1"]
    outs: [artifacts/bench/baselines/torch-sdpa-default.json, artifacts/bench/baselines/torch-sdpa-best.json]
    gpu: true
  bench: {uses: bench, needs: [build, baselines], warmup: 5, iters: 20}
  ncu-profile:
    uses: profile
    needs: [bench]
    targets: [control]
    clock_control: none
    baselines:
      torch-sdpa-best:    {run: [python3, kernels/baselines/torch_baselines.py], workload: sdpa_fp8, shapes: [small, mission]}
      torch-sdpa-default: {run: [python3, kernels/baselines/torch_baselines.py], workload: sdpa_fp8, shapes: [mission]}
  summarize: {uses: summarize, needs: [bench, ncu-profile]}
"#;

#[test]
fn gpu_profile_stage_profiles_the_baselines_calls() {
    if !gpu_tests_enabled("gpu_profile_stage_profiles_the_baselines_calls") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    gpu_project(
        root,
        &[
            "kernels/sdpa_fp8.cu",
            "kernels/reference.cu",
            "kernels/baselines/torch_baselines.py",
            "kernels/baselines/baselines_common.py",
            "kernels/baselines/torch_sdpa.py",
            "kernels/baselines/torch_rmsnorm.py",
        ],
        PIPELINE,
    );
    let (status, text) = run_repro(root, &["run", "-q"]);
    assert!(status.success(), "repro run:\n{text}");
    let summary: NcuSummary = serde_json::from_str(
        &std::fs::read_to_string(root.join("artifacts/ncu/summary.json")).unwrap(),
    )
    .unwrap();
    let record = |label: &str| {
        summary
            .targets
            .iter()
            .find(|t| t.target == label)
            .unwrap_or_else(|| panic!("no record {label}: {summary:#?}"))
    };
    let mut processes = std::collections::BTreeSet::new();
    let mut time_processes = std::collections::BTreeSet::new();
    for (label, range) in [
        (
            "torch-sdpa-best@small",
            "repro-profile.torch-sdpa-best.small",
        ),
        (
            "torch-sdpa-best@mission",
            "repro-profile.torch-sdpa-best.mission",
        ),
        (
            "torch-sdpa-default@mission",
            "repro-profile.torch-sdpa-default.mission",
        ),
    ] {
        let t = record(label);
        assert_eq!(t.status, RunStatus::Ok, "{label}: {:?}", t.reason);
        // Where PyTorch's own choice is the backend torch-sdpa-best runs (cuDNN on an H100 or
        // H200), the default's call is not run again: it has the best's profile, saying so.
        let repeated = t.reason.as_deref().is_some_and(|r| {
            r.starts_with("profiled once as torch-sdpa-best@mission, the same kernel")
        });
        let range = if repeated {
            let best = record("torch-sdpa-best@mission");
            assert_eq!(t.kernel_time_us, best.kernel_time_us, "{label}");
            "repro-profile.torch-sdpa-best.mission"
        } else {
            range
        };
        eprintln!(
            "{label}: {}",
            t.reason.as_deref().unwrap_or("profiled itself")
        );
        assert!(!t.kernels.is_empty(), "{label}: no kernels");
        // The median of five profiled calls, within their range.
        assert_eq!(t.launches, Some(5), "{label}");
        let time = t.kernel_time_us.unwrap();
        let (lo, hi) = (t.kernel_time_us_min.unwrap(), t.kernel_time_us_max.unwrap());
        assert!(
            time > 0.0 && lo <= time && time <= hi,
            "{label}: {time} outside {lo}..{hi}"
        );
        assert!(t.achieved_occupancy_pct.is_some(), "{label}");
        // A baseline's call gets the one-pass list: no SM throughput, no stalls.
        assert_eq!(t.metric_set, Some(MetricSet::OnePass), "{label}");
        assert!(
            t.sm_util_pct.is_none() && t.top_stalls.is_empty(),
            "{label}"
        );
        // Its CSV parses alone; ncu's NVTX column names the call's own range.
        let csv = std::fs::read_to_string(root.join(format!("artifacts/ncu/{label}.csv"))).unwrap();
        let launches = repro::ncu::parse::parse(&csv).unwrap().launches;
        assert_eq!(launches.len(), 5 * t.kernels.len(), "{label}");
        assert!(
            csv.contains(&format!(":{range}:")),
            "{label}: no range {range} in\n{csv}"
        );
        processes.insert(process_id(&csv));
        // The kernel time is the time pass's: the median of its calls' summed kernel times,
        // each call's kernels in its own range, in a process of its own.
        let path = root.join(format!("artifacts/ncu/{label}.time.csv"));
        let timed = std::fs::read_to_string(path).unwrap();
        let alone = repro::ncu::parse::parse(&timed).unwrap().launches;
        assert_eq!(alone.len(), 5 * t.kernels.len(), "{label}: the time pass");
        let mut calls: Vec<f64> = alone
            .chunks(t.kernels.len())
            .map(|call| {
                call.iter()
                    .map(|l| l.get("gpu__time_duration.sum").unwrap().number().unwrap())
                    .sum::<f64>()
            })
            .collect();
        calls.sort_by(f64::total_cmp);
        let unit = alone[0].get("gpu__time_duration.sum").unwrap().unit.clone();
        let scale = if unit == "ns" { 1e-3 } else { 1.0 };
        assert!(
            (calls[2] * scale - time).abs() < 1e-3,
            "{label}: {time} µs is not the time pass's median {:?} {unit}",
            calls
        );
        time_processes.insert(process_id(&timed));
        eprintln!(
            "{label}: {time:.2} µs = {}",
            t.kernels
                .iter()
                .map(|k| format!("{} {:.2}", k.name, k.time_us.unwrap()))
                .collect::<Vec<_>>()
                .join(" + ")
        );
    }
    // The three calls ran in one python process under one ncu, per pass.
    assert_eq!(processes.len(), 1, "{processes:?}");
    assert_eq!(time_processes.len(), 1, "{time_processes:?}");
    assert!(processes.is_disjoint(&time_processes));
    // The control is the fastest (only) variant on the primary: the full list.
    let control = record("control");
    assert_eq!(control.metric_set, Some(MetricSet::Full));
    assert!(control.sm_util_pct.is_some() && !control.top_stalls.is_empty());
    // The best (only) variant off the primary, for the ncu ratio on `mission`.
    let ours = record("stage2-baseline@mission");
    assert_eq!(ours.status, RunStatus::Ok, "{:?}", ours.reason);
    assert_eq!(
        ours.launches,
        Some(5),
        "five profiled launches of the kernel"
    );
    assert_eq!(ours.shape.as_deref(), Some("mission"));
    // The report gives both ratios on both shapes.
    let report = std::fs::read_to_string(root.join("reports/summary.md")).unwrap();
    let section = report
        .split("### Baselines by harness and by ncu")
        .nth(1)
        .expect("the section");
    for shape in ["small", "mission"] {
        let row = section
            .lines()
            .find(|l| l.starts_with(&format!("| torch-sdpa-best | {shape} |")))
            .unwrap_or_else(|| panic!("no row for {shape}:\n{section}"));
        assert_eq!(row.matches("× (").count(), 2, "{row}");
    }
    keep_for_fixtures(root);
}

/// The `Process ID` of the first launch of a raw-page CSV (its second column).
fn process_id(csv: &str) -> String {
    let row = csv
        .lines()
        .skip_while(|l| !l.starts_with("\"ID\","))
        .filter(|l| l.starts_with('"'))
        .nth(2)
        .expect("a launch row");
    row.split("\",\"").nth(1).expect("a Process ID").to_string()
}

/// With `REPRO_KEEP_NCU=DIR`, copy the baselines' CSVs there (real NVTX-filtered captures
/// for tests/fixtures/ncu).
fn keep_for_fixtures(root: &Path) {
    let Some(dir) = std::env::var_os("REPRO_KEEP_NCU") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(root.join("artifacts/ncu")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), Path::new(&dir).join(e.file_name())).unwrap();
    }
}
