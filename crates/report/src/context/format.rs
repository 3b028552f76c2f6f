//! Number and symbol formatting shared by every section: fixed decimals, `n/a` for a
//! missing value, ratios as `1.23×`, gate operators as symbols.

use super::*;

/// Format an optional number with fixed decimals, "n/a" when absent or not finite.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    match x {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.decimals$}");
            // No "-0.00".
            if s.trim_start_matches('-')
                .chars()
                .all(|c| c == '0' || c == '.')
            {
                s.trim_start_matches('-').to_string()
            } else {
                s
            }
        }
        _ => NA.to_string(),
    }
}

/// `0.02`, or one per class: `0.02 (fp16-pv), 1 (fp8-pv)`.
pub(super) fn threshold_text(t: &repro_pipeline::workload::spec::Threshold) -> String {
    use repro_pipeline::workload::spec::Threshold;
    match t {
        Threshold::One(x) => format!("{x}"),
        Threshold::PerClass(map) => map
            .iter()
            .map(|(class, x)| format!("{x} ({class})"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// An output's thresholds as the correctness section states them: `max abs err ≤ 0.06,
/// mean abs err ≤ 0.02, bad elements ≤ 1 %, max err / ref std ≤ …, rel L2 err ≤ …` (those
/// it declares), and `(by the variant's precision class)` when one is per class.
pub(super) fn thresholds_text(g: &repro_pipeline::workload::spec::OutputGates) -> String {
    use repro_pipeline::workload::spec::Threshold;
    let mut parts = Vec::new();
    let mut number = |what: &str, x: Option<f64>, unit: &str| {
        if let Some(x) = x {
            parts.push(format!("{what} ≤ {x}{unit}"));
        }
    };
    number("max abs err", g.max_abs_err, "");
    number("mean abs err", g.mean_abs_err, "");
    number("bad elements", g.max_pct_bad, " %");
    for (what, t) in [
        ("max err / ref std", &g.max_err_over_ref_std),
        ("rel L2 err", &g.max_rel_l2_err),
    ] {
        if let Some(t) = t {
            parts.push(format!("{what} ≤ {}", threshold_text(t)));
        }
    }
    let per_class = [&g.max_err_over_ref_std, &g.max_rel_l2_err]
        .iter()
        .any(|t| matches!(t, Some(Threshold::PerClass(_))));
    let mut text = parts.join(", ");
    if per_class {
        text.push_str(" (by the variant's precision class)");
    }
    text
}

pub(super) fn ratio(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.2}×"),
        _ => NA.to_string(),
    }
}

pub(super) fn mark(pass: bool) -> &'static str {
    if pass {
        "✅"
    } else {
        "❌"
    }
}

/// `≤` / `≥` for a gate's `<=` / `>=`.
pub(super) fn op_symbol(op: &str) -> &str {
    match op {
        "<=" => "≤",
        ">=" => "≥",
        other => other,
    }
}

/// The relation a failed gate's figure has to its threshold (`<=` failed: `>`).
pub(super) fn violated_symbol(op: &str) -> &str {
    match op {
        "<=" => ">",
        ">=" => "<",
        other => other,
    }
}

pub(super) fn config_text(config: &BTreeMap<String, i64>) -> String {
    config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The JSON config of a trial as `K=V` pairs (the JSON as is when it is not a flat object).
pub(super) fn trial_config_text(json: &str) -> String {
    match serde_json::from_str::<BTreeMap<String, serde_json::Value>>(json) {
        Ok(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => json.to_string(),
    }
}

/// An ncu kernel time with its spread over the profiled launches: `8.64 (8.13–9.25, n=5)`;
/// the figure alone in summaries from before the stage profiled several.
pub(super) fn ncu_time(t: &NcuTarget) -> String {
    let median = num(t.kernel_time_us, 2);
    match (t.kernel_time_us_min, t.kernel_time_us_max, t.launches) {
        (Some(lo), Some(hi), Some(n)) => format!("{median} ({lo:.2}–{hi:.2}, n={n})"),
        _ => median,
    }
}
