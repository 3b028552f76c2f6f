//! The plan of a dry run, or the table at the end of a run, and its outcome.

use super::Run;
use crate::display;
use crate::progress;
use crate::runner::ended::Ended;
use crate::runner::RunOutcome;
use crate::status;
use std::sync::atomic::Ordering;

impl Run<'_> {
    /// Print the plan or the final table; return the exit code.
    pub(crate) fn report(&self, selected: &[usize]) -> anyhow::Result<RunOutcome> {
        let project = self.project;
        let width = selected
            .iter()
            .map(|&i| project.stages[i].name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut out = String::new();
        if self.req.dry_run {
            out.push_str("plan (dry run, nothing changed):\n");
            if let Some(note) = status::run_in_progress(project) {
                out.push_str(&format!("{note}\n"));
            }
        } else {
            out.push_str(&format!(
                "{:width$}  {:10}  {}\n",
                "stage", "time", "status"
            ));
        }
        for &i in selected {
            let ended = self
                .ended
                .get(&i)
                .cloned()
                .unwrap_or(Ended::NotRun("not reached".into()));
            let name = &project.stages[i].name;
            if self.req.dry_run {
                let line = match &ended {
                    Ended::WouldRun(why) => format!("  run   {name:width$}  {why}"),
                    Ended::UpToDate => format!("  skip  {name:width$}  up-to-date"),
                    other => format!("  skip  {name:width$}  {}", other.label()),
                };
                out.push_str(&line);
                out.push('\n');
                continue;
            }
            let time = self
                .times
                .get(&i)
                .map(|t| format!("{:.1}s", t.as_secs_f64()))
                .unwrap_or_else(|| "-".into());
            let label = ended.label();
            out.push_str(&format!(
                "{name:width$}  {time:10}  {} {label}\n",
                progress::mark(&label)
            ));
        }
        display::out(&out)?;
        let interrupted = self.interrupted.load(Ordering::SeqCst);
        if interrupted {
            self.progress.error(
                "interrupted: running stages were stopped and their previous outputs restored",
            );
            return Ok(RunOutcome::Interrupted);
        }
        let bad = self.ended.values().any(|e| {
            matches!(
                e,
                Ended::Failed(_) | Ended::GateFailed(_) | Ended::NotRun(_) | Ended::Interrupted
            )
        });
        Ok(if bad {
            RunOutcome::Failed
        } else {
            RunOutcome::Passed
        })
    }
}
