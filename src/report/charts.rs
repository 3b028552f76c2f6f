//! The report's SVG charts, drawn with plotters: p50 per variant and shape (baselines
//! included), and the tune's best-so-far against trials. Fixed sizes, fonts and colours,
//! and inputs in a fixed order, so the same artifacts give byte-identical SVGs.

use super::artifacts::{Artifacts, TuneData};
use super::context::{best_so_far, shape_p50, shapes_in_order};
use crate::schema::{BenchFile, BenchResult};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

const FONT: &str = "sans-serif";
const WIDTH: u32 = 860;
const BASELINE: RGBColor = RGBColor(150, 150, 150);
const VARIANT: RGBColor = RGBColor(72, 120, 168);
const BEST: RGBColor = RGBColor(46, 139, 87);
const TUNED: RGBColor = RGBColor(224, 138, 46);
const FAIL: RGBColor = RGBColor(200, 40, 40);
const CONTROL: RGBColor = RGBColor(110, 60, 150);

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// What a bar stands for (its colour).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BarKind {
    Baseline,
    Variant,
    Best,
    Tuned,
}

/// One bar: a variant or baseline on one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub kind: BarKind,
    pub p50: Option<f64>,
    /// Widest ci95 half-width over the seeds.
    pub ci95: Option<f64>,
}

/// The bars of one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapePanel {
    pub title: String,
    pub bars: Vec<Bar>,
}

/// One panel per shape (in the order the results list them), bars in headline order:
/// baselines, then variants (the control first), then the tune's best.
pub fn p50_panels(a: &Artifacts, control: Option<&str>, best: Option<&str>) -> Vec<ShapePanel> {
    let baselines = a.baselines.as_deref().unwrap_or_default();
    let mut variants: Vec<&BenchFile> = a.benches.as_deref().unwrap_or_default().iter().collect();
    variants.sort_by_key(|f| (Some(f.name.as_str()) != control, f.name.clone()));
    let elite = a.tune.as_ref().and_then(|t| t.elite.first());
    shapes_in_order(baselines.iter().chain(variants.iter().copied()))
        .into_iter()
        .map(|shape| {
            let bar = |name: &str, kind, results: &[BenchResult]| Bar {
                name: name.to_string(),
                kind,
                p50: shape_p50(results, &shape),
                ci95: results
                    .iter()
                    .filter(|r| r.shape == shape)
                    .filter_map(|r| r.ci95_us)
                    .max_by(f64::total_cmp),
            };
            let mut bars: Vec<Bar> = baselines
                .iter()
                .map(|b| bar(&b.name, BarKind::Baseline, &b.results))
                .collect();
            for v in &variants {
                let kind = if Some(v.name.as_str()) == best {
                    BarKind::Best
                } else {
                    BarKind::Variant
                };
                bars.push(bar(&v.name, kind, &v.results));
            }
            // The tuner times the primary shape only; elsewhere its records check correctness.
            let timed_here = |e: &&crate::schema::EliteEntry| {
                e.bench
                    .iter()
                    .any(|r| r.shape == shape && r.p50_us.is_some())
            };
            if let Some(e) = elite.filter(timed_here) {
                bars.push(bar(
                    &format!("tune-top{}", e.rank),
                    BarKind::Tuned,
                    &e.bench,
                ));
            }
            let dims = variants
                .iter()
                .copied()
                .chain(baselines.iter())
                .flat_map(|f| f.results.iter())
                .find(|r| r.shape == shape)
                .map(|r| format!(" (B={} H={} S={} D={})", r.B, r.H, r.S, r.D))
                .unwrap_or_default();
            ShapePanel {
                title: format!("{shape}{dims}"),
                bars,
            }
        })
        .collect()
}

