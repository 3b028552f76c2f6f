//! The population: what was tried, the elite, and the next generation's candidates.

use super::{better, Proposal, Proposed, Proposer, Settings, SourceRef, Trial, View};
use crate::memo::Evaluation;
use crate::{space::Config, space::Param, space::Space};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::collections::VecDeque;

/// How long to look for an unseen child before falling back to a random unseen config.
const CHILD_ATTEMPTS: usize = 64;
/// Share of children made by crossover (when there are two elite parents).
const CROSSOVER_RATE: f64 = 0.3;
/// A candidate before it gets its trial number. `failed`: a proposal that failed before it
/// could be evaluated, with when.
pub(super) struct Planned {
    pub(super) config: Config,
    pub(super) parents: Vec<u32>,
    pub(super) source: Option<SourceRef>,
    pub(super) proposal: Option<Proposal>,
    pub(super) failed: Option<(Evaluation, String)>,
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

pub(super) fn digest(source: &Option<SourceRef>) -> Option<&str> {
    source.as_ref().map(|s| s.digest.as_str())
}

pub(super) struct State<'s> {
    space: &'s Space,
    rng: ChaCha8Rng,
    /// Every (source digest, configuration) proposed so far (evaluated or in the current
    /// batch); `None`: the kernel's own source.
    pub(super) seen: HashSet<(Option<String>, Config)>,
    pub(super) trials: Vec<Trial>,
    /// Indices into `trials` of the best K passing trials, best first.
    pub(super) elite: Vec<usize>,
    k: usize,
    /// For exhaustive runs: the next position in the valid list.
    next_in_order: usize,
    /// `Settings::start` not proposed yet.
    start: VecDeque<Config>,
}

impl<'s> State<'s> {
    /// The state before the first generation, its random stream seeded by `settings.seed`.
    pub(super) fn new(space: &'s Space, settings: &Settings) -> Self {
        State {
            space,
            rng: ChaCha8Rng::seed_from_u64(settings.seed),
            seen: HashSet::new(),
            trials: Vec::new(),
            elite: Vec::new(),
            k: settings.elite as usize,
            next_in_order: 0,
            start: settings.start.iter().cloned().collect(),
        }
    }

    pub(super) fn best(&self) -> Option<&Trial> {
        self.elite.first().map(|&i| &self.trials[i])
    }

    pub(super) fn push(&mut self, trial: Trial) {
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

    pub(super) fn in_order(&mut self, n: usize) -> Vec<Planned> {
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
    pub(super) fn take_proposals(
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

    /// The next generation: the start configurations first, then random samples until
    /// something passes, then children of the elite (falling back to random unseen samples
    /// when the neighbourhood is used up).
    pub(super) fn propose(&mut self, n: usize) -> Vec<Planned> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let child = match self.start_unseen() {
                Some(start) => Some(start),
                None if self.elite.is_empty() => None,
                None => self.child(),
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

    /// The next start configuration not tried yet.
    fn start_unseen(&mut self) -> Option<Planned> {
        while let Some(config) = self.start.pop_front() {
            if !self.seen.contains(&(None, config.clone())) {
                return Some(Planned::new(config, Vec::new(), None));
            }
        }
        None
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
