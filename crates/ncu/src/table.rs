//! The plain-text view of an [`NcuSummary`] for `repro ncu parse`: per target, each named
//! field with the metric it came from, then the top warp stalls.

use super::metrics::{value, Field};
use repro_schema::NcuSummary;
use std::fmt::Write;

/// Render every target of `summary`.
pub fn render(summary: &NcuSummary) -> String {
    let mut out = String::new();
    let width = Field::ALL.iter().map(|f| f.key().len()).max().unwrap_or(0);
    for (i, t) in summary.targets.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = write!(out, "{}  {}", t.target, t.kernel);
        if !t.variant.is_empty() {
            let _ = write!(out, "  [{}]", t.variant);
        }
        out.push('\n');
        if !t.status.is_ok() {
            let _ = writeln!(
                out,
                "  {}: {}",
                t.status,
                t.reason.as_deref().unwrap_or("no reason recorded")
            );
            continue;
        }
        for f in Field::ALL {
            let shown = value(t, f).map_or_else(|| "n/a".to_string(), |v| format!("{v:.2}"));
            let from = t.metric_names.get(f.key()).map_or("", String::as_str);
            let line = format!("  {:<width$}  {:>10}  {}", f.key(), shown, from);
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if !t.top_stalls.is_empty() {
            let stalls: Vec<String> = t
                .top_stalls
                .iter()
                .map(|s| format!("{} {:.1}%", s.reason, s.pct))
                .collect();
            let _ = writeln!(out, "  {:<width$}  {}", "top_stalls", stalls.join(", "));
        }
    }
    out
}
