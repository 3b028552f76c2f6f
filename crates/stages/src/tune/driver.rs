//! One tune from start to outputs: the search (after the exhaustive sweep when asked),
//! a live line per trial, and every artifact written under the staging folder.

use super::gpu::judge;
use super::gpu::Verdict;
use super::outputs::write_elite_diffs;
use super::outputs::write_json;
use super::outputs::write_trials;
use super::outputs::Comparison;
use anyhow::Context;
use repro_pipeline::kind::StageOutcome;
use repro_schema::BenchResult;
use repro_schema::EliteEntry;
use repro_schema::LineageStep;
use repro_schema::TrialStatus;
use repro_tune::memo::timestamp;
use repro_tune::memo::Memo;
use repro_tune::options::TuneOptions;
use repro_tune::proposer::lineage::lineage;
use repro_tune::proposer::lineage::Origin;
use repro_tune::proposer::store::short;
use repro_tune::proposer::store::SourceStore;
use repro_tune::search;
use repro_tune::search::Candidate;
use repro_tune::search::Objective;
use repro_tune::search::Outcome;
use repro_tune::search::Progress;
use repro_tune::search::Proposer;
use repro_tune::search::Settings;
use repro_tune::search::Trial;
use repro_tune::space::show;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Evaluates trials and supplies the elite's cubins: the GPU pipeline in the stage, fakes in
/// tests.
pub trait Backend: Objective {
    /// The cubin of each trial (compiled again if needed; the compile cache makes that free).
    fn cubins(&mut self, elite: &[Candidate]) -> anyhow::Result<Vec<PathBuf>>;
    /// The confirmation of a passing trial before it is reported: its correctness runs
    /// (untimed) on every declared shape, each of the shape's recipes and every seed of the
    /// workload, as the bench stage checks a variant. A backend with no GPU side (the tests'
    /// fakes) has nothing more to run.
    fn confirm(&mut self, _trial: &Candidate) -> anyhow::Result<Vec<BenchResult>> {
        Ok(Vec::new())
    }
    /// The nvcc that builds the cubins (`nvcc --version`'s release line), if a real one.
    fn nvcc_version(&self) -> Option<String> {
        None
    }
}

/// Where live lines go: the stage's progress line and its log.
pub struct Reporter<'a> {
    pub progress: &'a dyn Fn(&str),
    pub log: &'a mut dyn Write,
}

/// The tune stage's `proposer:` at work: the command, and where its sources are kept.
pub struct Sources<'a> {
    pub proposer: &'a mut dyn Proposer,
    pub store: &'a SourceStore,
}

