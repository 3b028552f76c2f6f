//! Turns the loaded artifacts into the template context of `summary.md.j2`: every figure
//! already formatted (fixed decimals, "n/a" for missing values), rows in a stable order,
//! and every gap explained ("not run: …"), so templates only lay text out. Each skip
//! reason is stated once, as a footnote ([`super::notes`]) the rows cite.
//!
//! The report has one part per workload ([`scope`]: its headline, correctness,
//! performance and tune sections), then the sections of the whole pipeline (ptxas, profile,
//! environment, stages). One module per section ([`headline`], [`gates`], [`tune`],
//! [`profile`], [`env`], [`stages`]); [`model`] holds the types the template reads,
//! [`format`] and [`results`] the helpers they share.

use super::artifacts::{Artifacts, TuneData};
use super::machines::Machines;
use super::notes::{Footnote, Notes};
use super::state::RunState;
use repro_engine::run_record::Outcome;
use repro_gpu::env::Environment;
use repro_pipeline::builtin_kind::BuiltinKind;
use repro_pipeline::kind::Configs;
use repro_pipeline::Pipeline;
use repro_schema::BenchFile;
use repro_schema::BenchResult;
use repro_schema::GateResult;
use repro_schema::NcuTarget;
use repro_schema::RunStatus;
use serde::Serialize;
use std::collections::BTreeMap;

mod agreement;
mod baselines;
mod dispatch;
mod env;
mod format;
mod gates;
mod headline;
mod lineage;
mod model;
mod profile;
mod results;
mod scope;
mod stages;
#[cfg(test)]
mod tests;
mod tune;

pub use dispatch::view as dispatch_view;
pub use format::num;
use format::*;
pub(crate) use lineage::diff_files;
pub use model::*;
use results::*;
pub use results::{shape_p50, shapes_in_order};
pub use scope::{p50_chart_name, scopes, tune_chart_name, tune_stages, Scope, Scoped};
pub use tune::best_so_far;

/// The file names of the charts, relative to `reports/`.
pub const P50_CHART: &str = "p50_by_shape.svg";
pub const TUNE_CHART: &str = "tune_best_so_far.svg";

/// Missing-value text.
pub const NA: &str = "n/a";

/// Builds the context; holds the inputs so the parts can share them. A workload's part is
/// built by a builder over its own records ([`Builder::scoped`]).
pub struct Builder<'a> {
    pub pipeline: &'a Pipeline,
    /// Every stage's options as its kind decoded them.
    pub configs: &'a Configs,
    pub artifacts: &'a Artifacts,
    pub state: &'a RunState,
    pub env: &'a Environment,
    /// One set of footnotes for the whole report, whichever part cites them.
    notes: std::rc::Rc<Notes>,
    /// The workload of the part being built.
    scope: Scope,
}

