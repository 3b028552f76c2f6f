//! The tune section's lineage of the best trial: each step from its oldest ancestor (what
//! changed: a random sample, defines, a proposer's patch or source), and what separates
//! it from the tune's base (the kernel's own source with the base variant's defines): the
//! defines that differ and, for a proposed source, its diff.

use super::*;
use repro_schema::{EliteEntry, LineageStep};

impl Builder<'_> {
    /// The lineage of the elite's first member, when the tune recorded one.
    pub(super) fn best_lineage(&self, tune: &TuneData) -> Option<LineageView> {
        let best = tune.elite.first().filter(|e| !e.lineage.is_empty())?;
        let base = self.tune_base_defines();
        Some(LineageView {
            trial: best.trial,
            source: best.source.clone().unwrap_or_default(),
            steps: steps(&best.lineage),
            defines: define_changes(&base, &best.config),
            diff: best
                .diff
                .as_ref()
                .and_then(|file| tune.diffs.get(file).cloned()),
            diff_file: best.diff.clone().unwrap_or_default(),
        })
    }

    /// The defines every trial started from: the scope's tune stage's base variant's.
    fn tune_base_defines(&self) -> BTreeMap<String, String> {
        let stage = self.scope.tunes.first().map(|(name, _)| name);
        tune_stages(self.configs)
            .into_iter()
            .find(|(name, _)| Some(name) == stage)
            .map(|(_, o)| o.base_defines)
            .unwrap_or_default()
    }
}

fn steps(lineage: &[LineageStep]) -> Vec<LineageRow> {
    let mut rows = Vec::new();
    let mut before: Option<&LineageStep> = None;
    for s in lineage {
        let what = match (&s.patch, before) {
            (Some(patch), _) => format!("proposal (patch `{patch}`): {}", s.note),
            (None, Some(b)) if b.source != s.source => format!(
                "proposal (source `{}`): {}",
                s.source.as_deref().unwrap_or("own"),
                s.note
            ),
            (None, Some(b)) => {
                let changed = config_changes(&b.config, &s.config);
                format!("defines: {changed}")
            }
            (None, None) if s.source.is_some() => format!("proposal: {}", s.note),
            (None, None) => format!("start: {}", config_text(&s.config)),
        };
        rows.push(LineageRow {
            trial: s.trial,
            p50: num(s.p50_us, 2),
            what: what.trim_end_matches([':', ' ']).to_string(),
        });
        before = Some(s);
    }
    rows
}

/// `A 1 → 2, B = 3` for what differs from `from` to `to`; `same` when nothing does.
fn changes<F: PartialEq + std::fmt::Display, T: std::fmt::Display>(
    from: &BTreeMap<String, F>,
    to: &BTreeMap<String, T>,
    same: &str,
    as_from: impl Fn(&T) -> F,
) -> String {
    let text: Vec<String> = to
        .iter()
        .filter(|(k, v)| from.get(*k) != Some(&as_from(v)))
        .map(|(k, v)| match from.get(k) {
            Some(old) => format!("{k} {old} → {v}"),
            None => format!("{k} = {v}"),
        })
        .collect();
    if text.is_empty() {
        same.into()
    } else {
        text.join(", ")
    }
}

fn config_changes(from: &BTreeMap<String, i64>, to: &BTreeMap<String, i64>) -> String {
    changes(from, to, "unchanged", |v| *v)
}

/// The trial's defines against the base variant's.
fn define_changes(base: &BTreeMap<String, String>, config: &BTreeMap<String, i64>) -> String {
    changes(base, config, "no define changed", i64::to_string)
}

/// Elite entries whose diff file the report shows.
pub(crate) fn diff_files(elite: &[EliteEntry]) -> impl Iterator<Item = &str> {
    elite.iter().take(1).filter_map(|e| e.diff.as_deref())
}

#[cfg(test)]
mod lineage_tests {
    use super::*;
    use repro_schema::TrialStatus;

    fn step(
        trial: u32,
        config: &[(&str, i64)],
        source: Option<&str>,
        patch: Option<&str>,
    ) -> LineageStep {
        LineageStep {
            trial,
            generation: 0,
            parents: vec![],
            config: config.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            source: source.map(str::to_string),
            patch: patch.map(str::to_string),
            note: if patch.is_some() {
                "lazy rescale".into()
            } else {
                String::new()
            },
            status: TrialStatus::Ok,
            p50_us: Some(10.0 - trial as f64),
        }
    }

    #[test]
    fn steps_say_what_changed() {
        let rows = steps(&[
            step(2, &[("A", 1), ("B", 2)], None, None),
            step(5, &[("A", 2), ("B", 2)], None, None),
            step(9, &[("A", 2), ("B", 2)], Some("s1"), Some("p1")),
            step(12, &[("A", 2), ("B", 4)], Some("s1"), None),
        ]);
        let what: Vec<&str> = rows.iter().map(|r| r.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "start: A=1 B=2",
                "defines: A 1 → 2",
                "proposal (patch `p1`): lazy rescale",
                "defines: B 2 → 4"
            ]
        );
        assert_eq!(rows[3].p50, "-2.00");
        let base = BTreeMap::from([("A".to_string(), "2".to_string())]);
        assert_eq!(
            define_changes(&base, &BTreeMap::from([("A".into(), 2), ("B".into(), 4)])),
            "B = 4"
        );
        assert_eq!(
            define_changes(&base, &BTreeMap::from([("A".into(), 2)])),
            "no define changed"
        );
    }
}