/// Run the search (after the exhaustive sweep when asked), write every output under
/// `staging`, and say how the stage ended.
#[allow(clippy::too_many_arguments)]
pub fn tune_and_write(
    o: &TuneOptions,
    settings: &Settings,
    exhaustive: bool,
    backend: &mut dyn Backend,
    memo: &mut Memo,
    staging: &Path,
    report: Reporter,
    sources: Option<Sources>,
) -> anyhow::Result<StageOutcome> {
    let Reporter { progress, log } = report;
    let mut log_error = None;
    let mut observer = |p: Progress| {
        let line = progress_line(&p);
        progress(&line);
        if let Err(e) = writeln!(log, "{line}") {
            log_error.get_or_insert(e);
        }
    };
    let out = staging.join(&o.dir);
    let swept = if exhaustive {
        let all = Settings {
            exhaustive: true,
            ..settings.clone()
        };
        let started = Instant::now();
        let swept = search::run(&o.space, &all, backend, memo, &mut observer)?;
        write_trials(&out.join("exhaustive.csv"), &swept.trials)?;
        Some((swept, started.elapsed()))
    } else {
        None
    };
    let started = Instant::now();
    let (mut proposer, store) = match sources {
        Some(s) => (Some(s.proposer), Some(s.store)),
        None => (None, None),
    };
    let outcome = search::run_with(
        &o.space,
        settings,
        backend,
        memo,
        &mut observer,
        proposer.as_deref_mut(),
    )?;
    let wall = started.elapsed();
    if let Some(e) = log_error {
        return Err(e).context("cannot write the stage log");
    }
    let mut outcome = outcome;
    let confirming = Instant::now();
    let (elite, remembered) =
        confirmed_elite(&mut outcome.trials, outcome.elite.len(), backend, memo)?;
    outcome.elite = elite;
    writeln!(
        log,
        "tune: the elite confirmed on every check shape in {:.1} s ({remembered} confirmation(s) from the memo)",
        confirming.elapsed().as_secs_f64()
    )?;
    write_trials(&out.join("tune_log.csv"), &outcome.trials)?;

    let elite: Vec<&Trial> = outcome.elite.iter().map(|&i| &outcome.trials[i]).collect();
    let candidates: Vec<Candidate> = elite.iter().map(|t| t.candidate.clone()).collect();
    let cubins = backend.cubins(&candidates)?;
    let diffs = match store {
        Some(store) => write_elite_diffs((staging, &o.dir), store, &elite)?,
        None => Default::default(),
    };
    let mut entries = Vec::new();
    for ((rank, &index), (trial, cubin)) in
        (1u32..).zip(&outcome.elite).zip(elite.iter().zip(&cubins))
    {
        let dest = staging.join(o.elite_cubin(rank));
        if let Some(dir) = dest.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::copy(cubin, &dest)
            .with_context(|| format!("cannot copy {} to {}", cubin.display(), dest.display()))?;
        let source = trial.candidate.source.as_ref();
        entries.push(EliteEntry {
            rank,
            trial: trial.candidate.trial,
            config: trial.candidate.config.clone(),
            parents: trial.candidate.parents.clone(),
            p50_us: trial.evaluation.score.unwrap_or(f64::NAN),
            nvcc_version: backend.nvcc_version(),
            source: source.map(|s| short(&s.digest).to_string()),
            diff: source.and_then(|s| diffs.get(&s.digest).cloned()),
            lineage: lineage(&outcome.trials, index)
                .into_iter()
                .map(|i| lineage_step(&outcome.trials[i]))
                .collect(),
            bench: trial.evaluation.bench.clone(),
        });
    }
    // Ranks no passing configuration filled get no cubin (optional outputs).
    write_json(&out.join("topk.json"), &entries)?;

    let summary = summary_line(&outcome, wall, o.space.valid().len());
    progress(&summary);
    writeln!(log, "{summary}")?;
    if let Some(line) = proposer.and_then(|p| p.summary()) {
        progress(&line);
        writeln!(log, "{line}")?;
    }
    if let Some((swept, swept_wall)) = &swept {
        let comparison = Comparison::new(&outcome, swept, *swept_wall, settings.budget);
        let line = comparison.line();
        progress(&line);
        writeln!(log, "{line}")?;
        write_json(&out.join("comparison.json"), &comparison)?;
    }
    Ok(match outcome.best() {
        Some(_) => StageOutcome::Passed,
        None => StageOutcome::GateFailed(format!(
            "no configuration passed the gates in {} trials ({})",
            outcome.trials.len(),
            status_counts(&outcome.trials)
        )),
    })
}

