//! A pipeline of two workloads: one part of the report each.

use super::*;
use repro::schema::RunStatus;

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
