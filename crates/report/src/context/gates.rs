//! The gate sections: ptxas, correctness, performance against the control, and the
//! comparisons with the baselines.

use super::agreement::{by_ncu, row_verdict};
use super::*;
use repro_schema::verdict::Limit;
use repro_schema::ArchBuild;
use repro_schema::BuildRecord;

impl Builder<'_> {
    pub(super) fn not_run_cmd_baselines(&self) -> String {
        let stage = self
            .pipeline
            .stages
            .iter()
            .find(|(_, s)| {
                s.outs
                    .iter()
                    .any(|o| o.starts_with("artifacts/bench/baselines"))
            })
            .map(|(n, _)| n.clone());
        match stage {
            None => "not run: the pipeline has no stage writing artifacts/bench/baselines".into(),
            Some(name) => self.stage_not_run(&name, "artifacts/bench/baselines/"),
        }
    }

    /// Failed ptxas gates and compile errors of a variant, as short labels.
    pub(super) fn build_failures(&self, variant: &str) -> Vec<String> {
        let Some(b) = self
            .artifacts
            .builds
            .as_ref()
            .and_then(|bs| bs.iter().find(|b| b.variant == variant))
        else {
            return Vec::new();
        };
        if !b.status.is_ok() {
            return vec!["compile error".into()];
        }
        if b.gates().any(|(_, g)| !g.pass) {
            vec!["ptxas".into()]
        } else {
            Vec::new()
        }
    }

    pub(super) fn ptxas_gates(&self, failed: &mut Vec<String>) -> Section<Vec<PtxasRow>> {
        let Some(builds) = &self.artifacts.builds else {
            return Section::not_run(self.not_run(BuiltinKind::Build, "artifacts/build/"));
        };
        let mut rows = Vec::new();
        for b in builds {
            for (arch, build) in &b.archs {
                rows.extend(self.ptxas_rows(b, arch, build, failed));
            }
        }
        Section::ran(rows)
    }

    /// The rows of one architecture's build of a variant: one per entry, or one saying it
    /// did not compile.
    fn ptxas_rows(
        &self,
        b: &BuildRecord,
        arch: &str,
        build: &ArchBuild,
        failed: &mut Vec<String>,
    ) -> Vec<PtxasRow> {
        if !build.ok() {
            let err = build
                .error
                .as_deref()
                .unwrap_or("no message")
                .lines()
                .next()
                .unwrap_or("");
            failed.push(format!("build {} ({arch}): compile error", b.variant));
            return vec![PtxasRow {
                variant: b.variant.clone(),
                arch: arch.to_string(),
                entry: b.entry.clone(),
                registers: NA.into(),
                smem: NA.into(),
                spills: NA.into(),
                result: format!("❌ compile error: {err}"),
            }];
        }
        let mut rows = Vec::new();
        for e in &build.entries {
            let gates: Vec<&GateResult> = build
                .gates
                .iter()
                .filter(|g| g.subject.is_empty() || g.subject == e.name)
                .collect();
            let spills = e
                .spill_store_bytes
                .zip(e.spill_load_bytes)
                .map(|(s, l)| s + l);
            // A gated figure shows what the gate judged (shared memory: static plus
            // dynamic); an ungated one what ptxas reported.
            let cell = |gate: &str, value: Option<u64>| {
                let shown = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or(NA.into());
                match gates.iter().find(|g| g.gate == gate) {
                    Some(g) => {
                        let judged = (!g.measured.is_nan()).then_some(g.measured as u64);
                        format!(
                            "{} {} {} {}",
                            shown(judged),
                            op_symbol(&g.op),
                            g.threshold,
                            mark(g.pass)
                        )
                    }
                    None => shown(value),
                }
            };
            let pass = gates.iter().all(|g| g.pass);
            for g in gates.iter().filter(|g| !g.pass) {
                failed.push(format!(
                    "{} {} ({arch}, {}): {} {} {}",
                    g.gate,
                    b.variant,
                    e.name,
                    g.measured,
                    violated_symbol(&g.op),
                    g.threshold
                ));
            }
            rows.push(PtxasRow {
                variant: b.variant.clone(),
                arch: arch.to_string(),
                entry: e.name.clone(),
                registers: cell("ptxas.max_registers", e.registers.map(u64::from)),
                smem: cell("ptxas.max_smem_bytes", e.smem_bytes),
                spills: cell("ptxas.max_spill_bytes", spills),
                result: mark(pass).to_string(),
            });
        }
        rows
    }

    pub(super) fn correctness_gates(&self, failed: &mut Vec<String>) -> Section<CorrectnessTable> {
        let Some(benches) = &self.artifacts.benches else {
            return Section::not_run(self.not_run(BuiltinKind::Bench, "artifacts/bench/"));
        };
        if let Some(why) = self.bench_all_skipped() {
            return Section::not_run(why);
        }
        let mut rows = Vec::new();
        for f in benches {
            for r in &f.results {
                let subject = format!("{} {}", f.name, r.run_subject());
                if !r.status.is_ok() {
                    let skipped = r.status == RunStatus::Skipped;
                    let why = if skipped {
                        self.skipped_because(r.error.as_deref())
                    } else {
                        let error = r.error.clone().unwrap_or_else(|| r.status.to_string());
                        format!("{}: {error}", r.status)
                    };
                    let mark = if skipped { "⏭" } else { "❌" };
                    if !skipped {
                        failed.push(format!("correctness {subject}: {}", r.status));
                    }
                    rows.push(CorrectnessRow {
                        variant: f.name.clone(),
                        shape: r.shape.clone(),
                        inputs: r.inputs.clone(),
                        seed: r.seed,
                        max_abs_err: NA.into(),
                        mean_abs_err: NA.into(),
                        pct_bad: NA.into(),
                        max_err_over_ref_std: NA.into(),
                        rel_l2_err: NA.into(),
                        result: format!("{mark} {why}"),
                    });
                    continue;
                }
                let pass = r.correctness_pass == Some(true);
                if !pass {
                    failed.push(format!(
                        "correctness {subject}: max_abs_err {}",
                        figure(r.max_abs_err, 6)
                    ));
                }
                let nan = r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0);
                rows.push(CorrectnessRow {
                    variant: f.name.clone(),
                    shape: r.shape.clone(),
                    inputs: r.inputs.clone(),
                    seed: r.seed,
                    max_abs_err: figure(r.max_abs_err, 6),
                    mean_abs_err: figure(r.mean_abs_err, 6),
                    pct_bad: figure(r.pct_bad, 3),
                    max_err_over_ref_std: figure(r.max_err_over_ref_std, 6),
                    rel_l2_err: figure(r.rel_l2_err, 6),
                    result: if nan > 0 {
                        format!("{} ({nan} NaN/Inf)", mark(pass))
                    } else {
                        mark(pass).to_string()
                    },
                });
            }
        }
        Section::ran(CorrectnessTable {
            passed: rows.iter().filter(|r| r.result.starts_with('✅')).count(),
            total: rows.len(),
            thresholds: self
                .scope
                .gates
                .as_ref()
                .map_or_else(|| NA.to_string(), thresholds_text),
            rows,
        })
    }

    pub(super) fn performance_gates(
        &self,
        primary: &str,
        best: Option<&str>,
        failed: &mut Vec<String>,
    ) -> Section<Vec<PerfRow>> {
        if self.artifacts.benches.is_none() {
            return Section::not_run(self.not_run(BuiltinKind::Bench, "artifacts/bench/"));
        }
        if let Some(why) = self.bench_all_skipped() {
            return Section::not_run(why);
        }
        let Some(control) = self.scope.control.as_deref() else {
            return Section::not_run(
                "not checked: pipeline.yaml names no `control` variant for this workload".into(),
            );
        };
        let threshold = self
            .pipeline
            .gates
            .performance
            .as_ref()
            .and_then(|p| p.min_speedup_vs_control);
        let Some(best) = best else {
            let row = perf_row(
                "best variant vs control".into(),
                None,
                threshold,
                failed,
                "performance: no correct variant to compare",
            );
            return Section::ran(vec![row]);
        };
        let what = format!("{best} vs {control} ({primary})");
        let ncu = self.ncu_speedup(control, best, primary);
        if let Some((_, gate)) = self.recorded_gate(CONTROL_GATE) {
            let row = recorded_row(what, gate, failed, "performance");
            return Section::ran(vec![with_ncu(row, ncu, Some(gate.threshold))]);
        }
        let speedup = self
            .variant_p50(control, primary)
            .zip(self.variant_p50(best, primary))
            .map(|(c, b)| c / b);
        let row = perf_row(
            what.clone(),
            speedup,
            threshold,
            failed,
            &format!("performance {what}"),
        );
        Section::ran(vec![with_ncu(row, ncu, threshold)])
    }

    pub(super) fn baseline_gates(
        &self,
        primary: &str,
        best: Option<&str>,
        failed: &mut Vec<String>,
    ) -> Section<Vec<PerfRow>> {
        if self.baselines().is_empty() {
            return Section::not_run(match self.artifacts.baselines {
                Some(_) => "not run: no baseline records".into(),
                None => self.not_run_cmd_baselines(),
            });
        }
        let first = &self.baselines()[0];
        if self
            .baselines()
            .iter()
            .all(|b| b.status == RunStatus::Skipped && b.reason == first.reason)
        {
            return Section::not_run(format!(
                "not run: every baseline {}",
                self.skipped_because(first.reason.as_deref())
            ));
        }
        let best_p50 = best.and_then(|b| self.variant_p50(b, primary));
        let thresholds = self
            .pipeline
            .gates
            .performance
            .as_ref()
            .map(|p| p.min_speedup_vs_baseline.clone())
            .unwrap_or_default();
        let rows = self
            .baselines()
            .iter()
            .map(|b| {
                let what = format!(
                    "{} vs {} ({primary})",
                    best.unwrap_or("best variant"),
                    b.name
                );
                let speedup = shape_p50(&b.results, primary)
                    .zip(best_p50)
                    .map(|(bp, p)| bp / p);
                let ncu = best.and_then(|best| self.ncu_speedup(&b.name, best, primary));
                let threshold = thresholds.get(&b.name).copied();
                if b.status == RunStatus::Skipped {
                    return PerfRow {
                        what,
                        measured: NA.into(),
                        threshold: thresholds
                            .get(&b.name)
                            .map(|t| format!("≥ {t:.2}×"))
                            .unwrap_or_else(|| "none".into()),
                        result: format!("⏭ baseline {}", self.skipped_because(b.reason.as_deref())),
                        by_ncu: NA.into(),
                    };
                }
                if let Some((_, gate)) = self.recorded_gate(&baseline_gate(&b.name)) {
                    let row = recorded_row(what, gate, failed, "baseline");
                    return with_ncu(row, ncu, Some(gate.threshold));
                }
                let row = perf_row(
                    what.clone(),
                    speedup,
                    threshold,
                    failed,
                    &format!("baseline {what}"),
                );
                with_ncu(row, ncu, threshold)
            })
            .collect();
        Section::ran(rows)
    }
}

