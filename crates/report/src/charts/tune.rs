//! The tune chart: best p50 so far against trials, and the invalid trials in a strip below.

use super::{message_chart, DrawResult, BEST, CONTROL, FAIL, FONT, VARIANT, WIDTH};
use crate::artifacts::TuneData;
use crate::context::best_so_far;
use plotters::prelude::*;
use repro_schema::TrialStatus;

/// The tune chart: the latency plot above, the strip of invalid trials below it.
pub const TUNE_PLOT_HEIGHT: u32 = 380;
const TUNE_STRIP_HEIGHT: u32 = 84;
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
