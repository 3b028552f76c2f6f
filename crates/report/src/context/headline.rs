//! The headline: the primary shape's best variant against the control and the baselines,
//! and the profile's note.

use super::*;

/// Why a baseline's ❌ does not fail the report.
const NOT_GATED: &str = "a baseline's correctness is shown, not gated (its ❌ fails no gate): a baseline is the reference the variants are timed against, not a kernel this pipeline ships; its numbers still count only where its records are correct (docs/guide/report.md, \"Reading reports/summary.md\").";

impl Builder<'_> {
    pub(super) fn headline(&self, primary: &str, best: Option<&str>) -> Headline {
        let machines = self.machines();
        let measured_by = |stage: Option<&str>| machines.label_of(stage);
        let baselines: Vec<&BenchFile> = self.baselines().iter().collect();
        let base_p50: Vec<Option<f64>> = baselines
            .iter()
            .map(|b| shape_p50(&b.results, primary))
            .collect();
        let vs = |p50: Option<f64>| -> Vec<String> {
            base_p50
                .iter()
                .map(|b| ratio(b.zip(p50).map(|(b, p)| b / p)))
                .collect()
        };
        let ncu_cells = |name: &str| {
            let t = self.ncu_for(name);
            (
                num(t.and_then(|t| t.tensor_core_util_pct), 1),
                num(t.and_then(|t| t.achieved_occupancy_pct), 1),
                num(t.and_then(|t| t.dram_bw_pct_peak), 1),
            )
        };
        // One row: the cells every kind shares come from its name and p50.
        let row = |name: String, kind: &str, p50: Option<f64>, status: String, machine: String| {
            let (tc_util, occupancy, dram) = ncu_cells(&name);
            HeadlineRow {
                name,
                kind: kind.into(),
                best: false,
                control: false,
                p50: num(p50, 2),
                vs: vs(p50),
                tc_util,
                occupancy,
                dram,
                status,
                machine,
            }
        };
        let mut rows = Vec::new();
        for b in &baselines {
            rows.push(row(
                b.name.clone(),
                "baseline",
                shape_p50(&b.results, primary),
                self.file_status(b, &[]),
                measured_by(self.stage_writing(repro_schema::BASELINE_DIR)),
            ));
        }
        let mut variants: Vec<&BenchFile> = self.benches().iter().collect();
        let control = self.scope.control.as_deref();
        variants.sort_by_key(|f| (Some(f.name.as_str()) != control, f.name.clone()));
        for v in variants {
            rows.push(HeadlineRow {
                best: Some(v.name.as_str()) == best,
                control: Some(v.name.as_str()) == control,
                ..row(
                    v.name.clone(),
                    "variant",
                    shape_p50(&v.results, primary),
                    self.file_status(v, &self.build_failures(&v.name)),
                    measured_by(self.stage_of(BuiltinKind::Bench)),
                )
            });
        }
        let elite = self.scope.tunes.first().and_then(|(stage, dir)| {
            let tune = self.artifacts.tunes.get(dir)?;
            Some((stage, dir, tune.elite.first()?))
        });
        if let Some((stage, dir, top)) = elite {
            let ok = top
                .bench
                .iter()
                .all(|r| r.status.is_ok() && r.correctness_pass == Some(true));
            let folder = dir.rsplit('/').next().unwrap_or(dir);
            rows.push(row(
                format!("{folder}-top{}", top.rank),
                "tuned",
                shape_p50(&top.bench, primary).or(Some(top.p50_us)),
                if ok { "✅ pass" } else { "❌ correctness" }.into(),
                measured_by(Some(stage.as_str())),
            ));
        }
        let baseline_note = if baselines.is_empty() {
            Some(match self.artifacts.baselines {
                Some(_) => "no baseline records in artifacts/bench/baselines/".to_string(),
                None => self.not_run_cmd_baselines(),
            })
        } else {
            rows.iter()
                .any(|r| r.kind == "baseline" && r.status.starts_with('❌'))
                .then(|| NOT_GATED.to_string())
        };
        Headline {
            baselines: baselines.iter().map(|b| b.name.clone()).collect(),
            profile_note: self.profile_note(&rows),
            rows,
            baseline_note,
            reuse_note: self.reuse_note(),
        }
    }

    /// Which results this run reused from an earlier one instead of measuring, and from
    /// which run (`stages::reuse`).
    pub(super) fn reuse_note(&self) -> Option<String> {
        let mut by_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut note = |m: Option<&repro_schema::Measured>, what: String| {
            if let Some(m) = m.filter(|m| m.reused) {
                let run = repro_schema::describe_run(m);
                by_run.entry(run).or_default().push(what);
            }
        };
        for f in self.benches() {
            note(f.measured.as_ref(), format!("bench `{}`", f.name));
        }
        for t in self.artifacts.ncu.iter().flat_map(|n| &n.targets) {
            note(t.measured.as_ref(), format!("profile `{}`", t.target));
        }
        (!by_run.is_empty()).then(|| {
            by_run
                .iter()
                .map(|(run, what)| format!("{} from the run of {run}", what.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// Why nothing was profiled: no profile results, a skipped profile stage, or no target
    /// that succeeded. `None` when something was.
    pub(super) fn profile_not_run(&self) -> Option<String> {
        let Some(ncu) = &self.artifacts.ncu else {
            return Some(self.not_run(BuiltinKind::Profile, "artifacts/ncu/summary.json"));
        };
        if let Some(why) = self.stage_skipped(BuiltinKind::Profile) {
            return Some(why.replacen("not run", "not profiled", 1));
        }
        if ncu.targets.iter().any(|t| t.status.is_ok()) {
            return None;
        }
        Some(match self.all_skipped_reason(&ncu.targets) {
            Some(reason) => format!("not profiled: {reason}"),
            None => "not profiled: no target of the profile stage succeeded".into(),
        })
    }

    /// Why some of the headline's profile columns are n/a: the rows of the table that have
    /// no profile of the primary shape (`None` when every row has one).
    pub(super) fn profile_note(&self, rows: &[HeadlineRow]) -> Option<String> {
        if let Some(why) = self.profile_not_run() {
            return Some(why);
        }
        let unprofiled: Vec<&str> = rows
            .iter()
            .filter(|r| self.ncu_for(&r.name).is_none())
            .map(|r| r.name.as_str())
            .collect();
        (!unprofiled.is_empty()).then(|| {
            format!(
                "no profile of the primary shape for {}",
                unprofiled.join(", ")
            )
        })
    }
}
