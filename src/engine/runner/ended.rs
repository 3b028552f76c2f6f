//! How one stage ended in a run, and the label the run's table shows for it.

/// How one stage ended in this run.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ended {
    UpToDate,
    WouldRun(String),
    Passed,
    GateFailed(String),
    Skipped(String),
    /// Could not run here; the earlier results (measured on the machine named) stay.
    Kept {
        reason: String,
        /// The GPU the results were measured on, when the stage records its hardware.
        measured_on: Option<String>,
    },
    Failed(String),
    NotRun(String),
    Interrupted,
}

impl Ended {
    /// Did it leave outputs that stages needing it may use?
    pub(super) fn usable(&self) -> bool {
        matches!(
            self,
            Ended::UpToDate
                | Ended::WouldRun(_)
                | Ended::Passed
                | Ended::GateFailed(_)
                | Ended::Skipped(_)
                | Ended::Kept { .. }
        )
    }

    pub(super) fn label(&self) -> String {
        match self {
            Ended::UpToDate => "up-to-date".into(),
            Ended::WouldRun(why) => format!("would run: {why}"),
            Ended::Passed => "passed".into(),
            Ended::GateFailed(g) => format!("gate failed: {g}"),
            Ended::Skipped(why) => format!("skipped: {why}"),
            Ended::Kept {
                reason,
                measured_on: Some(machine),
            } => format!("kept: measured on {machine}; not re-run here: {reason}"),
            Ended::Kept { reason, .. } => {
                format!("kept: earlier results; not re-run here: {reason}")
            }
            Ended::Failed(_) => "FAILED".into(),
            Ended::NotRun(why) => format!("not run: {why}"),
            Ended::Interrupted => "interrupted".into(),
        }
    }
}
