//! The ncu CSV parser and metric mapping on real Nsight Compute 2025.3.1 output captured on
//! an H100 (tests/fixtures/ncu/README.md says how each file was made), and on damaged copies.

use crate::skip;

use repro::ncu::metrics::{self, Arch, Field};
use repro::ncu::parse::{self, Page, ParseError};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const CSV_FIXTURES: &[&str] = &[
    "raw_metrics.csv",
    "raw_metrics_units_base.csv",
    "raw_default_sections.csv",
    "details_default.csv",
    "details_full.csv",
    "import_raw.csv",
    "import_raw_metrics.csv",
    "import_details.csv",
    "stage_mode.csv",
    "stage_mode_launches.csv",
    "baseline_calls_launches.csv",
    "two_kernels.csv",
    "unknown_metric.csv",
    "app_crash.txt",
];

fn functions(e: &parse::Export) -> Vec<&str> {
    e.launches.iter().map(|l| l.function_name()).collect()
}

fn summary(name: &str, launch: usize) -> repro::schema::NcuTarget {
    let e = parse::parse(&fixture(name)).unwrap();
    let l = &e.launches[launch];
    metrics::summarize(
        l,
        None,
        &[],
        metrics::TargetId {
            target: "t",
            variant: "v",
            kernel: l.function_name(),
        },
    )
}

#[test]
fn raw_page_with_program_output_and_five_launches() {
    let text = fixture("raw_metrics.csv");
    assert!(
        text.starts_with("app: starting"),
        "program text comes first"
    );
    let e = parse::parse(&text).unwrap();
    assert_eq!(e.page, Page::Raw);
    assert_eq!(
        functions(&e),
        [
            "fill_half",
            "fill_half",
            "wmma_gemm",
            "scale_add",
            "scale_add"
        ]
    );
    let wmma = &e.launches[2];
    assert_eq!(wmma.compute_capability.as_deref(), Some("9.0"));
    assert_eq!(wmma.get("launch__grid_size").unwrap().number(), Some(64.0));
    // Quoted numbers with thousands separators.
    let scale = &e.launches[3];
    assert_eq!(scale.get("launch__grid_size").unwrap().value, "16,384");
    assert_eq!(
        scale.get("launch__grid_size").unwrap().number(),
        Some(16384.0)
    );
    // Identity columns are not metrics.
    assert!(wmma.get("Kernel Name").is_none() && wmma.get("Block Size").is_none());
}

#[test]
fn named_fields_of_the_wmma_launch() {
    let t = summary("raw_metrics.csv", 2);
    assert_eq!(t.kernel_time_us, Some(22.976));
    assert_eq!(t.registers_per_thread, Some(32.0));
    assert_eq!(t.achieved_occupancy_pct, Some(24.77));
    assert_eq!(t.sm_util_pct, Some(4.95));
    assert_eq!(t.l2_hit_rate_pct, Some(89.26));
    assert_eq!(t.dram_bw_pct_peak, Some(1.37));
    // WMMA drives the tensor pipe; the all-MMA Hopper metric was used.
    assert_eq!(t.tensor_core_util_pct, Some(4.15));
    assert_eq!(
        t.metric_names["tensor_core_util_pct"],
        "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_active"
    );
    assert_eq!(t.raw["gpu__time_duration.sum"], "22,976 ns");
    let stalls: Vec<_> = t.top_stalls.iter().map(|s| s.reason.as_str()).collect();
    assert_eq!(stalls[0], "long_scoreboard");
    assert_eq!(t.top_stalls[0].pct, 87.98);
    assert_eq!(stalls.len(), 5);
}

#[test]
fn half_precision_fma_is_not_counted_as_tensor_core_work() {
    // fill_half's HFMA2 runs on Hopper's tensor pipe (sm__pipe_tensor_cycles_active 3.2%),
    // but it is no matrix multiply.
    let t = summary("raw_metrics.csv", 0);
    assert_eq!(t.tensor_core_util_pct, Some(0.0));
}

#[test]
fn percentages_above_100_are_kept() {
    let t = summary("raw_metrics_units_base.csv", 0);
    assert_eq!(t.achieved_occupancy_pct, Some(107.26));
    let t = summary("raw_metrics.csv", 1);
    assert_eq!(t.l2_hit_rate_pct, Some(102.39));
}

