//! Which machine made which results, from what the lock records of each stage. A report
//! whose results were measured on more than one GPU says so at the top and labels each
//! number with its machine (`M1`, `M2`, …), so an H100 number is never read as an L4 one.
//! Which machine renders the report plays no part: results kept because this one cannot
//! measure read exactly as they did where they were measured.

use super::state::RunState;
use serde::Serialize;

/// The machines behind a report's numbers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Machines {
    /// Said at the top of the report: more than one machine.
    pub mixed: bool,
    pub list: Vec<Machine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `M1`, `M2`, … in order of first appearance.
    pub label: String,
    /// As the lock records it: GPU model, arch, driver.
    pub gpu: String,
    /// The stages whose recorded results it made.
    pub stages: Vec<String>,
}

impl Machines {
    /// From the engine's record of each stage (in `stages` order).
    pub fn of<'a>(state: &RunState, stages: impl IntoIterator<Item = &'a str>) -> Machines {
        let mut list: Vec<Machine> = Vec::new();
        for name in stages {
            let Some(s) = state.stages.get(name) else {
                continue;
            };
            let Some(gpu) = s.hardware.as_deref().filter(|h| repro_gpu::names_a_gpu(h)) else {
                continue;
            };
            if s.skipped() {
                continue;
            }
            let at = match list.iter().position(|m| m.gpu == gpu) {
                Some(i) => i,
                None => {
                    list.push(Machine {
                        label: format!("M{}", list.len() + 1),
                        gpu: gpu.to_string(),
                        stages: Vec::new(),
                    });
                    list.len() - 1
                }
            };
            list[at].stages.push(name.to_string());
        }
        Machines {
            mixed: list.len() > 1,
            list,
        }
    }

    /// The label of the machine that made `stage`'s results, when the report is mixed.
    pub fn label_of(&self, stage: Option<&str>) -> String {
        let Some(stage) = stage.filter(|_| self.mixed) else {
            return String::new();
        };
        self.list
            .iter()
            .find(|m| m.stages.iter().any(|s| s == stage))
            .map(|m| m.label.clone())
            .unwrap_or_else(|| "not recorded".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StageState;
    use repro_engine::run_record::Outcome;

    fn stage(hardware: &str) -> StageState {
        StageState {
            hardware: Some(hardware.into()),
            status: Some(Outcome::Passed),
            ..StageState::default()
        }
    }

    #[test]
    fn one_machine_is_not_mixed_and_labels_nothing() {
        let mut state = RunState::default();
        state.stages.insert("bench".into(), stage("H100 sm_90"));
        state.stages.insert("tune".into(), stage("H100 sm_90"));
        let m = Machines::of(&state, ["bench", "tune"]);
        assert!(!m.mixed);
        assert_eq!(m.list.len(), 1);
        assert_eq!(m.label_of(Some("bench")), "");
    }

    #[test]
    fn one_gpu_is_not_mixed_and_two_gpus_make_a_mixed_report_with_labels() {
        let mut state = RunState::default();
        state.stages.insert("bench".into(), stage("H100 sm_90"));
        state.stages.insert("build".into(), StageState::default());
        let m = Machines::of(&state, ["build", "bench"]);
        assert!(!m.mixed, "one machine made them, whichever renders");
        assert_eq!(m.list[0].stages, ["bench"]);

        state.stages.insert("tune".into(), stage("L4 sm_89"));
        state.stages.insert("bench".into(), stage("H100 sm_90"));
        let m = Machines::of(&state, ["bench", "tune"]);
        assert!(m.mixed);
        assert_eq!(m.label_of(Some("bench")), "M1");
        assert_eq!(m.label_of(Some("tune")), "M2");
        // A stage without a recorded GPU that skipped is not a machine of the report.
        let mut skipped = stage("no GPU: no driver");
        skipped.status = Some(Outcome::Skipped);
        state.stages.insert("profile".into(), skipped);
        assert_eq!(Machines::of(&state, ["profile"]).list.len(), 0);
    }
}
