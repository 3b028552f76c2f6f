//! The report's SVG charts, drawn with plotters: p50 per variant and shape (baselines
//! included), and the tune's best-so-far against trials. Fixed sizes, fonts and colours,
//! and inputs in a fixed order, so the same artifacts give byte-identical SVGs. What a
//! chart shows is computed first ([`p50_panels`], [`tune_series`]) and tested as data.

use super::artifacts::Artifacts;
use super::artifacts::TuneData;
use super::context::best_so_far;
use super::context::shape_p50;
use super::context::shapes_in_order;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use repro_schema::BenchFile;
use repro_schema::BenchResult;
use repro_schema::RunStatus;
use repro_schema::TrialStatus;

const FONT: &str = "sans-serif";
const WIDTH: u32 = 860;
const BASELINE: RGBColor = RGBColor(150, 150, 150);
const VARIANT: RGBColor = RGBColor(72, 120, 168);
const BEST: RGBColor = RGBColor(46, 139, 87);
const TUNED: RGBColor = RGBColor(224, 138, 46);
const FAIL: RGBColor = RGBColor(200, 40, 40);
const CONTROL: RGBColor = RGBColor(110, 60, 150);
const MUTED: RGBColor = RGBColor(110, 110, 110);

/// The tune chart: the latency plot above, the strip of invalid trials below it.
pub const TUNE_PLOT_HEIGHT: u32 = 380;
const TUNE_STRIP_HEIGHT: u32 = 84;

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// What a bar stands for (its colour).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BarKind {
    Baseline,
    Variant,
    /// The fastest variant on this panel's shape among those correct on it.
    Fastest,
    Tuned,
}

/// One bar: a variant or baseline on one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub name: String,
    pub kind: BarKind,
    /// The report's ★ variant (best on the primary shape): marked on every panel.
    pub star: bool,
    /// Median over seeds of the per-seed p50.
    pub p50: Option<f64>,
    /// Whiskers: the lowest per-seed min and the highest per-seed p90.
    pub spread: Option<(f64, f64)>,
    /// Every run on this shape passed the correctness check.
    pub correct: bool,
    /// Why there is no bar: `not measured`, with `(skipped)` or `(run failed)`.
    pub missing: Option<String>,
}

/// The bars of one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapePanel {
    pub title: String,
    pub bars: Vec<Bar>,
}

impl ShapePanel {
    fn measured(&self) -> bool {
        self.bars.iter().any(|b| b.p50.is_some())
    }
}

/// A bar from the results of one shape.
fn bar(name: &str, kind: BarKind, results: &[BenchResult], shape: &str) -> Bar {
    let here: Vec<&BenchResult> = results.iter().filter(|r| r.shape == shape).collect();
    let ok = || here.iter().filter(|r| r.status.is_ok());
    let lo = ok().filter_map(|r| r.min_us).min_by(f64::total_cmp);
    let hi = ok().filter_map(|r| r.p90_us).max_by(f64::total_cmp);
    let p50 = shape_p50(results, shape);
    let missing = p50.is_none().then(|| {
        if here.iter().any(|r| r.status == RunStatus::Failed) {
            "not measured (run failed)".to_string()
        } else if !here.is_empty() && here.iter().all(|r| r.status == RunStatus::Skipped) {
            "not measured (skipped)".to_string()
        } else {
            "not measured".to_string()
        }
    });
    Bar {
        name: name.to_string(),
        kind,
        star: false,
        p50,
        spread: lo.zip(hi),
        correct: !here.is_empty()
            && here
                .iter()
                .filter(|r| r.status != RunStatus::Skipped)
                .all(|r| r.status.is_ok() && r.correctness_pass == Some(true)),
        missing,
    }
}

/// Which variants a p50 chart marks, and how it names what it shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Marks<'a> {
    pub control: Option<&'a str>,
    /// The report's ★ variant.
    pub best: Option<&'a str>,
    /// The folder of the tune whose best is shown (`tune`: its bar is `tune-top1`).
    pub tuned: &'a str,
    /// The workload's dimensions, in the order a panel's title lists them.
    pub dims: &'a [String],
}

