//! The baselines measured two ways: each baseline's ratio against the best variant by the
//! harness's stream time and by ncu's kernel time, on every shape the profile stage
//! profiled it on; and why a file's correctness failed, computed from its records.

use super::agreement::gap;
use super::profile::ok_note;
use super::*;
use repro_ncu::options::ProfileOptions;
use repro_pipeline::workload::Workloads;
use repro_schema::verdict::Limit;
use repro_schema::NcuKernel;

/// How many characters of a kernel's name the table keeps (cuDNN's run past 100).
const KERNEL_NAME_CHARS: usize = 60;

impl Builder<'_> {
    /// One row per (baseline, shape): the shapes the profile stage's `baselines:` names for
    /// it, else the primary.
    pub(super) fn baseline_ratios(
        &self,
        primary: &str,
        best: Option<&str>,
    ) -> Section<Vec<BaselineRatioRow>> {
        let present: Vec<&BenchFile> = self
            .baselines()
            .iter()
            .filter(|b| b.status != RunStatus::Skipped)
            .collect();
        if present.is_empty() {
            return Section::not_run("not run: no baseline was measured".into());
        }
        let Some(best) = best else {
            return Section::not_run("not run: no best variant to compare with".into());
        };
        let declared = self.profiled_baseline_shapes();
        let mut rows = Vec::new();
        for b in present {
            let shapes = declared
                .get(&b.name)
                .cloned()
                .unwrap_or_else(|| vec![primary.to_string()]);
            for shape in shapes {
                rows.push(self.baseline_ratio_row(b, best, &shape, primary));
            }
        }
        Section::ran(rows)
    }

    fn baseline_ratio_row(
        &self,
        b: &BenchFile,
        best: &str,
        shape: &str,
        primary: &str,
    ) -> BaselineRatioRow {
        let harness_ratio = shape_p50(&b.results, shape)
            .zip(self.variant_p50(best, shape))
            .map(|(theirs, ours)| theirs / ours);
        let harness = shape_p50(&b.results, shape)
            .zip(self.variant_p50(best, shape))
            .map_or_else(
                || format!("{NA}: no harness p50 of both on `{shape}`"),
                |(theirs, ours)| {
                    format!(
                        "{} ({theirs:.2} ÷ {ours:.2} µs)",
                        ratio(Some(theirs / ours))
                    )
                },
            );
        let theirs = self.ncu_record(&format!("{}@{shape}", b.name));
        let ours = if shape == primary {
            self.ncu_for(best).map(Ok)
        } else {
            self.ncu_record(&format!("{best}@{shape}"))
        };
        let kernels = match &theirs {
            Some(Ok(t)) if !t.kernels.is_empty() => match ok_note(t) {
                // A call the script did not run again: say whose profile it is.
                Some(note) => format!("{} ({note})", kernel_list(&t.kernels)),
                None => kernel_list(&t.kernels),
            },
            _ => NA.into(),
        };
        let ncu_ratio = match (&theirs, &ours) {
            (Some(Ok(t)), Some(Ok(o))) => {
                t.kernel_time_us.zip(o.kernel_time_us).map(|(t, o)| t / o)
            }
            _ => None,
        };
        let agreement = harness_ratio
            .zip(ncu_ratio)
            .map_or_else(|| NA.to_string(), |(h, n)| gap(h, n));
        let ncu = match (theirs, ours) {
            (Some(Ok(t)), Some(Ok(o))) => match ncu_ratio {
                Some(r) => format!("{} ({} ÷ {} µs)", ratio(Some(r)), ncu_time(t), ncu_time(o)),
                None => format!("{NA}: ncu measured no kernel time"),
            },
            (Some(Err(why)), _) => format!("{NA}: {} {why}", b.name),
            (_, Some(Err(why))) => format!("{NA}: {best} {why}"),
            (None, _) | (_, None) => format!("{NA}: {}", self.unprofiled_why()),
        };
        BaselineRatioRow {
            baseline: b.name.clone(),
            shape: shape.to_string(),
            best: best.to_string(),
            harness,
            ncu,
            agreement,
            kernels,
        }
    }

    /// The profile record labelled `label`: `Ok` when profiled, else why not.
    fn ncu_record(&self, label: &str) -> Option<Result<&NcuTarget, String>> {
        let t = self
            .artifacts
            .ncu
            .as_ref()?
            .targets
            .iter()
            .find(|t| t.target == label)?;
        Some(match &t.status {
            RunStatus::Ok => Ok(t),
            status => Err(format!(
                "{status}: {}",
                t.reason.as_deref().unwrap_or("no reason given")
            )),
        })
    }

    /// Why a (baseline, shape) has no profile record.
    fn unprofiled_why(&self) -> String {
        self.profile_not_run().unwrap_or_else(|| {
            "not profiled: the profile stage's `baselines:` does not list it".into()
        })
    }

    /// Each baseline's shapes, from the profile stages' `baselines:` option.
    fn profiled_baseline_shapes(&self) -> BTreeMap<String, Vec<String>> {
        self.configs
            .of::<ProfileOptions>()
            .flat_map(|(_, o)| &o.baselines)
            .map(|(name, b)| (name.clone(), b.shapes.clone()))
            .collect()
    }

    /// Why `f`'s correctness failed, computed from its records: each failing record (timed
    /// or not) with the thresholds it exceeded or the figures that are not finite, by the
    /// rule the run and the bench stage judged them with ([`Limit::judge`]), and whether
    /// every timed record passes. `None` when every record that ran passes.
    pub(super) fn correctness_detail(&self, f: &BenchFile) -> Option<String> {
        let failing: Vec<&BenchResult> = f
            .results
            .iter()
            .filter(|r| r.status.is_ok() && r.correctness_pass != Some(true))
            .collect();
        if failing.is_empty() {
            return None;
        }
        let workloads = Workloads::of(self.pipeline);
        let decl = workloads.get(&self.scope.workload);
        let class = f
            .precision
            .clone()
            .or_else(|| decl.and_then(|d| d.precision.clone()));
        let exceeded = |r: &BenchResult| -> String {
            let absolute = decl
                .and_then(|d| d.recipes.get(&r.inputs))
                .is_none_or(|recipe| recipe.absolute_gates);
            let over: Vec<String> = self
                .scope
                .gates
                .as_ref()
                .map(|g| g.thresholds(class.as_deref(), absolute))
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(figure, limit)| {
                    let value = figure_value(r, figure)?;
                    Limit::at_most(limit).judge(value).failure(figure.name())
                })
                .collect();
            let timed = if r.p50_us.is_some() {
                "timed"
            } else {
                "untimed"
            };
            let what = if over.is_empty() {
                "failed its gates".to_string()
            } else {
                over.join(", ")
            };
            format!("{} {} seed {} ({timed}): {what}", r.shape, r.inputs, r.seed)
        };
        let timed_pass = f
            .results
            .iter()
            .filter(|r| r.p50_us.is_some())
            .all(|r| r.correctness_pass == Some(true));
        let mut text = failing
            .iter()
            .map(|r| exceeded(r))
            .collect::<Vec<_>>()
            .join("; ");
        if timed_pass {
            text.push_str("; every timed record passes");
        }
        Some(text)
    }
}

/// A record's value of one gate figure.
fn figure_value(r: &BenchResult, figure: repro_pipeline::workload::spec::Figure) -> Option<f64> {
    use repro_pipeline::workload::spec::Figure;
    match figure {
        Figure::MaxAbsErr => r.max_abs_err,
        Figure::MeanAbsErr => r.mean_abs_err,
        Figure::PctBad => r.pct_bad,
        Figure::MaxErrOverRefStd => r.max_err_over_ref_std,
        Figure::RelL2Err => r.rel_l2_err,
    }
}

/// `` `name` 8.13 µs + `name` 0.52 µs ``, each name cut to [`KERNEL_NAME_CHARS`].
fn kernel_list(kernels: &[NcuKernel]) -> String {
    kernels
        .iter()
        .map(|k| {
            let name: String = k.name.chars().take(KERNEL_NAME_CHARS).collect();
            let cut = if name.len() < k.name.len() { "…" } else { "" };
            format!("`{name}{cut}` {} µs", num(k.time_us, 2))
        })
        .collect::<Vec<_>>()
        .join(" + ")
}