#[test]
fn stage_mode_export_has_the_one_profiled_launch() {
    let e = parse::parse(&fixture("stage_mode.csv")).unwrap();
    assert_eq!(functions(&e), ["scale_add"]);
    let t = summary("stage_mode.csv", 0);
    assert_eq!(t.kernel_time_us, Some(16.544));
    assert_eq!(t.registers_per_thread, Some(16.0));
    assert_eq!(t.achieved_occupancy_pct, Some(76.19));
    assert_eq!(t.dram_bw_pct_peak, Some(64.32));
    assert_eq!(t.l2_hit_rate_pct, Some(35.98));
}

#[test]
fn several_launches_of_one_kernel_give_medians_and_the_time_spread() {
    let e = parse::parse(&fixture("stage_mode_launches.csv")).unwrap();
    assert_eq!(functions(&e), ["scale_add"; 5]);
    let launches: Vec<&parse::Launch> = e.launches.iter().collect();
    let t = repro::ncu::launches::summarize_launches(
        &launches,
        None,
        &[],
        metrics::TargetId {
            target: "t",
            variant: "v",
            kernel: "scale_add",
        },
    );
    // 16,480 16,544 16,576 17,312 19,104 ns: the middle one, not the first (16.544).
    assert_eq!(t.kernel_time_us, Some(16.576));
    assert_eq!(t.kernel_time_us_min, Some(16.48));
    assert_eq!(t.kernel_time_us_max, Some(19.104));
    assert_eq!(t.launches, Some(5));
    // Every other metric is its own median: SM throughput 26.60 .. 30.84.
    assert_eq!(t.sm_util_pct, Some(30.61));
    assert_eq!(t.registers_per_thread, Some(16.0));
    assert_eq!(t.dram_bw_pct_peak, Some(64.32));
}

#[test]
fn two_kernels_in_one_file() {
    let e = parse::parse(&fixture("two_kernels.csv")).unwrap();
    assert_eq!(functions(&e), ["wmma_gemm", "scale_add", "scale_add"]);
    assert_eq!(e.launches[1].id, "1");
}

#[test]
fn details_page_long_format() {
    let e = parse::parse(&fixture("details_default.csv")).unwrap();
    assert_eq!(e.page, Page::Details);
    assert_eq!(e.launches.len(), 5);
    let t = summary("details_default.csv", 2);
    assert_eq!(t.kernel_time_us, Some(22.688));
    assert_eq!(t.registers_per_thread, Some(32.0));
    assert_eq!(t.achieved_occupancy_pct, Some(24.75));
    assert_eq!(t.dram_bw_pct_peak, Some(1.39));
    assert_eq!(
        t.metric_names["kernel_time_us"],
        "GPU Speed Of Light Throughput: Duration"
    );
    // The default sections show no L2 hit rate and no tensor pipe.
    assert_eq!(t.l2_hit_rate_pct, None);
    assert_eq!(t.tensor_core_util_pct, None);
    // The full set has the L2 hit rate in Memory Workload Analysis.
    let full = summary("details_full.csv", 0);
    assert_eq!(full.l2_hit_rate_pct, Some(88.69));
    assert_eq!(
        full.metric_names["l2_hit_rate_pct"],
        "Memory Workload Analysis: L2 Hit Rate"
    );
}

#[test]
fn imported_report_raw_page_uses_scaled_units() {
    let text = fixture("import_raw.csv");
    assert!(
        text.starts_with("\"ID\""),
        "an import has no program output"
    );
    let e = parse::parse(&text).unwrap();
    assert_eq!(functions(&e), ["wmma_gemm", "scale_add", "scale_add"]);
    assert!(e.launches[0].metrics.len() > 2000);
    let t = summary("import_raw.csv", 0);
    assert_eq!(
        e.launches[0].get("gpu__time_duration.sum").unwrap().unit,
        "us"
    );
    assert_eq!(t.kernel_time_us, Some(22.72));
    assert!(!t.top_stalls.is_empty());
}