impl<'a> Builder<'a> {
    pub fn new(
        pipeline: &'a Pipeline,
        configs: &'a Configs,
        artifacts: &'a Artifacts,
        state: &'a RunState,
        env: &'a Environment,
    ) -> Builder<'a> {
        let mut b = Builder {
            pipeline,
            configs,
            artifacts,
            state,
            env,
            notes: std::rc::Rc::new(Notes::default()),
            scope: Scope::default(),
        };
        b.notes = std::rc::Rc::new(Notes::new(b.skip_reasons()));
        b
    }

    /// A builder of `scoped`'s part of the report, sharing this one's footnotes.
    fn scoped<'s>(&'s self, scoped: &'s Scoped) -> Builder<'s> {
        Builder {
            pipeline: self.pipeline,
            configs: self.configs,
            artifacts: &scoped.artifacts,
            state: self.state,
            env: self.env,
            notes: self.notes.clone(),
            scope: scoped.scope.clone(),
        }
    }

    /// Every reason something was skipped, for [`Notes`].
    pub(super) fn skip_reasons(&self) -> Vec<String> {
        let stages = self.state.stages.values().filter(|s| s.skipped());
        let files = self.benches().iter().chain(self.baselines());
        let results = self
            .benches()
            .iter()
            .chain(self.baselines())
            .flat_map(|f| &f.results);
        let targets = self.artifacts.ncu.iter().flat_map(|n| &n.targets);
        stages
            .filter_map(|s| s.reason.clone())
            .chain(
                files
                    .filter(|f| f.status == RunStatus::Skipped)
                    .filter_map(|f| f.reason.clone()),
            )
            .chain(
                results
                    .filter(|r| r.status == RunStatus::Skipped)
                    .filter_map(|r| r.error.clone()),
            )
            .chain(
                targets
                    .filter(|t| t.status == RunStatus::Skipped)
                    .filter_map(|t| t.reason.clone()),
            )
            .collect()
    }

    /// `skipped [^1]` (or `skipped: <its own words> [^1]`): the reason as a footnote
    /// citation.
    pub(super) fn skipped_because(&self, reason: Option<&str>) -> String {
        let Some(r) = reason else {
            return "skipped (no reason recorded)".into();
        };
        let cited = self.notes.cite(r);
        if cited.starts_with("[^") {
            format!("skipped {cited}")
        } else {
            format!("skipped: {cited}")
        }
    }

    /// `not run: stage `x` skipped [^1]` when the stage of `kind` was skipped.
    pub(super) fn stage_skipped(&self, kind: BuiltinKind) -> Option<String> {
        let name = self.stage_of(kind)?;
        let st = self.state.stages.get(name).filter(|s| s.skipped())?;
        Some(format!(
            "not run: stage `{name}` {}",
            self.skipped_because(st.reason.as_deref())
        ))
    }

    /// `<status>: <reason>` of a record, a skip's reason cited as a footnote.
    pub(super) fn status_because(&self, status: &RunStatus, reason: Option<&str>) -> String {
        self.because(status.as_str(), *status == RunStatus::Skipped, reason)
    }

    /// `<outcome>: <reason>` of a stage's last run, a skip's reason cited as a footnote.
    pub(super) fn outcome_because(&self, outcome: Outcome, reason: Option<&str>) -> String {
        self.because(outcome.label(), outcome == Outcome::Skipped, reason)
    }

    fn because(&self, status: &str, skipped: bool, reason: Option<&str>) -> String {
        if skipped {
            return self.skipped_because(reason);
        }
        format!("{status}: {}", reason.unwrap_or("no reason given"))
    }
}

