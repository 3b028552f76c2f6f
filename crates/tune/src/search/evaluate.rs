//! One generation evaluated: failed proposals and memo hits first, the rest through the objective.

use super::population::{digest, State};
use super::{better, Candidate, Objective, Progress, Trial};
use crate::{memo::timestamp, memo::Evaluation, memo::Memo};
use anyhow::Context;

/// Evaluate one generation: failed proposals and memo hits first (in order), the rest
/// through the objective.
pub(super) fn evaluate(
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
            let at = timestamp();
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
