//! The tune section: best-so-far, the elite, invalid trials by reason.

use super::*;

impl Builder<'_> {
    /// The section of the scope's (first) tune stage.
    pub(super) fn tune_section(&self, primary: &str) -> Section<TuneSection> {
        let (stage, dir) = match self.scope.tunes.first() {
            Some((stage, dir)) => (Some(stage.as_str()), dir.as_str()),
            None => (None, repro_tune::options::DEFAULT_DIR),
        };
        let not_run = |missing: &str| match stage {
            Some(name) => self.stage_not_run(name, missing),
            None => self.not_run(BuiltinKind::Tune, missing),
        };
        let Some(tune) = &self.artifacts.tune else {
            return Section::not_run(not_run(&format!("{dir}/tune_log.csv")));
        };
        // A skipped tune writes an empty log: not "0 trials".
        if tune.trials.is_empty() {
            return Section::not_run(not_run(&format!("trials in {dir}/tune_log.csv")));
        }
        let control_p50 = self
            .scope
            .control
            .as_deref()
            .and_then(|c| self.variant_p50(c, primary));
        let mut section = tune_summary(tune, control_p50);
        section.lineage = self.best_lineage(tune);
        Section::ran(section)
    }
}

/// Best p50 so far after each trial (`None` until the first valid trial).
pub fn best_so_far(tune: &TuneData) -> Vec<(u32, Option<f64>)> {
    let mut best: Option<f64> = None;
    tune.trials
        .iter()
        .map(|t| {
            if t.status.is_ok() && t.correctness_pass != Some(false) {
                if let Some(p) = t.p50_us.filter(|p| p.is_finite()) {
                    best = Some(best.map_or(p, |b: f64| b.min(p)));
                }
            }
            (t.trial, best)
        })
        .collect()
}

pub(super) fn tune_summary(tune: &TuneData, control_p50: Option<f64>) -> TuneSection {
    let valid = tune.trials.iter().filter(|t| t.status.is_ok()).count();
    let mut reasons: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for t in tune.trials.iter().filter(|t| !t.status.is_ok()) {
        let e = reasons
            .entry(t.status.to_string())
            .or_insert((0, t.note.clone()));
        e.0 += 1;
    }
    let mut invalid_by_reason: Vec<ReasonCount> = reasons
        .into_iter()
        .map(|(reason, (count, example))| ReasonCount {
            reason,
            count,
            example: if example.is_empty() {
                NA.into()
            } else {
                example
            },
        })
        .collect();
    invalid_by_reason.sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    let mut best_rows = Vec::new();
    let mut last: Option<f64> = None;
    for (trial, best) in best_so_far(tune) {
        if best.is_some() && best != last {
            let cfg = tune
                .trials
                .iter()
                .find(|t| t.trial == trial)
                .map(|t| trial_config_text(&t.config))
                .unwrap_or_default();
            best_rows.push(BestRow {
                trial,
                p50: num(best, 2),
                config: cfg,
            });
            last = best;
        }
    }
    let best_vs_control = ratio(
        tune.elite
            .first()
            .map(|e| e.p50_us)
            .zip(control_p50)
            .map(|(b, c)| c / b),
    );
    TuneSection {
        trials: tune.trials.len(),
        valid,
        invalid: tune.trials.len() - valid,
        invalid_by_reason,
        elite: tune
            .elite
            .iter()
            .map(|e| EliteRow {
                rank: e.rank,
                trial: e.trial,
                p50: num(Some(e.p50_us), 2),
                config: config_text(&e.config),
                parents: if e.parents.is_empty() {
                    "initial".into()
                } else {
                    e.parents
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            })
            .collect(),
        best_so_far: best_rows,
        best_vs_control,
        lineage: None,
    }
}