/// One panel per shape (in the order the results list them), bars in headline order:
/// baselines, then variants (the control first), then the tune's best. On each panel the
/// fastest variant correct on that shape is [`BarKind::Fastest`]; `best` (the report's ★,
/// judged on the primary shape) is starred on every panel.
pub fn p50_panels(a: &Artifacts, marks: Marks) -> Vec<ShapePanel> {
    let Marks {
        control,
        best,
        tuned,
        dims: order,
    } = marks;
    let baselines = a.baselines.as_deref().unwrap_or_default();
    let mut variants: Vec<&BenchFile> = a.benches.as_deref().unwrap_or_default().iter().collect();
    variants.sort_by_key(|f| (Some(f.name.as_str()) != control, f.name.clone()));
    let elite = a.tune.as_ref().and_then(|t| t.elite.first());
    shapes_in_order(baselines.iter().chain(variants.iter().copied()))
        .into_iter()
        .map(|shape| {
            let mut bars: Vec<Bar> = baselines
                .iter()
                .map(|b| bar(&b.name, BarKind::Baseline, &b.results, &shape))
                .collect();
            for v in &variants {
                let mut b = bar(&v.name, BarKind::Variant, &v.results, &shape);
                b.star = Some(v.name.as_str()) == best;
                bars.push(b);
            }
            let fastest = bars
                .iter()
                .enumerate()
                .filter(|(_, b)| b.kind == BarKind::Variant && b.correct)
                .filter_map(|(i, b)| b.p50.map(|p| (i, p)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map(|(i, _)| i);
            if let Some(i) = fastest {
                bars[i].kind = BarKind::Fastest;
            }
            // The tuner times the primary shape only; elsewhere its records check correctness.
            let timed_here = |e: &&repro_schema::EliteEntry| {
                e.bench
                    .iter()
                    .any(|r| r.shape == shape && r.p50_us.is_some())
            };
            if let Some(e) = elite.filter(timed_here) {
                bars.push(bar(
                    &format!("{tuned}-top{}", e.rank),
                    BarKind::Tuned,
                    &e.bench,
                    &shape,
                ));
            }
            let dims = variants
                .iter()
                .copied()
                .chain(baselines.iter())
                .flat_map(|f| f.results.iter())
                .find(|r| r.shape == shape)
                .map(|r| format!(" ({})", dims_text(&r.dims, order)))
                .unwrap_or_default();
            ShapePanel {
                title: format!("{shape}{dims}"),
                bars,
            }
        })
        .collect()
}

/// `B=2 H=8 S=512 D=64`: the dimensions in `order` (then any others, sorted).
pub fn dims_text(dims: &std::collections::BTreeMap<String, i64>, order: &[String]) -> String {
    let named = order.iter().filter_map(|d| dims.get(d).map(|v| (d, v)));
    let rest = dims.iter().filter(|(d, _)| !order.contains(d));
    named
        .chain(rest)
        .map(|(d, v)| format!("{d}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Horizontal bars of p50 per shape, one panel per shape stacked vertically.
pub fn p50_chart(panels: &[ShapePanel], primary: &str) -> anyhow::Result<String> {
    if !panels.iter().any(ShapePanel::measured) {
        return Ok(message_chart(
            "p50 per shape",
            "nothing measured (the report says why)",
        ));
    }
    let heights: Vec<u32> = panels
        .iter()
        .map(|p| 62 + 26 * p.bars.len() as u32)
        .collect();
    let legend_h = 78;
    let total = legend_h + heights.iter().sum::<u32>();
    let mut svg = String::new();
    draw_p50(&mut svg, panels, primary, &heights, legend_h, total)
        .map_err(|e| anyhow::anyhow!("drawing the p50 chart: {e}"))?;
    Ok(svg)
}

fn draw_p50(
    svg: &mut String,
    panels: &[ShapePanel],
    primary: &str,
    heights: &[u32],
    legend_h: u32,
    total: u32,
) -> DrawResult {
    let root = SVGBackend::with_string(svg, (WIDTH, total)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, mut rest) = root.split_vertically(legend_h);
    head.draw(&Text::new(
        "p50 latency per shape (µs, lower is better): bar = median over seeds, \
         whiskers = lowest min to highest p90 over seeds",
        (12, 8),
        (FONT, 14).into_font().color(&BLACK),
    ))?;
    let legend = [
        ("baseline", BASELINE),
        ("variant", VARIANT),
        ("fastest correct variant on this shape", BEST),
        ("tune best", TUNED),
    ];
    let mut x = 12;
    for (label, color) in legend {
        head.draw(&Rectangle::new([(x, 32), (x + 14, 44)], color.filled()))?;
        head.draw(&Text::new(
            label,
            (x + 20, 32),
            (FONT, 13).into_font().color(&BLACK),
        ))?;
        x += 34 + 7 * label.len() as i32;
    }
    head.draw(&Text::new(
        format!("★ = the report's best variant (fastest correct on the primary shape, {primary})"),
        (12, 54),
        (FONT, 13).into_font().color(&BLACK),
    ))?;
    for (panel, h) in panels.iter().zip(heights) {
        let (area, below) = rest.split_vertically(*h);
        rest = below;
        draw_panel(&area, panel)?;
    }
    root.present()?;
    Ok(())
}

fn bar_color(kind: BarKind) -> RGBColor {
    match kind {
        BarKind::Baseline => BASELINE,
        BarKind::Variant => VARIANT,
        BarKind::Fastest => BEST,
        BarKind::Tuned => TUNED,
    }
}

/// The discrete y range of a panel of `n` bars. A discrete range `0..k` holds k + 1
/// values, each a row: `0..n-1` gives one row per bar and no empty slot (a single bar
/// gets two rows, one empty, rather than a range of zero width).
fn rows(n: i32) -> std::ops::Range<i32> {
    0..(n - 1).max(1)
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
        .filter_map(|b| b.spread.map(|s| s.1).or(b.p50))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.22;
    let names: Vec<String> = p
        .bars
        .iter()
        .map(|b| {
            if b.star {
                format!("{} ★", b.name)
            } else {
                b.name.clone()
            }
        })
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, (FONT, 14))
        .margin_left(12)
        .margin_right(24)
        .margin_bottom(6)
        .x_label_area_size(28)
        .y_label_area_size(170)
        .build_cartesian_2d(0.0..xmax, rows(n).into_segmented())?;
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
        let Some(v) = b.p50 else {
            let why = b.missing.as_deref().unwrap_or("not measured");
            chart.draw_series(std::iter::once(
                EmptyElement::at((0.0, SegmentValue::CenterOf(y)))
                    + Text::new(
                        why.to_string(),
                        (4, -6),
                        (FONT, 12).into_font().color(&MUTED),
                    ),
            ))?;
            continue;
        };
        let mut rect = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(y)),
                (v, SegmentValue::Exact(y + 1)),
            ],
            bar_color(b.kind).filled(),
        );
        rect.set_margin(4, 4, 0, 0);
        chart.draw_series(std::iter::once(rect))?;
        let mut end = v;
        if let Some((lo, hi)) = b.spread {
            end = hi.max(v);
            let whisker = BLACK.stroke_width(2);
            let cap = |x: f64| {
                EmptyElement::at((x, SegmentValue::CenterOf(y)))
                    + PathElement::new(vec![(0, -6), (0, 6)], whisker)
            };
            chart.draw_series(std::iter::once(PathElement::new(
                vec![
                    (lo, SegmentValue::CenterOf(y)),
                    (hi, SegmentValue::CenterOf(y)),
                ],
                whisker,
            )))?;
            chart.draw_series([cap(lo), cap(hi)])?;
        }
        let label = if b.correct {
            format!("{v:.2}")
        } else {
            format!("{v:.2} (incorrect)")
        };
        let color = if b.correct { BLACK } else { FAIL };
        chart.draw_series(std::iter::once(
            EmptyElement::at((end, SegmentValue::CenterOf(y)))
                + Text::new(label, (6, -6), (FONT, 12).into_font().color(&color)),
        ))?;
    }
    Ok(())
}