#[test]
fn imported_report_details_page_carries_command_line_metrics() {
    let t = summary("import_details.csv", 0);
    // The `--metrics` rows have raw names, so the tensor pipe is read from them.
    assert_eq!(t.tensor_core_util_pct, Some(4.16));
    assert_eq!(t.metric_names["kernel_time_us"], "gpu__time_duration.sum");
    assert_eq!(t.top_stalls[0].reason, "long_scoreboard");
}

#[test]
fn raw_and_details_of_the_same_report_agree() {
    let raw = summary("import_raw.csv", 1);
    let det = parse::parse(&fixture("import_details.csv")).unwrap();
    let l = &det.launches[1];
    let sol = |m: &str| l.get(m).and_then(|m| m.number()).unwrap();
    assert_eq!(
        raw.registers_per_thread,
        Some(sol("Launch Statistics: Registers Per Thread"))
    );
    let occ = sol("Occupancy: Achieved Occupancy");
    assert!((raw.achieved_occupancy_pct.unwrap() - occ).abs() < 0.01);
    let dram = sol("GPU Speed Of Light Throughput: DRAM Throughput");
    assert!((raw.dram_bw_pct_peak.unwrap() - dram).abs() < 0.01);
}

#[test]
fn crashed_launch_has_a_row_without_values() {
    let e = parse::parse(&fixture("app_crash.txt")).unwrap();
    assert_eq!(
        functions(&e),
        ["fill_half", "fill_half", "wmma_gemm", "scale_add"]
    );
    assert_eq!(summary("app_crash.txt", 2).kernel_time_us, Some(22.688));
    let crashed = summary("app_crash.txt", 3);
    assert_eq!(crashed.kernel_time_us, None);
    assert!(crashed.raw.is_empty());
    let said = parse::ncu_messages(&fixture("app_crash.txt"));
    assert!(said.iter().any(|l| l.contains("LaunchFailed")), "{said:?}");
}

#[test]
fn unknown_requested_metric_is_simply_absent() {
    // `--metrics not__a_metric.sum`: ncu prints no warning, only the launch attributes.
    let e = parse::parse(&fixture("unknown_metric.csv")).unwrap();
    assert!(e.launches[2].get("not__a_metric.sum").is_none());
    let t = summary("unknown_metric.csv", 2);
    assert_eq!(t.registers_per_thread, Some(32.0));
    assert_eq!(t.kernel_time_us, None);
    assert_eq!(t.tensor_core_util_pct, None);
}

#[test]
fn no_kernel_profiled_is_a_clear_error() {
    let err = parse::parse(&fixture("no_kernel_matched.txt")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no ncu CSV header"), "{msg}");
    assert!(msg.contains("No kernels were profiled"), "{msg}");
}

#[test]
fn removed_units_row_is_named_with_its_line() {
    let text = fixture("stage_mode.csv");
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("\"ID\"")).unwrap();
    lines.remove(header + 1);
    let err = parse::parse(&lines.join("\n")).unwrap_err();
    assert!(
        matches!(err, ParseError::MissingUnitsRow { line, .. } if line == header + 2),
        "{err}"
    );
}

#[test]
fn header_only_has_no_launches() {
    let text = fixture("stage_mode.csv");
    let cut: Vec<&str> = text.lines().take(10).collect();
    assert_eq!(
        parse::parse(&cut.join("\n")).unwrap_err(),
        ParseError::NoLaunches
    );
}

/// Cut every fixture at many points: never a panic; a cut that still parses has no more
/// launches than the whole file, and (raw page) every launch keeps every column, so no
/// value can shift into another metric's place.
#[test]
fn truncations_of_every_fixture_never_panic_or_shift_columns() {
    for name in CSV_FIXTURES {
        let text = fixture(name);
        let full = parse::parse(&text).unwrap();
        let mut cuts: Vec<usize> = (0..=200).map(|i| text.len() * i / 200).collect();
        cuts.extend(text.match_indices('\n').map(|(i, _)| i));
        for cut in cuts {
            let Some(part) = text.get(..cut) else {
                continue;
            };
            match parse::parse(part) {
                Ok(e) => {
                    assert!(e.launches.len() <= full.launches.len(), "{name} @ {cut}");
                    if e.page == Page::Raw {
                        for (a, b) in e.launches.iter().zip(&full.launches) {
                            assert!(
                                a.metrics.keys().eq(b.metrics.keys()),
                                "{name} @ {cut}: columns changed"
                            );
                        }
                    }
                }
                Err(err) => assert!(!err.to_string().is_empty()),
            }
        }
    }
}

