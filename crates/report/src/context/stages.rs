//! The stage table and the skips, each reason stated once.

use super::*;
use crate::state::StageState;
use repro_gpu::names_a_gpu;

impl Builder<'_> {
    pub(super) fn stage_rows(&self) -> Vec<StageRow> {
        let machines = self.machines();
        self.pipeline
            .stages
            .iter()
            .filter(|(_, s)| !s.is(BuiltinKind::Summarize))
            .map(|(name, spec)| {
                let st = self.state.stages.get(name);
                let status = match st.and_then(|s| s.status) {
                    Some(outcome) => {
                        let glyph = match outcome {
                            Outcome::Passed => "✅",
                            Outcome::Skipped => "⏭",
                            _ => "❌",
                        };
                        match st.and_then(|s| s.reason.as_deref()) {
                            Some(r) => {
                                format!("{glyph} {}", self.outcome_because(outcome, Some(r)))
                            }
                            None => format!("{glyph} {}", outcome.label()),
                        }
                    }
                    None => "– not run".into(),
                };
                let made_on = match st.and_then(|s| s.hardware.as_deref()) {
                    _ if spec.is(BuiltinKind::Build) => "any machine (cross-compiled)".to_string(),
                    Some(gpu) if names_a_gpu(gpu) && machines.mixed => {
                        machines.label_of(Some(name))
                    }
                    Some(gpu) if names_a_gpu(gpu) => gpu.to_string(),
                    _ => String::new(),
                };
                StageRow {
                    name: name.clone(),
                    kind: spec.uses.clone(),
                    status,
                    made_on,
                    time: st
                        .and_then(|s| s.elapsed_s)
                        .map(|t| format!("{t:.1} s"))
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    pub(super) fn skipped(&self) -> Vec<Skip> {
        let mut out = Vec::new();
        for (name, spec) in &self.pipeline.stages {
            if spec.is(BuiltinKind::Summarize) {
                continue;
            }
            match self.state.stages.get(name) {
                Some(StageState {
                    status: Some(outcome @ (Outcome::Skipped | Outcome::Failed)),
                    reason,
                    ..
                }) => out.push(Skip {
                    what: format!("stage `{name}`"),
                    reason: self.outcome_because(*outcome, reason.as_deref()),
                }),
                None if !self.produced(spec) => out.push(Skip {
                    what: format!("stage `{name}`"),
                    reason: "not run: no outputs and no record of it in the lock".into(),
                }),
                _ => {}
            }
        }
        for b in self.baselines().iter().filter(|b| !b.status.is_ok()) {
            out.push(Skip {
                what: format!("baseline `{}`", b.name),
                reason: self.status_because(&b.status, b.reason.as_deref()),
            });
        }
        for f in self.benches().iter().filter(|f| !f.status.is_ok()) {
            out.push(Skip {
                what: format!("bench `{}`", f.name),
                reason: self.status_because(&f.status, f.reason.as_deref()),
            });
        }
        // Runs skipped inside a file that ran (a baseline with no kernel for one shape).
        for (kind, files) in [("baseline", self.baselines()), ("bench", self.benches())] {
            for f in files.iter().filter(|f| f.status.is_ok()) {
                out.extend(
                    skipped_runs(kind, f)
                        .into_iter()
                        .map(|(what, reason)| Skip {
                            what,
                            reason: self.skipped_because(Some(&reason)),
                        }),
                );
            }
        }
        if let Some(ncu) = &self.artifacts.ncu {
            for t in ncu.targets.iter().filter(|t| !t.status.is_ok()) {
                out.push(Skip {
                    what: format!("profile target `{}`", t.target),
                    reason: self.status_because(&t.status, t.reason.as_deref()),
                });
            }
        }
        group_by_reason(out)
    }

    /// Whether the outputs a stage's kind writes are present.
    pub(super) fn produced(&self, spec: &repro_pipeline::StageSpec) -> bool {
        let a = self.artifacts;
        match spec.builtin() {
            Some(BuiltinKind::Build) => a.builds.is_some(),
            Some(BuiltinKind::Bench) => a.benches.is_some(),
            Some(BuiltinKind::Tune) => a.tune.is_some(),
            Some(BuiltinKind::Profile) => a.ncu.is_some(),
            _ if spec
                .outs
                .iter()
                .any(|o| o.starts_with("artifacts/bench/baselines")) =>
            {
                a.baselines.is_some()
            }
            _ => true,
        }
    }
}

/// Merge skip entries with the same reason into one line, in order of first appearance.
/// The runs of `f` that were skipped, one entry per (shape, reason): `baseline `x` on
/// `single` (3 runs)` and the reason its records give.
fn skipped_runs(kind: &str, f: &BenchFile) -> Vec<(String, String)> {
    let mut by_shape: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in f.results.iter().filter(|r| r.status == RunStatus::Skipped) {
        let reason = r
            .error
            .clone()
            .unwrap_or_else(|| "no reason recorded".into());
        *by_shape.entry((r.shape.clone(), reason)).or_default() += 1;
    }
    by_shape
        .into_iter()
        .map(|((shape, reason), n)| {
            let runs = if n == 1 { "run" } else { "runs" };
            (
                format!("{kind} `{}` on `{shape}` ({n} {runs})", f.name),
                reason,
            )
        })
        .collect()
}

pub(super) fn group_by_reason(skips: Vec<Skip>) -> Vec<Skip> {
    let mut out: Vec<Skip> = Vec::new();
    for s in skips {
        match out.iter_mut().find(|o| o.reason == s.reason) {
            Some(o) => {
                o.what.push_str(", ");
                o.what.push_str(&s.what);
            }
            None => out.push(s),
        }
    }
    out
}