/// What the tune chart plots.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneSeries {
    /// `(trial, p50)` of every trial that ran and was timed.
    pub valid: Vec<(u32, f64)>,
    /// `(trial, status)` of every trial without a p50: drawn in the strip below the plot,
    /// never on the latency axis.
    pub invalid: Vec<(u32, TrialStatus)>,
    /// The best-so-far line, as steps: `(trial, p50)` corners, to the last trial.
    pub best_steps: Vec<(u32, f64)>,
    /// The last trial number.
    pub last: u32,
}

/// The tune chart's data.
pub fn tune_series(tune: &TuneData) -> TuneSeries {
    let timed =
        |t: &&repro_schema::TuneTrial| t.status.is_ok() && t.p50_us.is_some_and(|p| p.is_finite());
    let mut best_steps: Vec<(u32, f64)> = Vec::new();
    for (trial, best) in best_so_far(tune) {
        if let Some(b) = best {
            if let Some(&(_, prev)) = best_steps.last() {
                best_steps.push((trial, prev));
            }
            best_steps.push((trial, b));
        }
    }
    let last = tune.trials.iter().map(|t| t.trial).max().unwrap_or(0);
    // The best so far holds until the last trial.
    if let Some(&(t, b)) = best_steps.last() {
        if t < last {
            best_steps.push((last, b));
        }
    }
    TuneSeries {
        valid: tune
            .trials
            .iter()
            .filter(timed)
            .map(|t| (t.trial, t.p50_us.unwrap_or_default()))
            .collect(),
        invalid: tune
            .trials
            .iter()
            .filter(|t| !timed(t))
            .map(|t| (t.trial, t.status.clone()))
            .collect(),
        best_steps,
        last,
    }
}