/// Horizontal bars of p50 per shape, one panel per shape stacked vertically.
pub fn p50_chart(panels: &[ShapePanel]) -> anyhow::Result<String> {
    if panels.is_empty() {
        return Ok(message_chart("p50 per shape", "no bench results"));
    }
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| 70 + 26 * p.bars.len() as u32)
        .collect();
    let legend_h = 56;
    let total = legend_h + heights.iter().sum::<u32>();
    let mut svg = String::new();
    draw_p50(&mut svg, panels, &heights, legend_h, total)
        .map_err(|e| anyhow::anyhow!("drawing the p50 chart: {e}"))?;
    Ok(svg)
}

fn draw_p50(
    svg: &mut String,
    panels: &[ShapePanel],
    heights: &[u32],
    legend_h: u32,
    total: u32,
) -> DrawResult {
    let root = SVGBackend::with_string(svg, (WIDTH, total)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, mut rest) = root.split_vertically(legend_h);
    head.draw(&Text::new(
        "p50 latency per shape (µs, lower is better; whiskers: widest ci95 over seeds)",
        (12, 8),
        (FONT, 16).into_font().color(&BLACK),
    ))?;
    let legend = [
        ("baseline", BASELINE),
        ("variant", VARIANT),
        ("best variant", BEST),
        ("tune best", TUNED),
    ];
    for (i, (label, color)) in legend.iter().enumerate() {
        let x = 12 + 150 * i as i32;
        head.draw(&Rectangle::new([(x, 34), (x + 14, 46)], color.filled()))?;
        head.draw(&Text::new(
            *label,
            (x + 20, 34),
            (FONT, 13).into_font().color(&BLACK),
        ))?;
    }
    for (panel, h) in panels.iter().zip(heights) {
        let (area, below) = rest.split_vertically(*h);
        rest = below;
        draw_panel(&area, panel)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    p: &ShapePanel,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = p.bars.len() as i32;
    let xmax = p
        .bars
        .iter()
        .filter_map(|b| b.p50.map(|v| v + b.ci95.unwrap_or(0.0)))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.18;
    let names: Vec<String> = p.bars.iter().map(|b| b.name.clone()).collect();
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 14))
        .margin_left(12)
        .margin_right(24)
        .margin_bottom(6)
        .x_label_area_size(28)
        .y_label_area_size(150)
        .build_cartesian_2d(0.0..xmax, (0..n).into_segmented())?;
    // Row i of the panel sits at segment n-1-i, so the first bar is on top.
    let row = |i: usize| n - 1 - i as i32;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_labels(6)
        .x_label_formatter(&|x| format!("{x:.1}"))
        .y_label_formatter(&|y| match y {
            SegmentValue::CenterOf(v) => {
                names.get((n - 1 - v) as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        })
        .label_style((FONT, 12))
        .draw()?;
    for (i, b) in p.bars.iter().enumerate() {
        let y = row(i);
        let color = match b.kind {
            BarKind::Baseline => BASELINE,
            BarKind::Variant => VARIANT,
            BarKind::Best => BEST,
            BarKind::Tuned => TUNED,
        };
        let Some(v) = b.p50 else {
            chart.draw_series(std::iter::once(
                EmptyElement::at((0.0, SegmentValue::CenterOf(y)))
                    + Text::new(
                        "n/a (no valid result)",
                        (4, -6),
                        (FONT, 12).into_font().color(&FAIL),
                    ),
            ))?;
            continue;
        };
        let mut rect = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(y)),
                (v, SegmentValue::Exact(y + 1)),
            ],
            color.filled(),
        );
        rect.set_margin(4, 4, 0, 0);
        chart.draw_series(std::iter::once(rect))?;
        let ci = b.ci95.unwrap_or(0.0);
        if ci > 0.0 {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![
                    (v - ci, SegmentValue::CenterOf(y)),
                    (v + ci, SegmentValue::CenterOf(y)),
                ],
                BLACK.stroke_width(1),
            )))?;
        }
        chart.draw_series(std::iter::once(
            EmptyElement::at((v + ci, SegmentValue::CenterOf(y)))
                + Text::new(
                    format!("{v:.2}"),
                    (6, -6),
                    (FONT, 12).into_font().color(&BLACK),
                ),
        ))?;
    }
    Ok(())
}

