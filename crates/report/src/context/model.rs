//! The context's types: what `summary.md.j2` reads, every figure already formatted.

use super::*;

#[derive(Debug, Clone, Serialize)]
pub struct ReportContext {
    /// The first workload's primary shape (the report's title when it has one workload).
    pub primary_shape: String,
    /// One part per workload: its headline, correctness, performance and tune.
    pub workloads: Vec<WorkloadReport>,
    pub gates: Gates,
    pub profile: Section<ProfileSection>,
    pub env: EnvBrief,
    pub stages: Vec<StageRow>,
    pub skipped: Vec<Skip>,
    /// Each skip reason once, cited as `[^label]` by the rows it applies to.
    pub notes: Vec<Footnote>,
    /// The machines behind the numbers; a mixed report says so at the top.
    pub machines: Machines,
    /// Every failed gate, one line each (empty when all passed).
    pub failed_gates: Vec<String>,
    /// Gate groups that could not be checked (`correctness: not checked: bench skipped…`):
    /// a report with nothing measured must not read "all gates passed".
    pub unchecked_gates: Vec<String>,
    /// Results kept from another build of their variant ([`crate::measured`]): the
    /// report then never reads "all gates passed".
    pub not_measured: Vec<crate::measured::NotMeasured>,
    /// Every workload's dispatch table ([`crate::dispatch`]), for the summarize stage to
    /// write; the template reads each workload's `dispatch` section instead.
    #[serde(skip)]
    pub dispatch: repro_schema::DispatchFile,
}

/// A section that either ran (`data`) or says why not (`note`, "not run: …").
#[derive(Debug, Clone, Serialize)]
pub struct Section<T> {
    pub ran: bool,
    pub note: Option<String>,
    pub data: Option<T>,
}

