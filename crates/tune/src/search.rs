//! The evolutionary search (EvoEngineer-Full style): a seeded population over the valid
//! space, evaluated one generation at a time through an [`Objective`], the best K kept as
//! the elite and parents of the next generation, children made by mutation (one or two
//! parameters moved to a neighbouring value) and crossover of two elite parents.
//!
//! Determinism: every random choice comes from one ChaCha stream seeded by `seed`, and a
//! generation's candidates depend only on the results before it. A resumed search replays
//! the trials the [`Memo`] already holds, so it walks the same path and continues where it
//! stopped; a larger budget continues the same path further.
//!
//! With a [`Proposer`] ([`run_with`]), each generation from the second on starts with the
//! kernel sources it proposes (each paired with a configuration) and is filled up with
//! define-space children; a child of a proposed source keeps that source. A trial is then
//! a (source, configuration) pair, and the memo is keyed by both.

mod evaluate;
mod population;

use super::memo::{Evaluation, Memo};
use super::space::Config;
use super::space::Space;
use anyhow::bail;
use evaluate::evaluate;
use population::State;
use repro_schema::TrialStatus;
use std::path::PathBuf;

/// Smallest batch of an exhaustive sweep.
const EXHAUSTIVE_BATCH: usize = 32;

/// One configuration to evaluate, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// 1-based, in proposal order.
    pub trial: u32,
    /// 0-based.
    pub generation: u32,
    pub config: Config,
    /// Trial numbers of the parents (empty for random samples).
    pub parents: Vec<u32>,
    /// The proposed kernel source it compiles; `None`: the kernel's own. A define-space
    /// child of a proposed source keeps its first parent's.
    pub source: Option<SourceRef>,
    /// Set when a proposer made this candidate (not on its define-space descendants).
    pub proposal: Option<Proposal>,
}

/// A kernel source a proposer wrote, stored under `.repro/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceRef {
    /// SHA-256 of the text, hex: with the configuration, what identifies a trial.
    pub digest: String,
    /// The file, relative to the project root.
    pub path: PathBuf,
}

/// What a proposer sent to make a candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// SHA-256 (hex) of the patch, when it sent a patch rather than a whole source.
    pub patch: Option<String>,
    /// Its one-line description of the change (empty when it gave none).
    pub note: String,
}

/// What a proposer sees before a generation.
pub struct View<'a> {
    pub generation: u32,
    pub space: &'a Space,
    /// Every trial so far, in order.
    pub trials: &'a [Trial],
    /// Indices into `trials` of the elite, best first.
    pub elite: &'a [usize],
    /// The most candidates it may add to this generation.
    pub max: usize,
}

/// One candidate from a proposer.
#[derive(Debug, Clone, PartialEq)]
pub enum Proposed {
    /// A source to compile with `config`.
    Ready {
        source: SourceRef,
        config: Config,
        parents: Vec<u32>,
        proposal: Proposal,
    },
    /// One that could not become a source (a patch that does not apply, a malformed entry):
    /// a failed trial with `status` and `reason`, never evaluated or memoized. `at` is
    /// when the proposer answered, so a replayed answer gives the same row.
    Failed {
        config: Config,
        parents: Vec<u32>,
        proposal: Proposal,
        status: TrialStatus,
        reason: String,
        at: String,
    },
}

/// Proposes kernel sources between generations (the tune stage's `proposer:`).
pub trait Proposer {
    /// Candidates for `view.generation` (1 and later; never in an exhaustive sweep), at
    /// most `view.max`. A proposer that fails returns none, after saying why its own way:
    /// the generation is then filled from the define space.
    fn propose(&mut self, view: &View) -> Vec<Proposed>;

    /// One line on what it did over the search, for the stage's summary.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// A finished trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub candidate: Candidate,
    pub evaluation: Evaluation,
    /// Read from the memo rather than evaluated in this run.
    pub cached: bool,
    /// When it finished (RFC 3339, UTC; from the memo for cached trials).
    pub finished: String,
}

/// What a search is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Most trials (every proposed candidate counts, failed or not).
    pub budget: u32,
    /// Candidates per generation.
    pub population: u32,
    /// How many of the best survive as parents (K).
    pub elite: u32,
    pub seed: u64,
    /// Evaluate every valid configuration, in enumeration order, ignoring `budget`.
    pub exhaustive: bool,
    /// Configurations of the kernel's own source tried first, in this order, before any
    /// random sample (the tune stage's: its base variant's), so the search never reports a
    /// best slower than where it started.
    pub start: Vec<Config>,
}