/// Valid trials as points, the best-so-far as a step line, invalid trials as red crosses
/// along the bottom, and the control's p50 as a reference line.
pub fn tune_chart(tune: &TuneData, control: Option<(&str, f64)>) -> anyhow::Result<String> {
    let valid: Vec<(f64, f64)> = tune
        .trials
        .iter()
        .filter(|t| t.status == "ok")
        .filter_map(|t| {
            t.p50_us
                .filter(|p| p.is_finite())
                .map(|p| (f64::from(t.trial), p))
        })
        .collect();
    if valid.is_empty() {
        return Ok(message_chart("tune: best p50 so far", "no valid trial"));
    }
    let mut svg = String::new();
    draw_tune(&mut svg, tune, &valid, control)
        .map_err(|e| anyhow::anyhow!("drawing the tune chart: {e}"))?;
    Ok(svg)
}

fn draw_tune(
    svg: &mut String,
    tune: &TuneData,
    valid: &[(f64, f64)],
    control: Option<(&str, f64)>,
) -> DrawResult {
    let root = SVGBackend::with_string(svg, (WIDTH, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let last = tune.trials.iter().map(|t| t.trial).max().unwrap_or(0);
    let ys = valid.iter().map(|p| p.1).chain(control.map(|c| c.1));
    let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(l, h), y| (l.min(y), h.max(y)));
    let pad = ((hi - lo) * 0.08).max(hi * 0.02);
    let y0 = (lo - pad * 2.0).max(0.0);
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "tune: p50 per trial and best so far ({} trials)",
                tune.trials.len()
            ),
            (FONT, 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        // Head room above the highest point for the legend.
        .build_cartesian_2d(-0.5..(f64::from(last) + 0.5), y0..(hi + pad * 4.0))?;
    chart
        .configure_mesh()
        .x_desc("trial")
        .y_desc("p50 (µs)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;
    chart
        .draw_series(
            valid
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, VARIANT.mix(0.6).filled())),
        )?
        .label("valid trial")
        .legend(|(x, y)| Circle::new((x + 8, y), 3, VARIANT.filled()));
    let invalid: Vec<f64> = tune
        .trials
        .iter()
        .filter(|t| t.status != "ok")
        .map(|t| f64::from(t.trial))
        .collect();
    if !invalid.is_empty() {
        let y = y0 + pad * 0.6;
        chart
            .draw_series(
                invalid
                    .iter()
                    .map(|&x| Cross::new((x, y), 4, FAIL.stroke_width(2))),
            )?
            .label("invalid trial")
            .legend(|(x, y)| Cross::new((x + 8, y), 4, FAIL.stroke_width(2)));
    }
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for (trial, best) in best_so_far(tune) {
        if let Some(b) = best {
            if let Some(&(_, prev)) = steps.last() {
                steps.push((f64::from(trial), prev));
            }
            steps.push((f64::from(trial), b));
        }
    }
    chart
        .draw_series(LineSeries::new(steps, BEST.stroke_width(2)))?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BEST.stroke_width(2)));
    if let Some((name, c)) = control {
        chart
            .draw_series(LineSeries::new(
                vec![(-0.5, c), (f64::from(last) + 0.5, c)],
                CONTROL.stroke_width(2),
            ))?
            .label(format!("control {name} ({c:.2} µs)"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], CONTROL.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 12))
        .draw()?;
    root.present()?;
    Ok(())
}

/// A small chart that only says why there is nothing to draw.
pub fn message_chart(title: &str, message: &str) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 80)).into_drawing_area();
        // Drawing text on an in-memory SVG cannot fail.
        let _ = root.fill(&WHITE);
        let _ = root.draw(&Text::new(
            format!("{title}: {message}"),
            (12, 30),
            (FONT, 16).into_font().color(&BLACK),
        ));
        let _ = root.present();
    }
    svg
}