impl Builder<'_> {
    pub fn build(&self) -> ReportContext {
        let mut failed_gates = Vec::new();
        let ptxas = self.ptxas_gates(&mut failed_gates);
        let profile_gates = self.profile_gates(&mut failed_gates);
        let parts = scopes(self.pipeline, self.configs, self.artifacts);
        let dispatch = crate::dispatch::table(self.pipeline, self.configs, self.artifacts);
        let several = parts.len() > 1;
        let mut unchecked_gates = Vec::new();
        if let Some(note) = &ptxas.note {
            unchecked_gates.push(format!("ptxas: {note}"));
        }
        if let Some(note) = profile_gates.as_ref().and_then(|s| s.note.as_ref()) {
            unchecked_gates.push(format!("profile: {note}"));
        }
        let workloads: Vec<WorkloadReport> = parts
            .iter()
            .map(|scoped| {
                let mut failed = Vec::new();
                let part = self.scoped(scoped).workload_report(&mut failed, &dispatch);
                failed_gates.extend(failed.into_iter().map(|g| match several {
                    true => format!("`{}`: {g}", part.name),
                    false => g,
                }));
                for (group, note) in [
                    ("correctness", &part.correctness.note),
                    ("performance", &part.performance.note),
                ] {
                    if let Some(n) = note {
                        unchecked_gates.push(match several {
                            true => format!("{group} ({}): {n}", part.name),
                            false => format!("{group}: {n}"),
                        });
                    }
                }
                part
            })
            .collect();
        ReportContext {
            primary_shape: workloads
                .first()
                .map_or_else(|| NA.to_string(), |w| w.primary_shape.clone()),
            workloads,
            gates: Gates {
                ptxas,
                profile: profile_gates,
            },
            profile: self.profile_section(),
            env: self.env_brief(),
            stages: self.stage_rows(),
            skipped: self.skipped(),
            notes: self.notes.footnotes(),
            machines: self.machines(),
            failed_gates,
            unchecked_gates,
            not_measured: self.not_measured(),
            dispatch,
        }
    }

    /// Every bench and ncu record that measured another build of its variant than the one
    /// in place.
    fn not_measured(&self) -> Vec<crate::measured::NotMeasured> {
        crate::measured::all(
            self.benches(),
            self.artifacts.ncu.as_ref().map_or(&[], |n| &n.targets),
            self.builds(),
        )
    }

    pub(super) fn builds(&self) -> &[repro_schema::BuildRecord] {
        self.artifacts.builds.as_deref().unwrap_or_default()
    }

    /// This builder's workload part: headline, correctness, performance, tune, and its
    /// table of `dispatch`.
    fn workload_report(
        &self,
        failed_gates: &mut Vec<String>,
        dispatch: &repro_schema::DispatchFile,
    ) -> WorkloadReport {
        let primary = self.primary_shape();
        let best = self.best_variant(&primary);
        let correctness = self.correctness_gates(failed_gates);
        let performance = self.performance_gates(&primary, best.as_deref(), failed_gates);
        let baseline = self.baseline_gates(&primary, best.as_deref(), failed_gates);
        let baseline_ratios = self.baseline_ratios(&primary, best.as_deref());
        let mut tunes: Vec<TuneReport> = self
            .scope
            .tunes
            .iter()
            .map(|(stage, dir)| {
                let mut artifacts = self.artifacts.clone();
                artifacts.tune = self.artifacts.tunes.get(dir).cloned();
                let scoped = Scoped {
                    scope: Scope {
                        tunes: vec![(stage.clone(), dir.clone())],
                        ..self.scope.clone()
                    },
                    artifacts,
                };
                let section = self.scoped(&scoped).tune_section(&primary);
                TuneReport {
                    stage: stage.clone(),
                    chart: section.ran.then(|| tune_chart_name(dir)),
                    section,
                }
            })
            .collect();
        if tunes.is_empty() {
            let note = match self.stage_of(BuiltinKind::Tune) {
                None => self.not_run(BuiltinKind::Tune, ""),
                Some(_) => format!(
                    "not run: no tune stage tunes a kernel of `{}`",
                    self.scope.workload
                ),
            };
            tunes.push(TuneReport {
                stage: String::new(),
                section: Section::not_run(note),
                chart: None,
            });
        }
        WorkloadReport {
            name: self.scope.workload.clone(),
            headline: self.headline(&primary, best.as_deref()),
            control: self.scope.control.clone(),
            // Linked only when it shows a measurement.
            p50_chart: any_timed(self.benches().iter().chain(self.baselines()))
                .then(|| self.scope.p50_chart.clone()),
            primary_shape: primary,
            best,
            correctness,
            performance,
            baseline,
            baseline_ratios,
            tunes,
            dispatch: self.dispatch_section(dispatch),
        }
    }

    pub(super) fn benches(&self) -> &[BenchFile] {
        self.artifacts.benches.as_deref().unwrap_or_default()
    }

    /// The p50 of variant `name` on `shape` (median over seeds), if it was measured.
    pub(super) fn variant_p50(&self, name: &str, shape: &str) -> Option<f64> {
        let file = self.benches().iter().find(|f| f.name == name)?;
        shape_p50(&file.results, shape)
    }

    /// Why nothing was measured, when the bench stage skipped every variant (no GPU, no
    /// driver) or has no record of this workload's: gates on its results are then not
    /// checked rather than failed.
    pub(super) fn bench_all_skipped(&self) -> Option<String> {
        let files = self.benches();
        if files.is_empty() && !self.scope.workload.is_empty() {
            return Some(format!(
                "not checked: no bench results for the variants of `{}`; run the bench stage on a GPU",
                self.scope.workload
            ));
        }
        if files.is_empty() || !files.iter().all(|f| f.status == RunStatus::Skipped) {
            return None;
        }
        Some(format!(
            "not checked: bench {}",
            self.skipped_because(files[0].reason.as_deref())
        ))
    }

    pub(super) fn baselines(&self) -> &[BenchFile] {
        self.artifacts.baselines.as_deref().unwrap_or_default()
    }

    pub(super) fn primary_shape(&self) -> String {
        self.scope.primary.clone()
    }

    /// The stage of the given kind, if the pipeline has one.
    pub(super) fn stage_of(&self, kind: BuiltinKind) -> Option<&str> {
        self.pipeline
            .stages
            .iter()
            .find(|(_, s)| s.is(kind))
            .map(|(n, _)| n.as_str())
    }

    /// [`file_status`], a skip's reason cited.
    pub(super) fn file_status(&self, f: &BenchFile, build_failures: &[String]) -> String {
        let skipped = match f.status {
            RunStatus::Skipped => self.skipped_because(f.reason.as_deref()),
            _ => String::new(),
        };
        if let Some(why) = crate::measured::bench_file(f, self.builds()) {
            return format!("⏸ not measured for these sources: {why}");
        }
        let status = file_status(f, build_failures, &skipped);
        match self.correctness_detail(f) {
            Some(detail) if status.contains("correctness") => format!("{status}: {detail}"),
            _ => status,
        }
    }

    /// Why the outputs of a stage kind are absent (or empty: `missing` names them).
    pub(super) fn not_run(&self, kind: BuiltinKind, missing: &str) -> String {
        match self.stage_of(kind) {
            None => format!("not run: the pipeline has no `{}` stage", kind.as_str()),
            Some(name) => self.stage_not_run(name, missing),
        }
    }

    /// `not run: stage `x` skipped [^1]`, or what else its record says.
    pub(super) fn stage_not_run(&self, name: &str, missing: &str) -> String {
        let Some(st) = self.state.stages.get(name).filter(|s| s.status.is_some()) else {
            return format!(
                "not run: stage `{name}` has not produced {missing}; see `repro status`"
            );
        };
        if st.skipped() {
            return format!(
                "not run: stage `{name}` {}",
                self.skipped_because(st.reason.as_deref())
            );
        }
        let status = st.status.map_or("", Outcome::label);
        let reason = st
            .reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        format!("not run: stage `{name}` {status}{reason} (no {missing})")
    }

    /// The best variant ([`crate::best::best_variant`]).
    pub(super) fn best_variant(&self, primary: &str) -> Option<String> {
        crate::best::best_variant(self.benches(), primary).map(str::to_string)
    }

    /// A gate the bench stage recorded, with the variant whose file holds it.
    pub(super) fn recorded_gate(&self, gate: &str) -> Option<(&str, &GateResult)> {
        self.benches().iter().find_map(|f| {
            f.gates
                .iter()
                .find(|g| g.gate == gate)
                .map(|g| (f.name.as_str(), g))
        })
    }

    pub(super) fn ncu_for(&self, name: &str) -> Option<&NcuTarget> {
        self.artifacts.ncu.as_ref()?.targets.iter().find(|t| {
            t.variant == name
                && t.status.is_ok()
                && t.shape.as_deref().is_none_or(|s| s == self.scope.primary)
        })
    }

    pub(super) fn machines(&self) -> Machines {
        Machines::of(self.state, self.pipeline.stages.keys().map(String::as_str))
    }

    /// The stage whose recorded outputs include a path under `prefix`.
    pub(super) fn stage_writing(&self, prefix: &str) -> Option<&str> {
        self.state
            .stages
            .iter()
            .find(|(_, s)| s.outputs.keys().any(|p| p.starts_with(prefix)))
            .map(|(n, _)| n.as_str())
    }
}