impl Builder<'_> {
    /// `fast`'s speedup over `slow` on `shape` by their median ncu kernel times.
    fn ncu_speedup(&self, slow: &str, fast: &str, shape: &str) -> Option<f64> {
        Some(self.ncu_time_of(slow, shape)? / self.ncu_time_of(fast, shape)?)
    }
}

/// `row` with the same comparison by ncu ([`by_ncu`]).
fn with_ncu(row: PerfRow, ncu: Option<f64>, threshold: Option<f64>) -> PerfRow {
    PerfRow {
        by_ncu: by_ncu(ncu, threshold, row_verdict(&row)),
        ..row
    }
}

/// A recorded error figure: [`num`], but one that is NaN or infinite shows as such (it is
/// why the record failed), not as `n/a` (not measured).
fn figure(x: Option<f64>, decimals: usize) -> String {
    match x {
        Some(v) if !v.is_finite() => v.to_string(),
        _ => num(x, decimals),
    }
}

/// The gate the bench stage records for the best variant against the control.
pub(super) use crate::best::CONTROL_GATE;

/// The gate the bench stage records for the best variant against baseline `name`.
fn baseline_gate(name: &str) -> String {
    format!("performance.min_speedup_vs_{name}")
}

/// A row for a gate as the bench stage recorded it: its measurement, threshold and verdict,
/// never judged again here. A recorded measurement of 0 means there was none (the subject
/// says why).
fn recorded_row(what: String, gate: &GateResult, failed: &mut Vec<String>, kind: &str) -> PerfRow {
    let measured = (gate.measured > 0.0 && gate.measured.is_finite()).then_some(gate.measured);
    if !gate.pass {
        failed.push(match measured {
            Some(m) => format!("{kind} {what}: {m:.3}× < {:.2}×", gate.threshold),
            None => format!("{kind} {what}: no measurement ({})", gate.subject),
        });
    }
    let result = match (gate.pass, measured) {
        (true, _) => mark(true).to_string(),
        (false, Some(_)) => mark(false).to_string(),
        (false, None) => "❌ no measurement".to_string(),
    };
    PerfRow {
        what,
        measured: measured.map_or(NA.to_string(), |m| format!("{m:.3}×")),
        threshold: format!("≥ {:.2}×", gate.threshold),
        result,
        by_ncu: NA.into(),
    }
}

