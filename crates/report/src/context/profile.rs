//! The profile section: Nsight Compute's metrics per target.

use super::agreement::gap;
use super::*;
use repro_schema::MetricSet;

impl Builder<'_> {
    pub(super) fn profile_section(&self) -> Section<ProfileSection> {
        let Some(ncu) = &self.artifacts.ncu else {
            return Section::not_run(
                self.not_run(BuiltinKind::Profile, "artifacts/ncu/summary.json"),
            );
        };
        if let Some(why) = self.stage_skipped(BuiltinKind::Profile) {
            return Section::not_run(why);
        }
        if let Some(reason) = self.all_skipped_reason(&ncu.targets) {
            return Section::not_run(format!("not run: every target {reason}"));
        }
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        let targets = ncu
            .targets
            .iter()
            .map(|t| {
                for (k, v) in &t.metric_names {
                    names.entry(k.clone()).or_insert_with(|| v.clone());
                }
                let mut stalls = t.top_stalls.clone();
                stalls.sort_by(|a, b| b.pct.total_cmp(&a.pct).then(a.reason.cmp(&b.reason)));
                let top: Vec<String> = stalls
                    .iter()
                    .take(3)
                    .map(|s| format!("{} {:.1}%", s.reason, s.pct))
                    .collect();
                ProfileRow {
                    target: t.target.clone(),
                    variant: t.variant.clone(),
                    status: match &t.status {
                        RunStatus::Ok => match ok_note(t) {
                            Some(note) => format!("✅ ok: {note}"),
                            None => "✅ ok".into(),
                        },
                        other => format!(
                            "{} {}",
                            if *other == RunStatus::Skipped {
                                "⏭"
                            } else {
                                "❌"
                            },
                            self.status_because(other, t.reason.as_deref())
                        ),
                    },
                    kernel_time: ncu_time(t),
                    vs_harness: self
                        .harness_p50_of(t)
                        .zip(t.kernel_time_us)
                        .map_or_else(|| NA.to_string(), |(h, n)| gap(h, n)),
                    sm_util: num(t.sm_util_pct, 1),
                    tc_util: num(t.tensor_core_util_pct, 1),
                    occupancy: num(t.achieved_occupancy_pct, 1),
                    registers: num(t.registers_per_thread, 0),
                    l2_hit: num(t.l2_hit_rate_pct, 1),
                    dram: num(t.dram_bw_pct_peak, 1),
                    top_stalls: if top.is_empty() {
                        NA.into()
                    } else {
                        top.join(", ")
                    },
                }
            })
            .collect();
        Section::ran(ProfileSection {
            clock_control: ncu.clock_control.clone(),
            cache_control: ncu.cache_control.clone(),
            targets,
            metric_names: names
                .into_iter()
                .map(|(field, metric)| MetricName { field, metric })
                .collect(),
            l2_note: l2_note(&ncu.targets),
            one_pass_note: one_pass_note(&ncu.targets),
        })
    }

    /// The `gates.profile` rules as the profile stage recorded them; `None` when the
    /// pipeline declares none.
    pub(super) fn profile_gates(
        &self,
        failed: &mut Vec<String>,
    ) -> Option<Section<Vec<ProfileGateRow>>> {
        if self.pipeline.gates.profile.is_empty() {
            return None;
        }
        let Some(ncu) = &self.artifacts.ncu else {
            return Some(Section::not_run(
                self.not_run(BuiltinKind::Profile, "artifacts/ncu/summary.json"),
            ));
        };
        if ncu.gates.is_empty() {
            let why = self.stage_skipped(BuiltinKind::Profile).unwrap_or_else(|| {
                "not checked: artifacts/ncu/summary.json records no profile gate; run the profile stage".into()
            });
            return Some(Section::not_run(why));
        }
        let rows = ncu
            .gates
            .iter()
            .map(|g| {
                let rule = g
                    .gate
                    .strip_prefix("profile.")
                    .unwrap_or(&g.gate)
                    .to_string();
                let measured = g.detail.clone().unwrap_or_else(|| num(Some(g.measured), 2));
                if !g.pass {
                    failed.push(format!("profile {rule} ({}): {measured}", g.subject));
                }
                ProfileGateRow {
                    rule,
                    target: g.subject.clone(),
                    measured,
                    result: mark(g.pass).to_string(),
                }
            })
            .collect();
        Some(Section::ran(rows))
    }

    /// When every target failed or was skipped for one same reason: `<status>: <reason>`
    /// (a skip's reason cited).
    pub(super) fn all_skipped_reason(&self, targets: &[NcuTarget]) -> Option<String> {
        let first = targets.first()?;
        let same = targets
            .iter()
            .all(|t| !t.status.is_ok() && t.status == first.status && t.reason == first.reason);
        same.then(|| self.status_because(&first.status, first.reason.as_deref()))
    }
}

