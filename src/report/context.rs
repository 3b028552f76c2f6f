//! Turns the loaded artifacts into the template context of `summary.md.j2`: every figure
//! already formatted (fixed decimals, "n/a" for missing values), rows in a stable order,
//! and every gap explained ("not run: …"), so templates only lay text out. Each skip
//! reason is stated once, as a footnote ([`super::notes`]) the rows cite.

use super::artifacts::{Artifacts, TuneData};
use super::machines::Machines;
use super::notes::{Footnote, Notes};
use super::state::RunState;
use crate::env::Environment;
use crate::pipeline::Pipeline;
use crate::schema::{BenchFile, BenchResult, GateResult, NcuTarget};
use serde::Serialize;
use std::collections::BTreeMap;

/// The file names of the charts, relative to `reports/`.
pub const P50_CHART: &str = "p50_by_shape.svg";
pub const TUNE_CHART: &str = "tune_best_so_far.svg";

/// Missing-value text.
pub const NA: &str = "n/a";

#[derive(Debug, Clone, Serialize)]
pub struct ReportContext {
    pub primary_shape: String,
    pub control: Option<String>,
    pub best: Option<String>,
    pub headline: Headline,
    pub gates: Gates,
    pub tune: Section<TuneSection>,
    pub profile: Section<ProfileSection>,
    pub env: EnvBrief,
    pub stages: Vec<StageRow>,
    pub skipped: Vec<Skip>,
    /// Each skip reason once, cited as `[^label]` by the rows it applies to.
    pub notes: Vec<Footnote>,
    /// The machines behind the numbers; a mixed report says so at the top.
    pub machines: Machines,
    pub charts: Charts,
    /// Every failed gate, one line each (empty when all passed).
    pub failed_gates: Vec<String>,
    /// Gate groups that could not be checked (`correctness: not checked: bench skipped…`):
    /// a report with nothing measured must not read "all gates passed".
    pub unchecked_gates: Vec<String>,
}

/// A section that either ran (`data`) or says why not (`note`, "not run: …").
#[derive(Debug, Clone, Serialize)]
pub struct Section<T> {
    pub ran: bool,
    pub note: Option<String>,
    pub data: Option<T>,
}