/// Evaluates candidates: synthetic landscapes in tests, compile + gates + GPU timing in
/// the tune stage.
pub trait Objective {
    /// Evaluate one generation. Call `done(i, evaluation)` once for each `batch[i]` as soon
    /// as it finishes (any order). An `Err` stops the tune (interrupt, broken toolchain);
    /// the trials already reported through `done` are kept in the memo.
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()>;
}

/// Seen by the observer after each finished trial.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    pub trial: &'a Trial,
    /// Trials finished so far, this one included.
    pub finished: u32,
    /// The number the search stops at: the budget, or the space size when smaller.
    pub planned: u32,
    /// The best passing trial so far.
    pub best: Option<&'a Trial>,
}

/// The result of a search.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Every trial in proposal order.
    pub trials: Vec<Trial>,
    /// Indices into `trials` of the elite, best first.
    pub elite: Vec<usize>,
    /// Every valid configuration was evaluated.
    pub exhausted: bool,
}

impl Outcome {
    /// The best passing trial.
    pub fn best(&self) -> Option<&Trial> {
        self.elite.first().map(|&i| &self.trials[i])
    }
}

/// Run the search over `space`, evaluating through `objective`, memoizing in `memo`.
pub fn run(
    space: &Space,
    settings: &Settings,
    objective: &mut dyn Objective,
    memo: &mut Memo,
    observer: &mut dyn FnMut(Progress),
) -> anyhow::Result<Outcome> {
    run_with(space, settings, objective, memo, observer, None)
}

/// [`run`], with the sources `proposer` adds to each generation from the second on.
pub fn run_with<'p>(
    space: &Space,
    settings: &Settings,
    objective: &mut dyn Objective,
    memo: &mut Memo,
    observer: &mut dyn FnMut(Progress),
    mut proposer: Option<&mut (dyn Proposer + 'p)>,
) -> anyhow::Result<Outcome> {
    if settings.population == 0 || settings.elite == 0 {
        bail!("population and elite must be at least 1");
    }
    let total = space.valid().len();
    let limit = if settings.exhaustive {
        total
    } else if proposer.is_some() {
        // Proposed sources reach past the define space.
        settings.budget as usize
    } else {
        (settings.budget as usize).min(total)
    };
    let mut state = State::new(space, settings);
    let mut generation = 0u32;
    while state.trials.len() < limit {
        let population = settings.population as usize;
        let mut batch = if settings.exhaustive {
            // Batches as large as is useful for parallel compiles; order is all that matters.
            state.in_order(population.max(EXHAUSTIVE_BATCH))
        } else {
            let mut batch = match proposer.as_deref_mut().filter(|_| generation > 0) {
                Some(p) => state.take_proposals(p, generation, population),
                None => Vec::new(),
            };
            let room = population.saturating_sub(batch.len());
            batch.extend(state.propose(room));
            batch
        };
        if batch.is_empty() {
            break;
        }
        batch.truncate(limit - state.trials.len());
        let first = state.trials.len() as u32 + 1;
        let (batch, preset): (Vec<Candidate>, Vec<Option<(Evaluation, String)>>) = batch
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let candidate = Candidate {
                    trial: first + i as u32,
                    generation,
                    config: p.config,
                    parents: p.parents,
                    source: p.source,
                    proposal: p.proposal,
                };
                (candidate, p.failed)
            })
            .unzip();
        evaluate(
            &mut state,
            &batch,
            preset,
            objective,
            memo,
            observer,
            limit as u32,
        )?;
        generation += 1;
    }
    let base_seen = state.seen.iter().filter(|(s, _)| s.is_none()).count();
    Ok(Outcome {
        exhausted: base_seen == total,
        elite: state.elite,
        trials: state.trials,
    })
}

/// The order of passing trials, best first: [`better`] as an `Ordering`.
pub fn ranking(a: &Trial, b: &Trial) -> std::cmp::Ordering {
    if better(a, b) {
        std::cmp::Ordering::Less
    } else if better(b, a) {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Equal
    }
}

/// Lower score first; ties broken by the earlier trial.
fn better(a: &Trial, b: &Trial) -> bool {
    let key = |t: &Trial| {
        (
            t.evaluation.score.unwrap_or(f64::INFINITY),
            t.candidate.trial,
        )
    };
    let (ka, kb) = (key(a), key(b));
    ka.0 < kb.0 || (ka.0 == kb.0 && ka.1 < kb.1)
}
