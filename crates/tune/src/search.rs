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

use super::memo::{Evaluation, Memo};
use super::space::{Config, Param, Space};
use anyhow::{bail, Context};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use repro_schema::TrialStatus;
use std::collections::HashSet;
use std::path::PathBuf;

/// How long to look for an unseen child before falling back to a random unseen config.
const CHILD_ATTEMPTS: usize = 64;
/// Smallest batch of an exhaustive sweep.
const EXHAUSTIVE_BATCH: usize = 32;
/// Share of children made by crossover (when there are two elite parents).
const CROSSOVER_RATE: f64 = 0.3;

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
    let mut state = State {
        space,
        rng: ChaCha8Rng::seed_from_u64(settings.seed),
        seen: HashSet::new(),
        trials: Vec::new(),
        elite: Vec::new(),
        k: settings.elite as usize,
        next_in_order: 0,
    };
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

/// A candidate before it gets its trial number. `failed`: a proposal that failed before it
/// could be evaluated, with when.
struct Planned {
    config: Config,
    parents: Vec<u32>,
    source: Option<SourceRef>,
    proposal: Option<Proposal>,
    failed: Option<(Evaluation, String)>,
}

impl Planned {
    fn new(config: Config, parents: Vec<u32>, source: Option<SourceRef>) -> Self {
        Planned {
            config,
            parents,
            source,
            proposal: None,
            failed: None,
        }
    }
}

fn digest(source: &Option<SourceRef>) -> Option<&str> {
    source.as_ref().map(|s| s.digest.as_str())
}

/// Evaluate one generation: failed proposals and memo hits first (in order), the rest
/// through the objective.
fn evaluate(
    state: &mut State,
    batch: &[Candidate],
    preset: Vec<Option<(Evaluation, String)>>,
    objective: &mut dyn Objective,
    memo: &mut Memo,
    observer: &mut dyn FnMut(Progress),
    planned: u32,
) -> anyhow::Result<()> {
    let mut results: Vec<Option<(Evaluation, bool, String)>> = batch
        .iter()
        .zip(preset)
        .map(|(c, failed)| match failed {
            Some((e, at)) => Some((e, false, at)),
            None => memo
                .get(digest(&c.source), &c.config)
                .map(|e| (e.evaluation.clone(), true, e.finished.clone())),
        })
        .collect();
    let fresh: Vec<usize> = (0..batch.len()).filter(|&i| results[i].is_none()).collect();
    let mut finished = state.trials.len() as u32;
    let mut best = state.best().cloned();
    let mut report = |c: &Candidate, e: &Evaluation, cached: bool, at: &str| {
        finished += 1;
        let trial = Trial {
            candidate: c.clone(),
            evaluation: e.clone(),
            cached,
            finished: at.to_string(),
        };
        if e.score.is_some() && best.as_ref().is_none_or(|b| better(&trial, b)) {
            best = Some(trial.clone());
        }
        observer(Progress {
            trial: &trial,
            finished,
            planned,
            best: best.as_ref(),
        });
    };
    for (c, r) in batch.iter().zip(&results) {
        if let Some((e, cached, at)) = r {
            report(c, e, *cached, at);
        }
    }
    if !fresh.is_empty() {
        let subset: Vec<Candidate> = fresh.iter().map(|&i| batch[i].clone()).collect();
        let mut memo_error = None;
        let outcome = objective.evaluate(&subset, &mut |j, evaluation| {
            let Some(&i) = fresh.get(j) else { return };
            if results[i].is_some() {
                return;
            }
            let at = now();
            let c = &batch[i];
            if let Err(e) = memo.record(digest(&c.source), &c.config, &evaluation, &at) {
                memo_error.get_or_insert(e);
            }
            report(&batch[i], &evaluation, false, &at);
            results[i] = Some((evaluation, false, at));
        });
        if let Some(e) = memo_error {
            return Err(e);
        }
        outcome.context("the tune stopped")?;
    }
    for (c, r) in batch.iter().zip(results) {
        let (evaluation, cached, finished) =
            r.with_context(|| format!("the objective did not report trial {}", c.trial))?;
        state.push(Trial {
            candidate: c.clone(),
            evaluation,
            cached,
            finished,
        });
    }
    Ok(())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
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

struct State<'s> {
    space: &'s Space,
    rng: ChaCha8Rng,
    /// Every (source digest, configuration) proposed so far (evaluated or in the current
    /// batch); `None`: the kernel's own source.
    seen: HashSet<(Option<String>, Config)>,
    trials: Vec<Trial>,
    /// Indices into `trials` of the best K passing trials, best first.
    elite: Vec<usize>,
    k: usize,
    /// For exhaustive runs: the next position in the valid list.
    next_in_order: usize,
}

