//! `repro status` as text and as JSON.

use super::{kept_from, Change, StageStatus, State};
use repro_pipeline::Project;
use serde::Serialize;

/// The terminal width `repro status` fits its lines in.
const STATUS_COLUMNS: usize = 100;
/// A note that another repro is running in the project: the outputs of the stages it is
/// running are moved aside (or half written) until they end, so they read as missing or
/// modified here.
pub fn run_in_progress(project: &Project) -> Option<String> {
    let holder = crate::project_lock::running(&project.root)?;
    Some(format!(
        "note: a run is in progress (pid {} on {}, since {}):\n  the outputs of the stages it is running read as missing or modified until they end",
        holder.pid, holder.host, holder.since
    ))
}

/// `repro status` as text: one line per stage, then what changed, each in at most
/// 100 columns.
pub fn render_text(project: &Project, statuses: &[StageStatus]) -> String {
    let width = project
        .stages
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    // What comes from outside (a log tail, a file name, an edited lock) is shown, not
    // sent to the terminal, and each line fits in STATUS_COLUMNS.
    let mut push = |line: String| {
        out.push_str(&crate::display::visible_line(
            line.trim_end(),
            STATUS_COLUMNS,
        ));
        out.push('\n');
    };
    if let Some(note) = run_in_progress(project) {
        note.lines().for_each(|l| push(l.to_string()));
    }
    for &i in project.dag.topo_order() {
        let s = &statuses[i];
        let name = &project.stages[i].name;
        let mut line = format!("{name:width$}  {}", s.state.label());
        if let State::Kept { .. } = &s.state {
            line.push_str(match s.state.kept_current() {
                true => " (current: only the machine differs)",
                false => " (NOT measured for these sources: they changed since)",
            });
        }
        if let Some(g) = &s.gate_failed {
            line.push_str(&format!(" (gate failed: {g})"));
        }
        if let Some(reason) = &s.skipped {
            line.push_str(&format!(" (skipped: {reason})"));
        }
        push(line);
        match &s.state {
            State::Stale(changes) => {
                let room = STATUS_COLUMNS.saturating_sub(width + 4).max(40);
                for c in changes {
                    push(format!("{:width$}    {}", "", c.line(room)));
                }
            }
            State::Kept {
                reason, sources, ..
            } => {
                // Said once: where the results came from and why this machine cannot
                // re-run them; then only what changed in the sources, never the machine's
                // own differences (its GPU, tools, the cubins it would load).
                push(format!(
                    "{:width$}    {}; not re-run here: {reason}",
                    "",
                    kept_from(project, s.index)
                ));
                let room = STATUS_COLUMNS.saturating_sub(width + 4).max(40);
                for c in sources {
                    push(format!("{:width$}    {}", "", c.line(room)));
                }
            }
            State::Failed(msg) => {
                for l in msg.lines() {
                    push(format!("{:width$}    {l}", ""));
                }
            }
            _ => {}
        }
    }
    out
}

#[derive(Serialize)]
struct JsonStatus<'a> {
    stage: &'a str,
    kind: &'a str,
    state: &'static str,
    fingerprint: &'a str,
    changes: &'a [Change],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    /// Why it could not re-run here, when it kept earlier results.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_failed: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<&'a str>,
}

/// `repro status --json`: an array in run order.
pub fn render_json(project: &Project, statuses: &[StageStatus]) -> String {
    let rows: Vec<JsonStatus> = project
        .dag
        .topo_order()
        .iter()
        .map(|&i| {
            let s = &statuses[i];
            JsonStatus {
                stage: &project.stages[i].name,
                kind: &s.inputs.kind,
                state: s.state.label(),
                fingerprint: &s.fingerprint,
                changes: match &s.state {
                    State::Stale(c) | State::Kept { changes: c, .. } => c,
                    _ => &[],
                },
                error: match &s.state {
                    State::Failed(m) => Some(m),
                    _ => None,
                },
                kept: match &s.state {
                    State::Kept { reason, .. } => Some(reason),
                    _ => None,
                },
                gate_failed: s.gate_failed.as_deref(),
                skipped: s.skipped.as_deref(),
            }
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("status serializes") + "\n"
}