#[test]
fn a_row_cut_in_the_middle_is_an_error_naming_its_line() {
    let text = fixture("two_kernels.csv");
    let last_row_start = text.trim_end().rfind('\n').unwrap() + 1;
    let cut = &text[..last_row_start + 200];
    let err = parse::parse(cut).unwrap_err();
    assert!(
        matches!(
            err,
            ParseError::RowLength { line: 13, .. } | ParseError::UnterminatedQuote { line: 13 }
        ),
        "{err}"
    );
}

/// Every raw alias and stall metric of the table exists under that name in
/// `ncu --query-metrics --chip <chip>` (launch__ metrics are not listed there).
#[test]
fn alias_table_names_exist_on_their_chips() {
    for arch in Arch::ALL {
        let catalogue = fixture(&format!("query_metrics_{}.txt", arch.chip()));
        let listed = |base: &str| {
            catalogue
                .lines()
                .any(|l| l.split_whitespace().next() == Some(base))
        };
        let mut names: Vec<String> = Vec::new();
        for f in Field::ALL {
            names.extend(metrics::raw_aliases(f, arch).iter().map(|s| s.to_string()));
        }
        names.extend(metrics::request_list(Some(arch), &[]));
        let unchecked = |n: &str| n.starts_with("launch__");
        for name in names.iter().filter(|n| !unchecked(n)) {
            let base = name.split('.').next().unwrap();
            assert!(listed(base), "{name} is not a {} metric", arch.chip());
        }
    }
}

#[test]
fn tensor_pipe_names_differ_between_ada_and_hopper() {
    let ada = metrics::raw_aliases(Field::TensorCoreUtil, Arch::Ada)[0];
    let hopper = metrics::raw_aliases(Field::TensorCoreUtil, Arch::Hopper)[0];
    assert!(ada.starts_with("sm__pipe_tensor_cycles_active_v2"));
    assert!(hopper.starts_with("sm__pipe_tensor_type_hmma_hgmma_qgmma"));
    let gh100 = fixture("query_metrics_gh100.txt");
    let ad104 = fixture("query_metrics_ad104.txt");
    assert!(!gh100.contains("sm__pipe_tensor_cycles_active_v2"));
    assert!(!ad104.contains("sm__pipe_tensor_type_hmma_hgmma_qgmma"));
}

/// On a machine with a GPU, nvcc and ncu: profile the capture program with the stage's
/// metric list and check that every named field is read on this GPU's architecture.
#[test]
fn gpu_real_ncu_reads_every_field_on_this_gpu() {
    if std::env::var("REPRO_GPU_TESTS").as_deref() != Ok("1") {
        skip::skipped(
            skip::Need::Gpu,
            "set REPRO_GPU_TESTS=1 to profile a real kernel with ncu",
        );
        return;
    }
    let ncu = repro::ncu::find_ncu().expect("REPRO_GPU_TESTS=1 but no ncu found");
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncu/capture/app.cu");
    let built = std::process::Command::new("nvcc")
        .args(["-arch=native", "-o"])
        .arg(&app)
        .arg(&src)
        .status()
        .expect("nvcc must be on PATH");
    assert!(built.success());
    let out = std::process::Command::new(&ncu)
        .args([
            "--csv",
            "--page",
            "raw",
            "--clock-control",
            "none",
            "-k",
            "regex:^wmma_gemm$",
        ])
        .arg("--metrics")
        .arg(metrics::request_list(None, &[]).join(","))
        .arg(&app)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let e = parse::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let l = &e.launches[0];
    let t = metrics::summarize(
        l,
        None,
        &[],
        metrics::TargetId {
            target: "wmma",
            variant: "",
            kernel: l.function_name(),
        },
    );
    assert_eq!(
        t.metric_names.len(),
        Field::ALL.len(),
        "{:?}",
        t.metric_names
    );
    assert!(t.tensor_core_util_pct.unwrap() > 0.0);
    assert!(!t.top_stalls.is_empty());
}
