//! The p50 chart drawn: a legend, then a panel of horizontal bars per shape.

use super::{message_chart, BarKind, DrawResult, ShapePanel};
use super::{BASELINE, BEST, FAIL, FONT, MUTED, TUNED, VARIANT, WIDTH};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

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
