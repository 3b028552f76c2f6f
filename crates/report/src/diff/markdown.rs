//! `repro diff` as markdown: the verdict line, a row per (variant, shape), the gates that
//! flipped and the Nsight Compute metrics that changed — a pull-request comment.

use super::{DiffReport, Measure, Verdict};
use crate::context::num;

fn signed_pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:+.1}%"),
        _ => "n/a".into(),
    }
}

fn pass_mark(pass: bool) -> &'static str {
    if pass {
        "✅"
    } else {
        "❌"
    }
}

/// The comparison as markdown (a pull-request comment).
pub fn markdown(r: &DiffReport) -> String {
    let side = |gpus: &[String]| {
        if gpus.is_empty() {
            "not measured".to_string()
        } else {
            gpus.join(", ")
        }
    };
    let mut s = format!(
        "### repro diff: working tree vs `{}` ({})\n\n{}\n\nGPU before: {}; GPU after: {}.\n\n",
        r.rev,
        r.commit,
        r.verdict_line(),
        side(&r.gpus_before),
        side(&r.gpus_after),
    );
    // Rows that all read SAME say nothing the verdict line did not: folded away.
    let fold = !r.rows.is_empty() && r.rows.iter().all(|row| row.verdict == Verdict::Same);
    if fold {
        s += "<details><summary>Every row</summary>\n\n";
    }
    s += "| Variant | Shape | Before p50 (µs) | After p50 (µs) | Change | Noise ± (µs, before / after) | Verdict |\n|---|---|---:|---:|---:|---:|---|\n";
    for row in &r.rows {
        let label = if row.kind == "baseline" {
            format!("{} (baseline)", row.name)
        } else {
            row.name.clone()
        };
        let noise = |m: Option<Measure>| num(m.and_then(|m| m.noise_us), 2);
        s += &format!(
            "| {label} | {} | {} | {} | {} | {} / {} | {} |\n",
            row.shape,
            num(row.before.map(|m| m.p50_us), 2),
            num(row.after.map(|m| m.p50_us), 2),
            signed_pct(row.change_pct),
            noise(row.before),
            noise(row.after),
            row.verdict.as_str()
        );
    }
    if fold {
        s += "\n</details>\n";
    }
    s += &format!(
        "\nFASTER/SLOWER: the change is at least {:.0}% and larger than the combined noise of both sides (each at least {:.0}% of its p50, for run-to-run drift); SAME: below {:.0}%, or the same cubin, harness, GPU and driver on both sides; UNCLEAR: within the noise or not measured on both sides; NOT MEASURED: the result was kept from another build of the kernel (a machine that cannot measure kept it): run on a GPU; NEW / REMOVED: only one side has the variant; LOST: measured before, not now; OTHER GPU: measured on different GPU models, not compared.\n",
        r.min_rel_change * 100.0,
        super::verdict::NOISE_FLOOR_REL * 100.0,
        r.min_rel_change * 100.0
    );
    s += "\n**Gates that flipped:**";
    if r.flipped_gates.is_empty() {
        s += " none.\n";
    } else {
        s += "\n\n";
        for g in &r.flipped_gates {
            s += &format!(
                "- {}: {} → {}\n",
                g.gate,
                pass_mark(g.before),
                g.after.map_or("not checked", pass_mark)
            );
        }
    }
    if !r.lost_profiles.is_empty() {
        s += &format!(
            "\n**Profiled before, not now:** {}.\n",
            r.lost_profiles.join(", ")
        );
    }
    s += "\n**Nsight Compute metrics that changed:**";
    if r.ncu.is_empty() {
        s += " none (or no profile on one side).\n";
    } else {
        s += "\n\n| Target | Metric | Before | After | Change |\n|---|---|---:|---:|---:|\n";
        for m in &r.ncu {
            s += &format!(
                "| {} | {} | {} | {} | {} |\n",
                m.target,
                m.metric,
                num(m.before, 2),
                num(m.after, 2),
                signed_pct(m.change_pct)
            );
        }
    }
    s
}