/// Valid trials as points with the best-so-far as a step line and the control's p50 as a
/// reference line; below, in a strip of its own, a red cross per invalid trial (no p50).
pub fn tune_chart(tune: &TuneData, control: Option<(&str, f64)>) -> anyhow::Result<String> {
    let series = tune_series(tune);
    if series.valid.is_empty() {
        return Ok(message_chart("tune: best p50 so far", "no valid trial"));
    }
    let mut svg = String::new();
    draw_tune(&mut svg, &series, control)
        .map_err(|e| anyhow::anyhow!("drawing the tune chart: {e}"))?;
    Ok(svg)
}

fn draw_tune(svg: &mut String, series: &TuneSeries, control: Option<(&str, f64)>) -> DrawResult {
    let height = TUNE_PLOT_HEIGHT + TUNE_STRIP_HEIGHT;
    let root = SVGBackend::with_string(svg, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, strip) = root.split_vertically(TUNE_PLOT_HEIGHT);
    let x_range = -0.5..(f64::from(series.last) + 0.5);
    let ys = series.valid.iter().map(|p| p.1).chain(control.map(|c| c.1));
    let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(l, h), y| (l.min(y), h.max(y)));
    let pad = ((hi - lo) * 0.08).max(hi * 0.02);
    let y0 = (lo - pad * 2.0).max(0.0);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            format!(
                "tune: p50 per trial and best so far ({} trials, {} invalid)",
                series.valid.len() + series.invalid.len(),
                series.invalid.len()
            ),
            (FONT, 16),
        )
        .margin(12)
        .margin_bottom(4)
        .x_label_area_size(36)
        .y_label_area_size(56)
        // Head room above the highest point for the legend.
        .build_cartesian_2d(x_range.clone(), y0..(hi + pad * 4.0))?;
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
            series
                .valid
                .iter()
                .map(|&(x, y)| Circle::new((f64::from(x), y), 3, VARIANT.mix(0.6).filled())),
        )?
        .label("valid trial")
        .legend(|(x, y)| Circle::new((x + 8, y), 3, VARIANT.filled()));
    chart
        .draw_series(LineSeries::new(
            series.best_steps.iter().map(|&(x, y)| (f64::from(x), y)),
            BEST.stroke_width(2),
        ))?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BEST.stroke_width(2)));
    if let Some((name, c)) = control {
        chart
            .draw_series(LineSeries::new(
                vec![(x_range.start, c), (x_range.end, c)],
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
    draw_invalid_strip(&strip, series, x_range)?;
    root.present()?;
    Ok(())
}

/// The strip under the tune plot: invalid trials on the same trial axis, off the latency
/// axis, so none reads as a fast configuration.
fn draw_invalid_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &TuneSeries,
    x_range: std::ops::Range<f64>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    // `invalid trials, no p50 (5): ptxas_gate 2, compile_error 1, …`, statuses in the order
    // they first occur.
    let mut counts: Vec<(&TrialStatus, usize)> = Vec::new();
    for (_, status) in &series.invalid {
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some(c) => c.1 += 1,
            None => counts.push((status, 1)),
        }
    }
    let by_status: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let title = if counts.is_empty() {
        "invalid trials, no p50: none".to_string()
    } else {
        format!(
            "invalid trials, no p50 ({}): {}",
            series.invalid.len(),
            by_status.join(", ")
        )
    };
    let mut strip = ChartBuilder::on(area)
        .caption(title, (FONT, 13))
        .margin_left(12)
        .margin_right(12)
        .margin_bottom(8)
        .x_label_area_size(20)
        .y_label_area_size(56)
        .build_cartesian_2d(x_range, 0.0..1.0)?;
    strip
        .configure_mesh()
        .disable_y_mesh()
        .disable_x_mesh()
        .y_labels(0)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style((FONT, 11))
        .draw()?;
    strip.draw_series(
        series
            .invalid
            .iter()
            .map(|(x, _)| Cross::new((f64::from(*x), 0.5), 5, FAIL.stroke_width(2))),
    )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panel_has_one_row_slot_per_bar() {
        // Rows 0..n-1 from bottom to top: the top of the last row is the top of the axis.
        for n in 2..9 {
            let y = rows(n).into_segmented();
            assert_eq!(y.map(&SegmentValue::Exact(0), (0, 1000)), 0);
            let top = y.map(&SegmentValue::Exact(n), (0, 1000));
            assert!(
                (999..=1000).contains(&top),
                "{n} bars: the last row ends at {top}"
            );
        }
        // The old range, 0..n, left an empty slot on top.
        let old = (0..5).into_segmented();
        assert!(old.map(&SegmentValue::Exact(5), (0, 1000)) < 900);
    }
}
