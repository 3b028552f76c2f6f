//! The report's SVG charts, drawn with plotters: p50 per variant and shape (baselines
//! included), and the tune's best-so-far against trials. Fixed sizes, fonts and colours,
//! and inputs in a fixed order, so the same artifacts give byte-identical SVGs. What a
//! chart shows is computed first ([`p50_panels`], [`tune_series`]) and tested as data.

mod p50;
mod p50_chart;
mod tune;

pub use p50::{dims_text, p50_panels, Bar, BarKind, Marks, ShapePanel};
pub use p50_chart::p50_chart;
pub use tune::{tune_chart, tune_series, TuneSeries, TUNE_PLOT_HEIGHT};

use plotters::prelude::*;

const FONT: &str = "sans-serif";
const WIDTH: u32 = 860;
const BASELINE: RGBColor = RGBColor(150, 150, 150);
const VARIANT: RGBColor = RGBColor(72, 120, 168);
const BEST: RGBColor = RGBColor(46, 139, 87);
const TUNED: RGBColor = RGBColor(224, 138, 46);
const FAIL: RGBColor = RGBColor(200, 40, 40);
const CONTROL: RGBColor = RGBColor(110, 60, 150);
const MUTED: RGBColor = RGBColor(110, 110, 110);

type DrawResult = Result<(), Box<dyn std::error::Error>>;

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