impl<T> Section<T> {
    pub(super) fn ran(data: T) -> Self {
        Section {
            ran: true,
            note: None,
            data: Some(data),
        }
    }
    pub(super) fn not_run(note: String) -> Self {
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
    /// Set when some results were reused from an earlier run: which, and from which run.
    pub reuse_note: Option<String>,
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

/// One workload's part of the report.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadReport {
    /// Empty when the pipeline declares no workload.
    pub name: String,
    pub primary_shape: String,
    pub control: Option<String>,
    pub best: Option<String>,
    pub headline: Headline,
    pub correctness: Section<CorrectnessTable>,
    pub performance: Section<Vec<PerfRow>>,
    pub baseline: Section<Vec<PerfRow>>,
    /// Each baseline against the best variant by the harness and by ncu, per shape.
    pub baseline_ratios: Section<Vec<BaselineRatioRow>>,
    /// One per tune stage of its kernels.
    pub tunes: Vec<TuneReport>,
    /// Its p50 chart under `reports/`, when it shows a measurement.
    pub p50_chart: Option<String>,
    /// Which kernel to call for each of its shapes.
    pub dispatch: Section<DispatchView>,
}

/// A workload's dispatch table as the report shows it (`artifacts/dispatch.json` has the
/// figures and what a caller needs to call each kernel).
#[derive(Debug, Clone, Serialize)]
pub struct DispatchView {
    /// The GPU model every figure was measured on.
    pub gpu: String,
    pub rows: Vec<DispatchRow>,
    /// `` `name` on `shape`: why ``, for each kernel a shape rules out.
    pub ineligible: Vec<String>,
    /// The same for each profile that ncu's ranking leaves out.
    pub not_counted: Vec<String>,
}

/// One shape of a dispatch table.
#[derive(Debug, Clone, Serialize)]
pub struct DispatchRow {
    pub shape: String,
    /// `` `ws-c2-pp` 25.41 (25.30–25.52, n=3) ``, or `n/a: why`.
    pub harness: String,
    pub ncu: String,
    /// `✅ yes`, `❌ no`, or `n/a` (with why, when both measures ranked).
    pub agree: String,
    /// How much slower the runner-up is (`+3.2% (`x`)`; `≈` when the spreads overlap), by
    /// the harness, then by ncu when it ranked two.
    pub margin: String,
}

/// One baseline on one shape: the best variant's speedup over it (baseline ÷ best) by the
/// harness's stream time and by ncu's kernel time, and the kernels its call launched.
#[derive(Debug, Clone, Serialize)]
pub struct BaselineRatioRow {
    pub baseline: String,
    pub shape: String,
    pub best: String,
    /// `0.98× (9.50 ÷ 9.66 µs)`, or `n/a: why`.
    pub harness: String,
    pub ncu: String,
    /// The ncu ratio against the harness's (`+1.2%`, `⚠ −8.3%` beyond ±3 %), or `n/a`.
    pub agreement: String,
    /// The baseline call's kernels with their ncu times, or `n/a`.
    pub kernels: String,
}

/// One tune stage's section and chart.
#[derive(Debug, Clone, Serialize)]
pub struct TuneReport {
    pub stage: String,
    pub section: Section<TuneSection>,
    /// The chart under `reports/`, when the tune ran.
    pub chart: Option<String>,
}

/// The gates of the whole pipeline (a workload's own are in its part).
#[derive(Debug, Clone, Serialize)]
pub struct Gates {
    pub ptxas: Section<Vec<PtxasRow>>,
    /// `gates.profile`, as the profile stage judged them (`None`: the pipeline declares
    /// none).
    pub profile: Option<Section<Vec<ProfileGateRow>>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileGateRow {
    /// The rule's name in `gates.profile`.
    pub rule: String,
    pub target: String,
    /// Each check with its measured values (`tensor_core_util_pct 12.30 ≥ 50 ❌ or …`).
    pub measured: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PtxasRow {
    pub variant: String,
    /// The architecture compiled for (`sm_90a`).
    pub arch: String,
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
    /// The output's thresholds, `max abs err ≤ 0.06, …` (the normalized ones per precision
    /// class: `0.02 (fp16-pv), 1 (fp8-pv)`).
    pub thresholds: String,
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
    /// The same speedup by ncu's median kernel times, saying where its verdict differs.
    pub by_ncu: String,
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
    /// The best trial's lineage, when the tune recorded one.
    pub lineage: Option<LineageView>,
}

/// The best trial's ancestry and what separates it from the tune's base.
#[derive(Debug, Clone, Serialize)]
pub struct LineageView {
    pub trial: u32,
    /// Short digest of its proposed source; empty: the kernel's own.
    pub source: String,
    pub steps: Vec<LineageRow>,
    /// Its defines against the base variant's.
    pub defines: String,
    /// Its source's diff against the kernel's own (proposed sources only).
    pub diff: Option<String>,
    pub diff_file: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct LineageRow {
    pub trial: u32,
    pub p50: String,
    pub what: String,
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
    /// ncu's cache control (empty: not recorded).
    pub cache_control: String,
    pub targets: Vec<ProfileRow>,
    pub metric_names: Vec<MetricName>,
    /// Why an L2 hit rate above 100 % is shown, when one is.
    pub l2_note: Option<String>,
    /// The targets profiled with one replay pass (no SM %, L2 hit % or stalls), named once.
    pub one_pass_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProfileRow {
    pub target: String,
    pub variant: String,
    pub status: String,
    pub kernel_time: String,
    /// ncu's kernel time against the harness p50 of the same kernel and shape (`+1.2%`,
    /// `⚠ −8.3%` beyond ±3 %), or `n/a`.
    pub vs_harness: String,
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
    /// Whether anything here was measured on a GPU (then `gpu` names it).
    pub on_gpu: bool,
    pub gpu: String,
    pub driver: String,
    pub nvcc: String,
    pub ncu: String,
    pub torch: String,
    pub timing: String,
    /// Set when the timings ran on another architecture than pipeline.yaml's `arch:`: says that
    /// architecture is not measured.
    pub unmeasured_arch: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageRow {
    pub name: String,
    pub kind: String,
    pub status: String,
    /// Where its recorded results were made: the GPU its lock entry names (its label when
    /// the report is mixed), `any machine` for the build (it cross-compiles), else empty.
    pub made_on: String,
    /// Wall time of the run that made them (`12.3 s`), empty when none was recorded.
    pub time: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skip {
    pub what: String,
    pub reason: String,
}