/// A row the report computes itself, for comparisons without a recorded gate: artifacts
/// from before the bench stage recorded its gates, and comparisons with no threshold.
pub(super) fn perf_row(
    what: String,
    measured: Option<f64>,
    threshold: Option<f64>,
    failed: &mut Vec<String>,
    label: &str,
) -> PerfRow {
    let (threshold_s, result) = match (measured, threshold) {
        (_, None) => ("none".to_string(), "— (no threshold)".to_string()),
        (Some(m), Some(t)) => {
            let pass = Limit::at_least(t).judge(m).pass();
            if !pass {
                failed.push(format!("{label}: {m:.3}× < {t:.2}×"));
            }
            (format!("≥ {t:.2}×"), mark(pass).to_string())
        }
        (None, Some(t)) => {
            failed.push(format!("{label}: no measurement"));
            (format!("≥ {t:.2}×"), "❌ no measurement".to_string())
        }
    };
    PerfRow {
        what,
        // Three decimals: a gate missed by 0.4% must not read `1.10× < 1.10×`.
        measured: measured
            .filter(|m| m.is_finite())
            .map_or(NA.to_string(), |m| format!("{m:.3}×")),
        threshold: threshold_s,
        result,
        by_ncu: NA.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(measured: f64, threshold: f64, pass: bool) -> GateResult {
        GateResult {
            pass,
            ..GateResult::at_least(CONTROL_GATE, "v vs control on mission", measured, threshold)
        }
    }

    #[test]
    fn a_recorded_verdict_is_rendered_as_recorded_not_judged_again() {
        let mut failed = Vec::new();
        // The numbers alone would pass; the stage judged it failed (e.g. a seed incorrect).
        let row = recorded_row(
            "v vs c".into(),
            &gate(1.5, 1.1, false),
            &mut failed,
            "performance",
        );
        assert_eq!(
            (row.measured.as_str(), row.result.as_str()),
            ("1.500×", "❌")
        );
        assert_eq!(failed, ["performance v vs c: 1.500× < 1.10×"]);
        // And the other way round: a recorded pass stays a pass.
        let mut failed = Vec::new();
        let row = recorded_row(
            "v vs c".into(),
            &gate(1.0, 1.1, true),
            &mut failed,
            "performance",
        );
        assert_eq!(row.result, "✅");
        assert!(failed.is_empty());
    }

    #[test]
    fn a_recorded_gate_without_a_measurement_says_so() {
        let mut failed = Vec::new();
        let row = recorded_row(
            "v vs c".into(),
            &gate(0.0, 1.1, false),
            &mut failed,
            "performance",
        );
        assert_eq!(row.measured, NA);
        assert_eq!(row.result, "❌ no measurement");
        assert_eq!(row.threshold, "≥ 1.10×");
    }
}
