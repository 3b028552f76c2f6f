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

/// `0.02 (fp16-pv), 0.25 (fp8-pv)`.
pub(super) fn per_precision(t: &crate::pipeline::PerPrecision) -> String {
    use crate::pipeline::Precision;
    [Precision::Fp16Pv, Precision::Fp8Pv]
        .iter()
        .map(|&p| format!("{} ({})", t.get(p), p.name()))
        .collect::<Vec<_>>()
        .join(", ")
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