/// The elite after confirmation: the passing trials, best first, each confirmed
/// ([`Backend::confirm`], or the runs `memo` kept of an earlier confirmation in the same
/// context) until `k` pass. A confirmed trial keeps its runs in its `bench`; one that fails a
/// run becomes that run's verdict (`incorrect` or `failed`, the note naming the shape, recipe
/// and seed), so `tune_log.csv` and `topk.json` never call it passing. Also says how many
/// confirmations came from the memo.
fn confirmed_elite(
    trials: &mut [Trial],
    k: usize,
    backend: &mut dyn Backend,
    memo: &mut Memo,
) -> anyhow::Result<(Vec<usize>, usize)> {
    let mut ranked: Vec<usize> = (0..trials.len())
        .filter(|&i| trials[i].evaluation.score.is_some())
        .collect();
    ranked.sort_by(|&a, &b| search::ranking(&trials[a], &trials[b]));
    let mut elite = Vec::new();
    let mut remembered = 0;
    for i in ranked {
        if elite.len() == k {
            break;
        }
        let c = &trials[i].candidate;
        let source = c.source.as_ref().map(|s| s.digest.as_str());
        let runs = match memo.confirmation(source, &c.config) {
            Some(runs) => {
                remembered += 1;
                runs.to_vec()
            }
            None => {
                let runs = backend.confirm(c)?;
                memo.record_confirmation(source, &c.config, &runs, &timestamp())?;
                runs
            }
        };
        let e = &mut trials[i].evaluation;
        let failed = runs.iter().find_map(|r| match judge(r, false) {
            Verdict::Reject(status, note) => Some((status, r, note)),
            Verdict::Pass(_) => None,
        });
        if let Some((status, r, note)) = failed {
            e.note = format!(
                "confirmation: {} ({} inputs, seed {}): {note}",
                r.shape, r.inputs, r.seed
            );
            e.correctness_pass = (status == TrialStatus::Incorrect).then_some(false);
            e.status = status;
            e.score = None;
            e.bench.push(r.clone());
            continue;
        }
        e.bench.extend(runs);
        elite.push(i);
    }
    Ok((elite, remembered))
}

/// One trial of an elite member's lineage, as `topk.json` records it.
fn lineage_step(t: &Trial) -> LineageStep {
    let c = &t.candidate;
    let origin = Origin::of(c);
    LineageStep {
        trial: c.trial,
        generation: c.generation,
        parents: c.parents.clone(),
        config: c.config.clone(),
        source: origin.source,
        patch: origin.patch,
        note: origin.note,
        status: t.evaluation.status.clone(),
        p50_us: t.evaluation.score,
    }
}

fn progress_line(p: &Progress) -> String {
    let t = p.trial;
    let e = &t.evaluation;
    let result = match e.score {
        Some(s) => format!("ok {s:.2} µs"),
        None => e.status.to_string(),
    };
    let best = match p.best {
        Some(b) => format!(
            "best {:.2} µs (trial {})",
            b.evaluation.score.unwrap_or(f64::NAN),
            b.candidate.trial
        ),
        None => "no passing trial yet".into(),
    };
    let source = t
        .candidate
        .source
        .as_ref()
        .map(|s| format!(" on source {}", short(&s.digest)))
        .unwrap_or_default();
    format!(
        "trial {}/{} gen {} {}{result} · {best} · {}{source}",
        p.finished,
        p.planned,
        t.candidate.generation,
        if t.cached { "(memo) " } else { "" },
        show(&t.candidate.config)
    )
}

fn status_counts(trials: &[Trial]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in trials {
        *counts.entry(t.evaluation.status.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn summary_line(outcome: &Outcome, wall: Duration, space: usize) -> String {
    let unmade = outcome
        .trials
        .iter()
        .filter(|t| t.evaluation.status == TrialStatus::ProposalError)
        .count();
    let evaluated = outcome.trials.iter().filter(|t| !t.cached).count() - unmade;
    let unmade = match unmade {
        0 => String::new(),
        n => format!(", {n} proposals that never became a source"),
    };
    let best = match outcome.best() {
        Some(b) => format!(
            "best {:.2} µs at trial {} {}",
            b.evaluation.score.unwrap_or(f64::NAN),
            b.candidate.trial,
            show(&b.candidate.config)
        ),
        None => "no configuration passed".into(),
    };
    format!(
        "tune: {} trials of {space} configurations ({evaluated} evaluated, {} from the memo{unmade}) in {:.1} s; {}; {best}",
        outcome.trials.len(),
        outcome.trials.iter().filter(|t| t.cached).count(),
        wall.as_secs_f64(),
        status_counts(&outcome.trials)
    )
}
