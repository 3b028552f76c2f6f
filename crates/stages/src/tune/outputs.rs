//! The tune stage's files: `tune_log.csv` / `exhaustive.csv` (one `schema::TuneTrial` row
//! per trial), `topk.json`, `comparison.json`, and the outputs of a skipped run.

use anyhow::Context;
use repro_schema::{EliteEntry, TuneTrial};
use repro_tune::proposer::lineage::Origin;
use repro_tune::{proposer::store::short, proposer::store::SourceStore};
use repro_tune::{search::Outcome, search::Trial};
use repro_tune::{space::show, space::Config};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The folder, under the tune's output folder, of the elite's diffs against the kernel.
pub const PROPOSALS_DIR: &str = "proposals";

/// `proposals/<source>.patch` for each elite member with a proposed source: its diff
/// against the kernel's own source, the reviewable form of what the result depends on.
/// Returns each written file (relative to the project root) by source digest.
pub(super) fn write_elite_diffs(
    (staging, dir): (&Path, &str),
    store: &SourceStore,
    elite: &[&Trial],
) -> anyhow::Result<BTreeMap<String, String>> {
    let out = staging.join(dir);
    let mut written = BTreeMap::new();
    for s in elite.iter().filter_map(|t| t.candidate.source.as_ref()) {
        let name = format!("{PROPOSALS_DIR}/{}.patch", short(&s.digest));
        let diff = store.diff_from_base(&store.text(Some(s))?);
        write_file(&out.join(&name), diff.as_bytes())?;
        written.insert(s.digest.clone(), format!("{dir}/{name}"));
    }
    Ok(written)
}

/// Outputs of a stage that could not run: an empty log and an empty elite; no cubins (they
/// are optional outputs, so no zero-byte file stands in for a kernel).
pub(super) fn write_skipped(staging: &Path, dir: &str) -> anyhow::Result<()> {
    write_trials(&staging.join(dir).join("tune_log.csv"), &[])?;
    write_json(
        &staging.join(dir).join("topk.json"),
        &Vec::<EliteEntry>::new(),
    )
}

/// `artifacts/tune/comparison.json`: the search against the exhaustive sweep on the same
/// measurements. The search is replayed from the memo after the sweep, so its own wall time
/// is the one `repro tune` reported when it ran, not recorded here.
#[derive(Debug, Serialize)]
pub(super) struct Comparison {
    space: usize,
    budget: u32,
    search_trials: usize,
    search_best_trial: Option<u32>,
    search_best_p50_us: Option<f64>,
    search_best_config: Option<Config>,
    /// The first search trial within 2% of the exhaustive best.
    search_trials_to_within_2pct: Option<u32>,
    exhaustive_trials: usize,
    exhaustive_wall_s: f64,
    exhaustive_best_p50_us: Option<f64>,
    exhaustive_best_config: Option<Config>,
    /// (search best / exhaustive best − 1) × 100.
    gap_pct: Option<f64>,
}

impl Comparison {
    pub(super) fn new(
        search: &Outcome,
        swept: &Outcome,
        swept_wall: Duration,
        budget: u32,
    ) -> Self {
        let (sb, eb) = (search.best(), swept.best());
        let score = |t: Option<&Trial>| t.and_then(|t| t.evaluation.score);
        let gap = score(sb)
            .zip(score(eb))
            .map(|(s, e)| round((s / e - 1.0) * 100.0, 4));
        let within = score(eb).and_then(|e| {
            search
                .trials
                .iter()
                .find(|t| t.evaluation.score.is_some_and(|s| s <= e * 1.02))
                .map(|t| t.candidate.trial)
        });
        Comparison {
            space: swept.trials.len(),
            budget,
            search_trials: search.trials.len(),
            search_best_trial: sb.map(|t| t.candidate.trial),
            search_best_p50_us: score(sb).map(|s| round(s, 4)),
            search_best_config: sb.map(|t| t.candidate.config.clone()),
            search_trials_to_within_2pct: within,
            exhaustive_trials: swept.trials.len(),
            exhaustive_wall_s: round(swept_wall.as_secs_f64(), 1),
            exhaustive_best_p50_us: score(eb).map(|s| round(s, 4)),
            exhaustive_best_config: eb.map(|t| t.candidate.config.clone()),
            gap_pct: gap,
        }
    }

    pub(super) fn line(&self) -> String {
        let fmt = |x: Option<f64>| x.map_or("n/a".into(), |v| format!("{v:.2} µs"));
        format!(
            "search best {} in {} trials vs exhaustive best {} over {} configurations: gap {}",
            fmt(self.search_best_p50_us),
            self.search_trials,
            fmt(self.exhaustive_best_p50_us),
            self.exhaustive_trials,
            self.gap_pct.map_or("n/a".into(), |g| format!("{g:.2}%"))
        )
    }
}

pub(super) fn round(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

/// One CSV row per trial, columns in the order of `schema::TuneTrial` (docs/ARCHITECTURE.md, "The artifact contract").
pub(super) fn write_trials(path: &Path, trials: &[Trial]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_path(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    w.write_record([
        "trial",
        "generation",
        "timestamp",
        "config",
        "status",
        "registers",
        "spill_bytes",
        "max_abs_err",
        "max_err_over_ref_std",
        "p50_us",
        "correctness_pass",
        "note",
        "parents",
        "source",
        "patch",
    ])?;
    for t in trials {
        let e = &t.evaluation;
        let c = &t.candidate;
        let origin = Origin::of(c);
        let mut note = e.note.clone();
        if !origin.note.is_empty() {
            note = format!("proposed: {}; {note}", origin.note);
        }
        let parents: Vec<String> = c.parents.iter().map(u32::to_string).collect();
        let parents = parents.join("+");
        if !parents.is_empty() {
            note = format!("parents {parents}; {note}");
        }
        if t.cached {
            note = format!("{note} (memo)");
        }
        w.serialize(TuneTrial {
            trial: t.candidate.trial,
            generation: t.candidate.generation,
            timestamp: t.finished.clone(),
            config: show(&t.candidate.config),
            status: e.status.clone(),
            registers: e.registers,
            spill_bytes: e.spill_bytes,
            max_abs_err: e.max_abs_err.map(|x| round(x, 6)),
            max_err_over_ref_std: e.max_err_over_ref_std.map(|x| round(x, 6)),
            p50_us: e.score.map(|x| round(x, 4)),
            correctness_pass: e.correctness_pass,
            note: note.trim().trim_end_matches(';').trim().to_string(),
            parents,
            source: origin.source.unwrap_or_default(),
            patch: origin.patch.unwrap_or_default(),
        })?;
    }
    w.flush()?;
    Ok(())
}

pub(super) fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    write_file(path, repro_schema::to_json_pretty(value).as_bytes())
}

pub(super) fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}