/// An L2 hit rate above 100 % is ncu's arithmetic, not a cache that hits more than it is
/// asked: ncu's own `lts__t_sector_hit_rate.pct` divides hits by lookups counted in different
/// replay passes, which a short kernel does not give the same traffic. The profile stage's
/// rate never exceeds 100 (hits over hits and misses); a summary read from an export with
/// only ncu's rate can. Said once, naming the targets.
fn l2_note(targets: &[NcuTarget]) -> Option<String> {
    targets_where(targets, |t| t.l2_hit_rate_pct.is_some_and(|p| p > 100.0)).map(|over| {
        format!(
            "L2 hit % above 100 ({over}): ncu divides L2 hits by L2 lookups collected in different replay passes, and a kernel this short (well under 20 µs) does not give both passes the same traffic; read it as \"nearly every lookup hits\", not as a precise rate (docs/guide/report.md, \"Profile\")."
        )
    })
}

/// The targets ncu profiled with the one-pass list, whose SM %, L2 hit % and stalls read
/// n/a for that reason: said once, naming them.
fn one_pass_note(targets: &[NcuTarget]) -> Option<String> {
    targets_where(targets, |t| t.metric_set == Some(MetricSet::OnePass)).map(|light| {
        format!(
            "Profiled in one pass only ({light}): the kernel time, tensor pipe, occupancy, registers and DRAM throughput; SM %, L2 hit % and stalls need the full metric list (15 replay passes per launch on an H200, against one), which the stage spends on each tune's best elite and the fastest variant on each shape (`full_profile: chosen`; `all` profiles every target in full; docs/guide/ncu.md, \"One pass or the full profile\")."
        )
    })
}

/// The labels of the targets `keep` keeps, comma-separated; `None` when it keeps none.
fn targets_where(targets: &[NcuTarget], keep: impl Fn(&NcuTarget) -> bool) -> Option<String> {
    let named: Vec<&str> = targets
        .iter()
        .filter(|t| keep(t))
        .map(|t| t.target.as_str())
        .collect();
    (!named.is_empty()).then(|| named.join(", "))
}

/// What a profiled record says of itself beyond `ok`, up to its first `:` (a baseline call
/// the script did not run again: `profiled once as <baseline>@<shape>, the same kernel on
/// the same inputs`).
pub(super) fn ok_note(t: &NcuTarget) -> Option<&str> {
    let note = t.reason.as_deref()?;
    Some(note.split(':').next().unwrap_or(note))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, set: Option<MetricSet>) -> NcuTarget {
        let mut t: NcuTarget = serde_json::from_value(serde_json::json!({
            "target": name, "variant": name, "kernel": "k", "status": "ok",
            "sm_util_pct": null, "tensor_core_util_pct": null, "achieved_occupancy_pct": null,
            "registers_per_thread": null, "l2_hit_rate_pct": null, "dram_bw_pct_peak": null,
            "kernel_time_us": 1.0, "metric_names": {}, "raw": {}, "top_stalls": []
        }))
        .unwrap();
        t.metric_set = set;
        t
    }

    #[test]
    fn the_targets_profiled_in_one_pass_are_named_once() {
        let targets = [
            target("top1", Some(MetricSet::Full)),
            target("mma-m64", Some(MetricSet::OnePass)),
            target("old", None),
            target("torch@small", Some(MetricSet::OnePass)),
        ];
        let note = one_pass_note(&targets).unwrap();
        assert!(
            note.starts_with("Profiled in one pass only (mma-m64, torch@small): "),
            "{note}"
        );
        assert!(note.contains("`full_profile: chosen`"), "{note}");
        assert_eq!(one_pass_note(&targets[..1]), None);
        assert_eq!(
            one_pass_note(&targets[2..3]),
            None,
            "a summary from before the choice"
        );
    }
}
