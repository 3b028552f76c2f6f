//! What the charts show, as data, and their SVG.

use super::*;
use repro::report::charts::{self, BarKind};

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
