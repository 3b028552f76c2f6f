//! The "Which kernel for which shape" section: a workload's dispatch table
//! ([`crate::dispatch`]) as text, one row per declared shape.

use super::*;
use repro_schema::{DispatchFile, DispatchTable, Excluded, Figure, Ranking, ShapeDispatch};

impl Builder<'_> {
    /// This builder's workload's table of `file`, or why there is none.
    pub(super) fn dispatch_section(&self, file: &DispatchFile) -> Section<DispatchView> {
        let Some(table) = file
            .workloads
            .iter()
            .find(|t| t.workload == self.scope.workload)
        else {
            return Section::not_run("not run: the pipeline declares no workload".into());
        };
        match view(table) {
            Some(view) => Section::ran(view),
            None => Section::not_run(self.bench_all_skipped().unwrap_or_else(|| {
                "not run: no kernel of this workload was timed on a GPU".into()
            })),
        }
    }
}

/// `table` as the report shows it; `None` when nothing was timed (it names no GPU).
pub fn view(table: &DispatchTable) -> Option<DispatchView> {
    Some(DispatchView {
        gpu: table.gpu.clone()?,
        rows: table.shapes.iter().map(row).collect(),
        ineligible: excluded(table, |s| &s.ineligible),
        not_counted: excluded(table, |s| &s.not_counted),
    })
}

fn row(s: &ShapeDispatch) -> DispatchRow {
    let only = |r: &Ranking| match r.ranked {
        1 => ", the only one profiled",
        _ => "",
    };
    let agree = match (s.agree, &s.harness, &s.ncu) {
        (Some(true), ..) => "✅ yes".to_string(),
        (Some(false), ..) => "❌ no".to_string(),
        (None, Some(h), Some(n)) if n.best.name == h.best.name => {
            "n/a: ncu profiled no other kernel on it".to_string()
        }
        (None, Some(h), Some(_)) => format!("n/a: ncu did not profile `{}` on it", h.best.name),
        (None, ..) => NA.to_string(),
    };
    let mut margins = Vec::new();
    if let Some(h) = &s.harness {
        margins.push(margin(h).unwrap_or_else(|| "n/a: the only eligible kernel timed".into()));
    }
    if let Some(m) = s.ncu.as_ref().and_then(margin) {
        margins.push(format!("by ncu {m}"));
    }
    DispatchRow {
        shape: s.shape.clone(),
        harness: s.harness.as_ref().map_or_else(
            || "n/a: no eligible kernel was timed on it".into(),
            |r| figure(&r.best),
        ),
        ncu: match &s.ncu {
            Some(r) => format!("{}{}", figure(&r.best), only(r)),
            None if s.not_counted.is_empty() => "n/a: not profiled on it".into(),
            None => "n/a: no profile counts (listed below)".into(),
        },
        agree,
        margin: if margins.is_empty() {
            NA.to_string()
        } else {
            margins.join("; ")
        },
    }
}

/// `` `name` 8.29 (8.27–8.31, n=3) ``; the figure alone when its count was not recorded
/// (a profile from before the stage profiled several launches).
fn figure(f: &Figure) -> String {
    let us = num(Some(f.us), 2);
    match f.count {
        0 => format!("`{}` {us}", f.name),
        n => format!(
            "`{}` {us} ({}–{}, n={n})",
            f.name,
            num(Some(f.low_us), 2),
            num(Some(f.high_us), 2)
        ),
    }
}

/// `` +3.2% (`runner-up`) ``, `≈` before it when the two spreads overlap; `None` without a
/// runner-up.
fn margin(r: &Ranking) -> Option<String> {
    let next = r.runner_up.as_ref()?;
    let tie = if r.overlap { "≈ " } else { "" };
    let pct = r
        .margin_pct
        .map_or_else(|| NA.to_string(), |m| format!("+{m:.1}%"));
    Some(format!("{tie}{pct} (`{}`)", next.name))
}

/// `` `name` on `shape`: why `` for each of `pick`'s entries, shape by shape.
fn excluded(table: &DispatchTable, pick: impl Fn(&ShapeDispatch) -> &Vec<Excluded>) -> Vec<String> {
    table
        .shapes
        .iter()
        .flat_map(|s| {
            pick(s)
                .iter()
                .map(move |e| format!("`{}` on `{}`: {}", e.name, s.shape, e.reason))
        })
        .collect()
}