impl<T> Section<T> {
    fn ran(data: T) -> Self {
        Section {
            ran: true,
            note: None,
            data: Some(data),
        }
    }
    fn not_run(note: String) -> Self {
        Section {
            ran: false,
            note: Some(note),
            data: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub baselines: Vec<String>,
    pub rows: Vec<HeadlineRow>,
    /// Set when there are no baseline columns, saying why.
    pub baseline_note: Option<String>,
    /// Set when the profile columns are n/a for a reason other than "not a profiled target".
    pub profile_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeadlineRow {
    pub name: String,
    /// `baseline`, `variant` or `tuned`.
    pub kind: String,
    pub best: bool,
    pub control: bool,
    pub p50: String,
    /// Speedup vs each baseline (same order as `Headline::baselines`).
    pub vs: Vec<String>,
    pub tc_util: String,
    pub occupancy: String,
    pub dram: String,
    pub status: String,
    /// The label of the machine that measured the row (`M1`), in a mixed report.
    pub machine: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Gates {
    pub ptxas: Section<Vec<PtxasRow>>,
    pub correctness: Section<CorrectnessTable>,
    pub performance: Section<Vec<PerfRow>>,
    pub baseline: Section<Vec<PerfRow>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PtxasRow {
    pub variant: String,
    pub entry: String,
    pub registers: String,
    pub smem: String,
    pub spills: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorrectnessTable {
    /// Runs (variant × shape × seed) that passed, and all runs.
    pub passed: usize,
    pub total: usize,
    pub max_abs_err: String,
    pub mean_abs_err: String,
    pub max_pct_bad: String,
    /// The normalized thresholds, per precision class (`0.02 (fp16-pv), 0.25 (fp8-pv)`).
    pub max_err_over_ref_std: String,
    pub max_rel_l2_err: String,
    pub rows: Vec<CorrectnessRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorrectnessRow {
    pub variant: String,
    pub shape: String,
    /// The input recipe.
    pub inputs: String,
    pub seed: u64,
    pub max_abs_err: String,
    pub mean_abs_err: String,
    pub pct_bad: String,
    pub max_err_over_ref_std: String,
    pub rel_l2_err: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PerfRow {
    pub what: String,
    pub measured: String,
    pub threshold: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TuneSection {
    pub trials: usize,
    pub valid: usize,
    pub invalid: usize,
    pub invalid_by_reason: Vec<ReasonCount>,
    pub elite: Vec<EliteRow>,
    pub best_so_far: Vec<BestRow>,
    pub best_vs_control: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReasonCount {
    pub reason: String,
    pub count: usize,
    pub example: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EliteRow {
    pub rank: u32,
    pub trial: u32,
    pub p50: String,
    pub config: String,
    pub parents: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BestRow {
    pub trial: u32,
    pub p50: String,
    pub config: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileSection {
    pub clock_control: String,
    pub targets: Vec<ProfileRow>,
    pub metric_names: Vec<MetricName>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileRow {
    pub target: String,
    pub variant: String,
    pub status: String,
    pub kernel_time: String,
    pub sm_util: String,
    pub tc_util: String,
    pub occupancy: String,
    pub registers: String,
    pub l2_hit: String,
    pub dram: String,
    pub top_stalls: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricName {
    pub field: String,
    pub metric: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct EnvBrief {
    pub gpu: String,
    pub driver: String,
    pub nvcc: String,
    pub ncu: String,
    pub torch: String,
    pub timing: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageRow {
    pub name: String,
    pub kind: String,
    pub status: String,
    /// Wall time of its last run (`12.3 s`), empty when none was recorded.
    pub time: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    pub what: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Charts {
    pub p50: Option<String>,
    pub tune: Option<String>,
}

/// Format an optional number with fixed decimals, "n/a" when absent or not finite.
pub fn num(x: Option<f64>, decimals: usize) -> String {
    match x {
        Some(v) if v.is_finite() => {
            let s = format!("{v:.decimals$}");
            // No "-0.00".
            if s.trim_start_matches('-')
                .chars()
                .all(|c| c == '0' || c == '.')
            {
                s.trim_start_matches('-').to_string()
            } else {
                s
            }
        }
        _ => NA.to_string(),
    }
}

/// `0.02 (fp16-pv), 0.25 (fp8-pv)`.
fn per_precision(t: &crate::pipeline::PerPrecision) -> String {
    use crate::pipeline::Precision;
    [Precision::Fp16Pv, Precision::Fp8Pv]
        .iter()
        .map(|&p| format!("{} ({})", t.get(p), p.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn ratio(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.2}×"),
        _ => NA.to_string(),
    }
}

fn mark(pass: bool) -> &'static str {
    if pass {
        "✅"
    } else {
        "❌"
    }
}

/// Median of the per-seed p50s of the `ok` results for `shape`.
pub fn shape_p50(results: &[BenchResult], shape: &str) -> Option<f64> {
    let mut v: Vec<f64> = results
        .iter()
        .filter(|r| r.shape == shape && r.status == "ok")
        .filter_map(|r| r.p50_us)
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Shapes in the order they first appear in the results.
pub fn shapes_in_order<'a>(files: impl IntoIterator<Item = &'a BenchFile>) -> Vec<String> {
    let mut shapes: Vec<String> = Vec::new();
    for f in files {
        for r in &f.results {
            if !shapes.contains(&r.shape) {
                shapes.push(r.shape.clone());
            }
        }
    }
    shapes
}

/// Builds the context; holds the inputs so the parts can share them.
pub struct Builder<'a> {
    pub pipeline: &'a Pipeline,
    pub artifacts: &'a Artifacts,
    pub state: &'a RunState,
    pub env: &'a Environment,
    notes: Notes,
}

impl<'a> Builder<'a> {
    pub fn new(
        pipeline: &'a Pipeline,
        artifacts: &'a Artifacts,
        state: &'a RunState,
        env: &'a Environment,
    ) -> Builder<'a> {
        let mut b = Builder {
            pipeline,
            artifacts,
            state,
            env,
            notes: Notes::default(),
        };
        b.notes = Notes::new(b.skip_reasons());
        b
    }

    /// Every reason something was skipped, for [`Notes`].
    fn skip_reasons(&self) -> Vec<String> {
        let kept = self.state.stages.values().filter_map(|s| s.kept.clone());
        let stages = self.state.stages.values().filter(|s| s.skipped());
        let files = self.benches().iter().chain(self.baselines());
        let results = self.benches().iter().flat_map(|f| &f.results);
        let targets = self.artifacts.ncu.iter().flat_map(|n| &n.targets);
        kept.chain(stages.filter_map(|s| s.reason.clone()))
            .chain(
                files
                    .filter(|f| f.status == "skipped")
                    .filter_map(|f| f.reason.clone()),
            )
            .chain(
                results
                    .filter(|r| r.status == "skipped")
                    .filter_map(|r| r.error.clone()),
            )
            .chain(
                targets
                    .filter(|t| t.status == "skipped")
                    .filter_map(|t| t.reason.clone()),
            )
            .collect()
    }

    /// `skipped [^1]` (or `skipped: <its own words> [^1]`): the reason as a footnote
    /// citation.
    fn skipped_because(&self, reason: Option<&str>) -> String {
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
    fn stage_skipped(&self, kind: &str) -> Option<String> {
        let name = self.stage_of(kind)?;
        let st = self.state.stages.get(name).filter(|s| s.skipped())?;
        Some(format!(
            "not run: stage `{name}` {}",
            self.skipped_because(st.reason.as_deref())
        ))
    }

    /// `<status>: <reason>` of a record, a skip's reason cited as a footnote.
    fn status_because(&self, status: &str, reason: Option<&str>) -> String {
        if status == "skipped" {
            return self.skipped_because(reason);
        }
        format!("{status}: {}", reason.unwrap_or("no reason given"))
    }
}

impl Builder<'_> {
    pub fn build(&self) -> ReportContext {
        let primary = self.primary_shape();
        let best = self.best_variant(&primary);
        let mut failed_gates = Vec::new();
        let gates = Gates {
            ptxas: self.ptxas_gates(&mut failed_gates),
            correctness: self.correctness_gates(&mut failed_gates),
            performance: self.performance_gates(&primary, best.as_deref(), &mut failed_gates),
            baseline: self.baseline_gates(&primary, best.as_deref(), &mut failed_gates),
        };
        let unchecked_gates = [
            ("ptxas", &gates.ptxas.note),
            ("correctness", &gates.correctness.note),
            ("performance", &gates.performance.note),
        ]
        .into_iter()
        .filter_map(|(group, note)| note.as_ref().map(|n| format!("{group}: {n}")))
        .collect();
        let tune = self.tune_section(&primary);
        ReportContext {
            headline: self.headline(&primary, best.as_deref()),
            primary_shape: primary,
            control: self.pipeline.control.clone(),
            charts: Charts {
                // Linked only when it shows a measurement.
                p50: self
                    .benches()
                    .iter()
                    .chain(self.baselines())
                    .flat_map(|f| &f.results)
                    .any(|r| r.status == "ok" && r.p50_us.is_some())
                    .then(|| P50_CHART.to_string()),
                tune: tune.ran.then(|| TUNE_CHART.to_string()),
            },
            best,
            gates,
            tune,
            profile: self.profile_section(),
            env: self.env_brief(),
            stages: self.stage_rows(),
            skipped: self.skipped(),
            notes: self.notes.footnotes(),
            machines: self.machines(),
            failed_gates,
            unchecked_gates,
        }
    }

    fn benches(&self) -> &[BenchFile] {
        self.artifacts.benches.as_deref().unwrap_or_default()
    }

    /// Why nothing was measured, when the bench stage skipped every variant (no GPU, no
    /// driver): gates on its results are then not checked rather than failed.
    fn bench_all_skipped(&self) -> Option<String> {
        let files = self.benches();
        if files.is_empty() || !files.iter().all(|f| f.status == "skipped") {
            return None;
        }
        Some(format!(
            "not checked: bench {}",
            self.skipped_because(files[0].reason.as_deref())
        ))
    }

    fn baselines(&self) -> &[BenchFile] {
        self.artifacts.baselines.as_deref().unwrap_or_default()
    }

    fn primary_shape(&self) -> String {
        self.pipeline
            .workload
            .as_ref()
            .map(|w| w.primary.clone())
            .or_else(|| shapes_in_order(self.benches()).into_iter().next())
            .unwrap_or_else(|| NA.to_string())
    }

    /// The stage of the given kind, if the pipeline has one.
    fn stage_of(&self, kind: &str) -> Option<&str> {
        self.pipeline
            .stages
            .iter()
            .find(|(_, s)| s.uses == kind)
            .map(|(n, _)| n.as_str())
    }

    /// [`file_status`], a skip's reason cited.
    fn file_status(&self, f: &BenchFile, build_failures: &[String]) -> String {
        let skipped = match f.status.as_str() {
            "skipped" => self.skipped_because(f.reason.as_deref()),
            _ => String::new(),
        };
        file_status(f, build_failures, &skipped)
    }

    /// Why the outputs of a stage kind are absent (or empty: `missing` names them).
    fn not_run(&self, kind: &str, missing: &str) -> String {
        match self.stage_of(kind) {
            None => format!("not run: the pipeline has no `{kind}` stage"),
            Some(name) => self.stage_not_run(name, missing),
        }
    }

    /// `not run: stage `x` skipped [^1]`, or what else its record says.
    fn stage_not_run(&self, name: &str, missing: &str) -> String {
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
        let status = st.status.as_deref().unwrap_or_default();
        let reason = st
            .reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        format!("not run: stage `{name}` {status}{reason} (no {missing})")
    }

    /// The variant with the lowest primary-shape p50 among those whose results are all correct.
    fn best_variant(&self, primary: &str) -> Option<String> {
        self.benches()
            .iter()
            .filter(|f| f.status == "ok" && variant_correct(f))
            .filter_map(|f| shape_p50(&f.results, primary).map(|p| (p, f.name.clone())))
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, n)| n)
    }

    fn ncu_for(&self, name: &str) -> Option<&NcuTarget> {
        self.artifacts
            .ncu
            .as_ref()?
            .targets
            .iter()
            .find(|t| t.variant == name && t.status == "ok")
    }

    fn machines(&self) -> Machines {
        Machines::of(
            self.state,
            self.pipeline.stages.keys().map(String::as_str),
            |why| self.notes.cite(why),
        )
    }

    /// The stage whose recorded outputs include a path under `prefix`.
    fn stage_writing(&self, prefix: &str) -> Option<&str> {
        self.state
            .stages
            .iter()
            .find(|(_, s)| s.outputs.keys().any(|p| p.starts_with(prefix)))
            .map(|(n, _)| n.as_str())
    }

    fn headline(&self, primary: &str, best: Option<&str>) -> Headline {
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
        let mut rows = Vec::new();
        for b in &baselines {
            let p50 = shape_p50(&b.results, primary);
            let (tc, occ, dram) = ncu_cells(&b.name);
            rows.push(HeadlineRow {
                name: b.name.clone(),
                kind: "baseline".into(),
                best: false,
                control: false,
                p50: num(p50, 2),
                vs: vs(p50),
                tc_util: tc,
                occupancy: occ,
                dram,
                status: self.file_status(b, &[]),
                machine: measured_by(self.stage_writing(crate::stages::bench::BASELINE_DIR)),
            });
        }
        let mut variants: Vec<&BenchFile> = self.benches().iter().collect();
        let control = self.pipeline.control.as_deref();
        variants.sort_by_key(|f| (Some(f.name.as_str()) != control, f.name.clone()));
        for v in variants {
            let p50 = shape_p50(&v.results, primary);
            let (tc, occ, dram) = ncu_cells(&v.name);
            rows.push(HeadlineRow {
                name: v.name.clone(),
                kind: "variant".into(),
                best: Some(v.name.as_str()) == best,
                control: Some(v.name.as_str()) == control,
                p50: num(p50, 2),
                vs: vs(p50),
                tc_util: tc,
                occupancy: occ,
                dram,
                status: self.file_status(v, &self.build_failures(&v.name)),
                machine: measured_by(self.stage_of("bench")),
            });
        }
        if let Some(top) = self.artifacts.tune.as_ref().and_then(|t| t.elite.first()) {
            let name = format!("tune-top{}", top.rank);
            let p50 = shape_p50(&top.bench, primary).or(Some(top.p50_us));
            let (tc, occ, dram) = ncu_cells(&name);
            let ok = top
                .bench
                .iter()
                .all(|r| r.status == "ok" && r.correctness_pass == Some(true));
            rows.push(HeadlineRow {
                name,
                kind: "tuned".into(),
                best: false,
                control: false,
                p50: num(p50, 2),
                vs: vs(p50),
                tc_util: tc,
                occupancy: occ,
                dram,
                status: if ok {
                    "✅ pass".into()
                } else {
                    "❌ correctness".into()
                },
                machine: measured_by(self.stage_of("tune")),
            });
        }
        let baseline_note = baselines
            .is_empty()
            .then(|| match self.artifacts.baselines {
                Some(_) => "no baseline records in artifacts/bench/baselines/".to_string(),
                None => self.not_run_cmd_baselines(),
            });
        Headline {
            baselines: baselines.iter().map(|b| b.name.clone()).collect(),
            rows,
            baseline_note,
            profile_note: self.profile_note(),
        }
    }

    /// Why the headline's profile columns are n/a.
    fn profile_note(&self) -> Option<String> {
        let Some(ncu) = &self.artifacts.ncu else {
            return Some(self.not_run("profile", "artifacts/ncu/summary.json"));
        };
        if let Some(why) = self.stage_skipped("profile") {
            return Some(why.replacen("not run", "not profiled", 1));
        }
        let profiled: Vec<&str> = ncu
            .targets
            .iter()
            .filter(|t| t.status == "ok")
            .map(|t| t.variant.as_str())
            .collect();
        Some(
            match (profiled.is_empty(), self.all_skipped_reason(&ncu.targets)) {
                (true, Some(reason)) => format!("not profiled: {reason}"),
                (true, None) => "not profiled: no target of the profile stage succeeded".into(),
                (false, _) => format!("profiled only: {} (others n/a)", profiled.join(", ")),
            },
        )
    }

    fn not_run_cmd_baselines(&self) -> String {
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
    fn build_failures(&self, variant: &str) -> Vec<String> {
        let Some(b) = self
            .artifacts
            .builds
            .as_ref()
            .and_then(|bs| bs.iter().find(|b| b.variant == variant))
        else {
            return Vec::new();
        };
        if b.status != "ok" {
            return vec!["compile error".into()];
        }
        if b.gates.iter().any(|g| !g.pass) {
            vec!["ptxas".into()]
        } else {
            Vec::new()
        }
    }

    fn ptxas_gates(&self, failed: &mut Vec<String>) -> Section<Vec<PtxasRow>> {
        let Some(builds) = &self.artifacts.builds else {
            return Section::not_run(self.not_run("build", "artifacts/build/"));
        };
        let mut rows = Vec::new();
        for b in builds {
            if b.status != "ok" {
                let err = b
                    .error
                    .as_deref()
                    .unwrap_or("no message")
                    .lines()
                    .next()
                    .unwrap_or("");
                failed.push(format!("build {}: compile error", b.variant));
                rows.push(PtxasRow {
                    variant: b.variant.clone(),
                    entry: b.entry.clone(),
                    registers: NA.into(),
                    smem: NA.into(),
                    spills: NA.into(),
                    result: format!("❌ compile error: {err}"),
                });
                continue;
            }
            for e in &b.entries {
                let gates: Vec<&GateResult> = b
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
                        "{} {} ({}): {} {} {}",
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
                    entry: e.name.clone(),
                    registers: cell("ptxas.max_registers", e.registers.map(u64::from)),
                    smem: cell("ptxas.max_smem_bytes", e.smem_bytes),
                    spills: cell("ptxas.max_spill_bytes", spills),
                    result: mark(pass).to_string(),
                });
            }
        }
        Section::ran(rows)
    }

    fn correctness_gates(&self, failed: &mut Vec<String>) -> Section<CorrectnessTable> {
        let Some(benches) = &self.artifacts.benches else {
            return Section::not_run(self.not_run("bench", "artifacts/bench/"));
        };
        if let Some(why) = self.bench_all_skipped() {
            return Section::not_run(why);
        }
        let th = self.pipeline.gates.correctness.clone().unwrap_or_default();
        let mut rows = Vec::new();
        for f in benches {
            for r in &f.results {
                let subject = format!("{} {}", f.name, r.run_subject());
                if r.status != "ok" {
                    let why = if r.status == "skipped" {
                        self.skipped_because(r.error.as_deref())
                    } else {
                        let error = r.error.clone().unwrap_or_else(|| r.status.clone());
                        format!("{}: {error}", r.status)
                    };
                    let mark = if r.status == "skipped" { "⏭" } else { "❌" };
                    if r.status != "skipped" {
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
                        num(r.max_abs_err, 6)
                    ));
                }
                let nan = r.nan_count.unwrap_or(0) + r.inf_count.unwrap_or(0);
                rows.push(CorrectnessRow {
                    variant: f.name.clone(),
                    shape: r.shape.clone(),
                    inputs: r.inputs.clone(),
                    seed: r.seed,
                    max_abs_err: num(r.max_abs_err, 6),
                    mean_abs_err: num(r.mean_abs_err, 6),
                    pct_bad: num(r.pct_bad, 3),
                    max_err_over_ref_std: num(r.max_err_over_ref_std, 6),
                    rel_l2_err: num(r.rel_l2_err, 6),
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
            max_abs_err: format!("{}", th.max_abs_err),
            mean_abs_err: format!("{}", th.mean_abs_err),
            max_pct_bad: format!("{}", th.max_pct_bad),
            max_err_over_ref_std: per_precision(&th.max_err_over_ref_std),
            max_rel_l2_err: per_precision(&th.max_rel_l2_err),
            rows,
        })
    }

    fn performance_gates(
        &self,
        primary: &str,
        best: Option<&str>,
        failed: &mut Vec<String>,
    ) -> Section<Vec<PerfRow>> {
        if self.artifacts.benches.is_none() {
            return Section::not_run(self.not_run("bench", "artifacts/bench/"));
        }
        if let Some(why) = self.bench_all_skipped() {
            return Section::not_run(why);
        }
        let Some(control) = self.pipeline.control.as_deref() else {
            return Section::not_run(
                "not checked: pipeline.yaml names no `control` variant".into(),
            );
        };
        let p50_of = |name: &str| {
            self.benches()
                .iter()
                .find(|f| f.name == name)
                .and_then(|f| shape_p50(&f.results, primary))
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
        let speedup = p50_of(control).zip(p50_of(best)).map(|(c, b)| c / b);
        let what = format!("{best} vs {control} ({primary})");
        let row = perf_row(
            what.clone(),
            speedup,
            threshold,
            failed,
            &format!("performance {what}"),
        );
        Section::ran(vec![row])
    }

    fn baseline_gates(
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
            .all(|b| b.status == "skipped" && b.reason == first.reason)
        {
            return Section::not_run(format!(
                "not run: every baseline {}",
                self.skipped_because(first.reason.as_deref())
            ));
        }
        let best_p50 = best.and_then(|b| {
            self.benches()
                .iter()
                .find(|f| f.name == b)
                .and_then(|f| shape_p50(&f.results, primary))
        });
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
                if b.status == "skipped" {
                    return PerfRow {
                        what,
                        measured: NA.into(),
                        threshold: thresholds
                            .get(&b.name)
                            .map(|t| format!("≥ {t:.2}×"))
                            .unwrap_or_else(|| "none".into()),
                        result: format!("⏭ baseline {}", self.skipped_because(b.reason.as_deref())),
                    };
                }
                perf_row(
                    what.clone(),
                    speedup,
                    thresholds.get(&b.name).copied(),
                    failed,
                    &format!("baseline {what}"),
                )
            })
            .collect();
        Section::ran(rows)
    }

    fn tune_section(&self, primary: &str) -> Section<TuneSection> {
        let Some(tune) = &self.artifacts.tune else {
            return Section::not_run(self.not_run("tune", "artifacts/tune/tune_log.csv"));
        };
        // A skipped tune writes an empty log: not "0 trials".
        if tune.trials.is_empty() {
            return Section::not_run(self.not_run("tune", "trials in artifacts/tune/tune_log.csv"));
        }
        let control_p50 = self.pipeline.control.as_deref().and_then(|c| {
            self.benches()
                .iter()
                .find(|f| f.name == c)
                .and_then(|f| shape_p50(&f.results, primary))
        });
        Section::ran(tune_summary(tune, control_p50))
    }

    fn profile_section(&self) -> Section<ProfileSection> {
        let Some(ncu) = &self.artifacts.ncu else {
            return Section::not_run(self.not_run("profile", "artifacts/ncu/summary.json"));
        };
        if let Some(why) = self.stage_skipped("profile") {
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
                    status: match t.status.as_str() {
                        "ok" => "✅ ok".into(),
                        other => format!(
                            "{} {}",
                            if other == "skipped" { "⏭" } else { "❌" },
                            self.status_because(other, t.reason.as_deref())
                        ),
                    },
                    kernel_time: num(t.kernel_time_us, 2),
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
            targets,
            metric_names: names
                .into_iter()
                .map(|(field, metric)| MetricName { field, metric })
                .collect(),
        })
    }

    fn env_brief(&self) -> EnvBrief {
        let e = self.env;
        let first = self
            .benches()
            .iter()
            .flat_map(|f| f.results.iter())
            .find(|r| r.status == "ok");
        let gpu = match (&e.gpu, first.and_then(|r| r.device_name.clone())) {
            (Some(g), _) => format!(
                "{} (sm {}, {} SMs, {} GiB)",
                g.name,
                g.compute_capability,
                g.sm_count,
                g.memory_bytes / (1 << 30)
            ),
            (None, Some(name)) => format!("{name} (from the bench records)"),
            // The probe's message is usually a skip reason already stated: cite it.
            (None, None) => match e.gpu_note.as_deref().map(|n| self.notes.cite(n)) {
                Some(c) if c.starts_with("[^") => format!("{NA}: no GPU {c}"),
                Some(c) => format!("{NA}: {c}"),
                None => format!("{NA}: no GPU"),
            },
        };
        let driver = e
            .gpu
            .as_ref()
            .map(|g| {
                format!(
                    "{}, CUDA {}",
                    g.driver_version.as_deref().unwrap_or(NA),
                    g.cuda_driver_version
                )
            })
            .unwrap_or_else(|| NA.into());
        // Launches per sample differ by shape (a sample lasts long enough to time): say
        // the range, not the first record's count.
        let per_sample: Vec<u32> = self
            .benches()
            .iter()
            .flat_map(|f| &f.results)
            .filter_map(|r| r.timing_mode.as_ref().map(|t| t.launches_per_sample))
            .collect();
        let launches = match (per_sample.iter().min(), per_sample.iter().max()) {
            (Some(1), Some(1)) => "1 launch per sample".to_string(),
            (Some(lo), Some(hi)) if lo == hi => format!("{lo} launches per sample"),
            (Some(lo), Some(hi)) => format!("{lo}–{hi} launches per sample"),
            _ => NA.to_string(),
        };
        let timing = first
            .and_then(|r| r.timing_mode.as_ref())
            .map(|t| {
                let method = match t.timer_overhead_us {
                    Some(us) => format!("{} (timer's own {us:.2} µs subtracted)", t.method),
                    None => t.method.clone(),
                };
                format!(
                    "{method}, {launches}, L2 {}; warmup {}, iters {}",
                    t.l2,
                    first.map_or(0, |r| r.warmup),
                    first.map_or(0, |r| r.iters)
                )
            })
            .unwrap_or_else(|| NA.into());
        let torch = match (&e.python, &e.torch) {
            (_, Some(t)) => format!(
                "torch {t}{}",
                e.python
                    .as_ref()
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default()
            ),
            (Some(p), None) => format!("{p}, torch {NA}"),
            (None, None) => "not used (baselines did not run)".into(),
        };
        EnvBrief {
            gpu,
            driver,
            nvcc: e.nvcc.clone().unwrap_or_else(|| NA.into()),
            ncu: e.ncu.clone().unwrap_or_else(|| NA.into()),
            torch,
            timing,
        }
    }

    fn stage_rows(&self) -> Vec<StageRow> {
        self.pipeline
            .stages
            .iter()
            .filter(|(_, s)| s.uses != "summarize")
            .map(|(name, spec)| {
                let st = self.state.stages.get(name);
                let status = match st.and_then(|s| s.status.clone()) {
                    Some(s) => {
                        let glyph = match s.as_str() {
                            "passed" => "✅",
                            "skipped" => "⏭",
                            _ => "❌",
                        };
                        match st.and_then(|s| s.reason.clone()) {
                            Some(r) => format!("{glyph} {}", self.status_because(&s, Some(&r))),
                            None => format!("{glyph} {s}"),
                        }
                    }
                    None => "– not run".into(),
                };
                StageRow {
                    name: name.clone(),
                    kind: spec.uses.clone(),
                    status,
                    time: st
                        .and_then(|s| s.elapsed_s)
                        .map(|t| format!("{t:.1} s"))
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    fn skipped(&self) -> Vec<Skip> {
        let mut out = Vec::new();
        for (name, spec) in &self.pipeline.stages {
            if spec.uses == "summarize" {
                continue;
            }
            match self.state.stages.get(name) {
                Some(s) if s.skipped() || s.failed() => out.push(Skip {
                    what: format!("stage `{name}`"),
                    reason: self
                        .status_because(s.status.as_deref().unwrap_or(""), s.reason.as_deref()),
                }),
                None if !self.produced(spec.uses.as_str(), spec) => out.push(Skip {
                    what: format!("stage `{name}`"),
                    reason: "not run: no outputs and no record of it in the lock".into(),
                }),
                _ => {}
            }
        }
        for b in self.baselines().iter().filter(|b| b.status != "ok") {
            out.push(Skip {
                what: format!("baseline `{}`", b.name),
                reason: self.status_because(&b.status, b.reason.as_deref()),
            });
        }
        for f in self.benches().iter().filter(|f| f.status != "ok") {
            out.push(Skip {
                what: format!("bench `{}`", f.name),
                reason: self.status_because(&f.status, f.reason.as_deref()),
            });
        }
        if let Some(ncu) = &self.artifacts.ncu {
            for t in ncu.targets.iter().filter(|t| t.status != "ok") {
                out.push(Skip {
                    what: format!("profile target `{}`", t.target),
                    reason: self.status_because(&t.status, t.reason.as_deref()),
                });
            }
        }
        group_by_reason(out)
    }

    /// When every target failed or was skipped for one same reason: `<status>: <reason>`
    /// (a skip's reason cited).
    fn all_skipped_reason(&self, targets: &[NcuTarget]) -> Option<String> {
        let first = targets.first()?;
        let same = targets
            .iter()
            .all(|t| t.status != "ok" && t.status == first.status && t.reason == first.reason);
        same.then(|| self.status_because(&first.status, first.reason.as_deref()))
    }

    /// Whether the outputs a stage kind writes are present.
    fn produced(&self, kind: &str, spec: &crate::pipeline::StageSpec) -> bool {
        let a = self.artifacts;
        match kind {
            "build" => a.builds.is_some(),
            "bench" => a.benches.is_some(),
            "tune" => a.tune.is_some(),
            "profile" => a.ncu.is_some(),
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
fn group_by_reason(skips: Vec<Skip>) -> Vec<Skip> {
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

fn perf_row(
    what: String,
    measured: Option<f64>,
    threshold: Option<f64>,
    failed: &mut Vec<String>,
    label: &str,
) -> PerfRow {
    let (threshold_s, result) = match (measured, threshold) {
        (_, None) => ("none".to_string(), "— (no threshold)".to_string()),
        (Some(m), Some(t)) => {
            let pass = m >= t;
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
    }
}

/// `≤` / `≥` for a gate's `<=` / `>=`.
fn op_symbol(op: &str) -> &str {
    match op {
        "<=" => "≤",
        ">=" => "≥",
        other => other,
    }
}

/// The relation a failed gate's figure has to its threshold (`<=` failed: `>`).
fn violated_symbol(op: &str) -> &str {
    match op {
        "<=" => ">",
        ">=" => "<",
        other => other,
    }
}

fn variant_correct(f: &BenchFile) -> bool {
    f.results
        .iter()
        .filter(|r| r.status != "skipped")
        .all(|r| r.status == "ok" && r.correctness_pass == Some(true))
}

/// The headline status of a bench file: what failed, or that all passed (a skip cites
/// its reason, `skipped` the footnote it was given).
fn file_status(f: &BenchFile, build_failures: &[String], skipped: &str) -> String {
    match f.status.as_str() {
        "skipped" => format!("⏭ {skipped}"),
        "failed" => format!(
            "❌ failed: {}",
            f.reason.as_deref().unwrap_or("no reason given")
        ),
        _ => {
            let mut bad: Vec<String> = build_failures.to_vec();
            if f.results.iter().any(|r| r.status == "failed") {
                bad.push("run failed".into());
            }
            if f.results
                .iter()
                .any(|r| r.status == "ok" && r.correctness_pass != Some(true))
            {
                bad.push("correctness".into());
            }
            if bad.is_empty() {
                "✅ pass".into()
            } else {
                format!("❌ {}", bad.join(", "))
            }
        }
    }
}

fn config_text(config: &BTreeMap<String, i64>) -> String {
    config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The JSON config of a trial as `K=V` pairs (the JSON as is when it is not a flat object).
fn trial_config_text(json: &str) -> String {
    match serde_json::from_str::<BTreeMap<String, serde_json::Value>>(json) {
        Ok(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => json.to_string(),
    }
}

/// Best p50 so far after each trial (`None` until the first valid trial).
pub fn best_so_far(tune: &TuneData) -> Vec<(u32, Option<f64>)> {
    let mut best: Option<f64> = None;
    tune.trials
        .iter()
        .map(|t| {
            if t.status == "ok" && t.correctness_pass != Some(false) {
                if let Some(p) = t.p50_us.filter(|p| p.is_finite()) {
                    best = Some(best.map_or(p, |b: f64| b.min(p)));
                }
            }
            (t.trial, best)
        })
        .collect()
}

fn tune_summary(tune: &TuneData, control_p50: Option<f64>) -> TuneSection {
    let valid = tune.trials.iter().filter(|t| t.status == "ok").count();
    let mut reasons: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for t in tune.trials.iter().filter(|t| t.status != "ok") {
        let e = reasons
            .entry(t.status.clone())
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_fixed_decimals_and_no_negative_zero() {
        assert_eq!(num(Some(1.0 / 3.0), 2), "0.33");
        assert_eq!(num(Some(-0.0001), 2), "0.00");
        assert_eq!(num(None, 2), "n/a");
        assert_eq!(num(Some(f64::NAN), 2), "n/a");
        assert_eq!(ratio(Some(1.234)), "1.23×");
    }
}