impl State<'_> {
    fn best(&self) -> Option<&Trial> {
        self.elite.first().map(|&i| &self.trials[i])
    }

    fn push(&mut self, trial: Trial) {
        let passed = trial.evaluation.score.is_some();
        self.trials.push(trial);
        if passed {
            let at = self.trials.len() - 1;
            let pos = self
                .elite
                .iter()
                .position(|&i| better(&self.trials[at], &self.trials[i]))
                .unwrap_or(self.elite.len());
            self.elite.insert(pos, at);
            self.elite.truncate(self.k);
        }
    }

    fn in_order(&mut self, n: usize) -> Vec<Planned> {
        let valid = self.space.valid();
        let end = (self.next_in_order + n).min(valid.len());
        let out = valid[self.next_in_order..end]
            .iter()
            .map(|c| Planned::new(c.clone(), Vec::new(), None))
            .collect::<Vec<_>>();
        self.next_in_order = end;
        for p in &out {
            self.seen.insert((None, p.config.clone()));
        }
        out
    }

    /// The proposer's candidates for `generation`, at most `max`; one already tried (same
    /// source and configuration) is dropped.
    fn take_proposals(
        &mut self,
        proposer: &mut (dyn Proposer + '_),
        generation: u32,
        max: usize,
    ) -> Vec<Planned> {
        let view = View {
            generation,
            space: self.space,
            trials: &self.trials,
            elite: &self.elite,
            max,
        };
        let mut out = Vec::new();
        for p in proposer.propose(&view).into_iter().take(max) {
            match p {
                Proposed::Ready {
                    source,
                    config,
                    parents,
                    proposal,
                } => {
                    if self
                        .seen
                        .insert((Some(source.digest.clone()), config.clone()))
                    {
                        out.push(Planned {
                            proposal: Some(proposal),
                            ..Planned::new(config, parents, Some(source))
                        });
                    }
                }
                Proposed::Failed {
                    config,
                    parents,
                    proposal,
                    status,
                    reason,
                    at,
                } => out.push(Planned {
                    proposal: Some(proposal),
                    failed: Some((Evaluation::rejected(status, reason), at)),
                    ..Planned::new(config, parents, None)
                }),
            }
        }
        out
    }

    /// The next generation: random samples until something passes, then children of
    /// the elite (falling back to random unseen samples when the neighbourhood is used up).
    fn propose(&mut self, n: usize) -> Vec<Planned> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let child = if self.elite.is_empty() {
                None
            } else {
                self.child()
            };
            let Some(planned) = child.or_else(|| self.random_unseen()) else {
                break;
            };
            let key = (
                digest(&planned.source).map(str::to_string),
                planned.config.clone(),
            );
            self.seen.insert(key);
            out.push(planned);
        }
        out
    }

    /// A mutation of one elite member or a crossover of two; the child keeps the first
    /// parent's source.
    fn child(&mut self) -> Option<Planned> {
        for _ in 0..CHILD_ATTEMPTS {
            let a = *self.elite.choose(&mut self.rng)?;
            let (config, parents) = if self.elite.len() >= 2 && self.rng.random_bool(CROSSOVER_RATE)
            {
                let b = loop {
                    let b = *self.elite.choose(&mut self.rng)?;
                    if b != a {
                        break b;
                    }
                };
                let child = self.crossover(
                    &self.trials[a].candidate.config.clone(),
                    &self.trials[b].candidate.config.clone(),
                );
                let parents = vec![
                    self.trials[a].candidate.trial,
                    self.trials[b].candidate.trial,
                ];
                (child, parents)
            } else {
                let steps = self.rng.random_range(1..=2);
                let child = self.mutate(&self.trials[a].candidate.config.clone(), steps);
                (child, vec![self.trials[a].candidate.trial])
            };
            let source = self.trials[a].candidate.source.clone();
            let key = |c: &Config| (digest(&source).map(str::to_string), c.clone());
            if let Some(config) = config.filter(|c| !self.seen.contains(&key(c))) {
                return Some(Planned::new(config, parents, source));
            }
        }
        None
    }

    /// Move `steps` active parameters to a neighbouring value.
    fn mutate(&mut self, parent: &Config, steps: usize) -> Option<Config> {
        let mut config = parent.clone();
        for _ in 0..steps {
            let movable: Vec<&Param> = self
                .space
                .params()
                .iter()
                .filter(|p| p.values.len() > 1 && config.contains_key(&p.name))
                .collect();
            let p = *movable.choose(&mut self.rng)?;
            let at = p.values.iter().position(|v| *v == config[&p.name])?;
            let next = if at == 0 {
                1
            } else if at + 1 == p.values.len() || self.rng.random_bool(0.5) {
                at - 1
            } else {
                at + 1
            };
            config.insert(p.name.clone(), p.values[next]);
            let rng = &mut self.rng;
            config = self.space.canonicalize(&config, |q| {
                *q.values.choose(rng).expect("values are non-empty")
            })?;
        }
        Some(config)
    }

    /// Each parameter from one parent or the other.
    fn crossover(&mut self, a: &Config, b: &Config) -> Option<Config> {
        let mut mixed = Config::new();
        for p in self.space.params() {
            let pick = match (a.get(&p.name), b.get(&p.name)) {
                (Some(x), Some(y)) => Some(if self.rng.random_bool(0.5) { *x } else { *y }),
                (Some(x), None) | (None, Some(x)) => Some(*x),
                (None, None) => None,
            };
            if let Some(v) = pick {
                mixed.insert(p.name.clone(), v);
            }
        }
        let rng = &mut self.rng;
        self.space.canonicalize(&mixed, |q| {
            *q.values.choose(rng).expect("values are non-empty")
        })
    }

    /// A configuration of the kernel's own source not tried yet.
    fn random_unseen(&mut self) -> Option<Planned> {
        let unseen: Vec<&Config> = self
            .space
            .valid()
            .iter()
            .filter(|c| !self.seen.contains(&(None, (*c).clone())))
            .collect();
        unseen
            .choose(&mut self.rng)
            .map(|c| Planned::new((*c).clone(), Vec::new(), None))
    }
}
