//! How one stage ended in a run, and the label the run's table shows for it.

/// How one stage ended in this run.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ended {
    UpToDate,
    WouldRun(String),
    Passed,
    GateFailed(String),
    Skipped(String),
    /// Could not run here; the earlier results (measured, or a skip, on the machine named)
    /// stay.
    Kept {
        reason: String,
        /// Where they came from, `measured on <GPU>` or `skipped on <GPU>`, when the stage
        /// records its hardware.
        origin: Option<String>,
        /// What changed in the sources since they were measured (the first change, and how
        /// many more); `None` when only the machine differs and they are current.
        not_current: Option<String>,
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
            // The reason this machine cannot re-run it is said once, by the run's warning;
            // the label says where the results came from and whether they are current.
            Ended::Kept {
                origin,
                not_current,
                ..
            } => {
                let from = match origin {
                    Some(origin) => format!("kept: {origin}"),
                    None => "kept: earlier results".to_string(),
                };
                match not_current {
                    Some(what) => format!("{from}, NOT for these sources ({what})"),
                    None => from,
                }
            }
            Ended::Failed(_) => "FAILED".into(),
            Ended::NotRun(why) => format!("not run: {why}"),
            Ended::Interrupted => "interrupted".into(),
        }
    }
}
