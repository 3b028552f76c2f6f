//! `<!-- repro:table dispatch -->`: which kernel to call for each shape, ranked from the
//! committed records as the summarize stage ranks them for `artifacts/dispatch.json`, as
//! the report's "Which kernel for which shape" shows it.

use super::tables::Sources;
use repro_report::context::dispatch_view;
use std::fmt::Write as _;

pub fn render(s: &Sources) -> String {
    let file = repro_report::dispatch::table(s.pipeline, s.configs, s.artifacts);
    let mut out = String::new();
    for table in &file.workloads {
        let Some(view) = dispatch_view(table) else {
            let _ = writeln!(out, "`{}`: nothing committed was timed.\n", table.workload);
            continue;
        };
        let _ = write!(
            out,
            "`{}`, on {}:\n\n\
             | Shape | Best by harness (µs) | Best by ncu (µs) | Agree? | Runner-up margin |\n\
             |---|---|---|---|---|\n",
            table.workload, view.gpu
        );
        for r in &view.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                r.shape, r.harness, r.ncu, r.agree, r.margin
            );
        }
        for (title, lines) in [
            ("Not eligible on a shape", &view.ineligible),
            ("ncu profiles not counted", &view.not_counted),
        ] {
            if !lines.is_empty() {
                let _ = write!(out, "\n{title}:\n\n- {}\n", lines.join("\n- "));
            }
        }
        out.push('\n');
    }
    out.push_str(
        "Ranked from the committed `artifacts/bench/*.json`, each tune stage's `topk.json` and \
         `artifacts/ncu/summary.json`, as the summarize stage writes `artifacts/dispatch.json`.\n",
    );
    out
}
