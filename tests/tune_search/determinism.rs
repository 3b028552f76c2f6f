//! Never a configuration twice; the same seed, a resume or a larger budget walk the same path.

use super::landscapes::{bowl, realistic};
use super::*;
use std::collections::HashSet;

#[test]
fn never_evaluates_the_same_config_twice_and_stops_when_exhausted() {
    use repro::schema::TrialStatus;
    let l = realistic();
    let size = l.space.valid().len();
    let mut objective = Synthetic::new(&l);
    let mut seen_by_observer = 0;
    let outcome = search::run(
        &l.space,
        &settings(10 * size as u32, 3),
        &mut objective,
        &mut Memo::in_memory(),
        &mut |p| {
            seen_by_observer += 1;
            assert_eq!(p.finished, seen_by_observer);
            assert_eq!(p.planned as usize, size);
        },
    )
    .unwrap();
    assert!(outcome.exhausted);
    assert_eq!(outcome.trials.len(), size);
    assert_eq!(objective.evaluated.len(), size);
    let distinct: HashSet<&Config> = objective.evaluated.iter().collect();
    assert_eq!(distinct.len(), size);
    // Failed trials count against the budget and keep their status.
    let failed = outcome
        .trials
        .iter()
        .filter(|t| t.evaluation.status == TrialStatus::PtxasGate)
        .count();
    assert!(failed > 0);
    // The exhaustive best is the true optimum.
    assert_eq!(outcome.best().unwrap().evaluation.score, Some(l.optimum()));
}

#[test]
fn same_seed_same_trials_other_seed_other_trials() {
    let l = bowl();
    let run = |seed| {
        let mut objective = Synthetic::new(&l);
        search::run(
            &l.space,
            &settings(60, seed),
            &mut objective,
            &mut Memo::in_memory(),
            &mut |_| {},
        )
        .unwrap()
        .trials
        .into_iter()
        .map(|t| t.candidate)
        .collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    // Children name their parents, which are earlier trials.
    for c in run(7) {
        assert!(c.parents.iter().all(|p| *p < c.trial), "{c:?}");
        assert!(c.parents.len() <= 2);
    }
}

#[test]
fn resume_after_a_kill_matches_an_uninterrupted_run() {
    let l = realistic();
    let dir = tempfile::tempdir().unwrap();
    let key = serde_json::json!({"landscape": "realistic"});
    let budget = 70;

    let mut uninterrupted = Synthetic::new(&l);
    let want = search::run(
        &l.space,
        &settings(budget, 11),
        &mut uninterrupted,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();

    // Killed in the middle of the fourth generation.
    let mut killed = Synthetic::new(&l);
    killed.kill_after = Some(29);
    let mut memo = Memo::open(dir.path(), &key).unwrap();
    let err = search::run(
        &l.space,
        &settings(budget, 11),
        &mut killed,
        &mut memo,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("killed"));
    drop(memo);

    let mut resumed = Synthetic::new(&l);
    let mut memo = Memo::open(dir.path(), &key).unwrap();
    assert_eq!(memo.len(), 29);
    let got = search::run(
        &l.space,
        &settings(budget, 11),
        &mut resumed,
        &mut memo,
        &mut |_| {},
    )
    .unwrap();

    // Nothing evaluated twice across the two processes, and nothing skipped.
    let mut all: Vec<&Config> = killed.evaluated.iter().chain(&resumed.evaluated).collect();
    assert_eq!(all.len(), budget as usize);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), budget as usize);
    // Same path, same result.
    let strip = |o: &search::Outcome| {
        o.trials
            .iter()
            .map(|t| (t.candidate.clone(), t.evaluation.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&got), strip(&want));
    assert_eq!(got.elite, want.elite);
    assert_eq!(got.trials.iter().filter(|t| t.cached).count(), 29);
}

#[test]
fn a_larger_budget_continues_the_same_search() {
    let l = bowl();
    let dir = tempfile::tempdir().unwrap();
    let key = serde_json::json!({"landscape": "bowl"});
    let mut first = Synthetic::new(&l);
    let mut memo = Memo::open(dir.path(), &key).unwrap();
    let small = search::run(
        &l.space,
        &settings(21, 5),
        &mut first,
        &mut memo,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(first.evaluated.len(), 21);

    let mut second = Synthetic::new(&l);
    let larger = search::run(
        &l.space,
        &settings(50, 5),
        &mut second,
        &mut memo,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(second.evaluated.len(), 50 - 21);
    let strip = |t: &[search::Trial]| {
        t.iter()
            .map(|t| (t.candidate.clone(), t.evaluation.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&larger.trials[..21]), strip(&small.trials));
    assert!(larger.trials[..21].iter().all(|t| t.cached));

    let mut fresh = Synthetic::new(&l);
    let direct = search::run(
        &l.space,
        &settings(50, 5),
        &mut fresh,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();
    let configs = |o: &search::Outcome| {
        o.trials
            .iter()
            .map(|t| t.candidate.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(configs(&larger), configs(&direct));
}

#[test]
fn exhaustive_evaluates_every_valid_config_in_order() {
    let l = bowl();
    let mut objective = Synthetic::new(&l);
    let mut s = settings(5, 0);
    s.exhaustive = true;
    let outcome = search::run(
        &l.space,
        &s,
        &mut objective,
        &mut Memo::in_memory(),
        &mut |_| {},
    )
    .unwrap();
    let configs: Vec<&Config> = outcome.trials.iter().map(|t| &t.candidate.config).collect();
    assert_eq!(configs, l.space.valid().iter().collect::<Vec<_>>());
    assert_eq!(outcome.best().unwrap().evaluation.score, Some(l.optimum()));
    assert_eq!(outcome.elite.len(), 3);
}

/// The start configurations are the first trials, in order (one tried already is not
/// tried again), and the search's best is never worse than the best of them.
#[test]
fn the_start_configurations_are_tried_first() {
    let l = bowl();
    let valid = l.space.valid();
    let (a, b) = (valid[valid.len() / 2].clone(), valid[1].clone());
    for seed in 0..8 {
        let mut objective = Synthetic::new(&l);
        let started = Settings {
            start: vec![a.clone(), b.clone(), a.clone()],
            ..settings(12, seed)
        };
        let outcome = search::run(
            &l.space,
            &started,
            &mut objective,
            &mut Memo::in_memory(),
            &mut |_| {},
        )
        .unwrap();
        let configs: Vec<&Config> = outcome.trials.iter().map(|t| &t.candidate.config).collect();
        assert_eq!(configs[..2], [&a, &b], "seed {seed}");
        assert_eq!(configs.iter().filter(|c| ***c == a).count(), 1);
        let start_best = [&a, &b]
            .iter()
            .filter_map(|c| (l.eval)(c).score)
            .fold(f64::INFINITY, f64::min);
        let best = outcome.best().and_then(|t| t.evaluation.score).unwrap();
        assert!(best <= start_best, "seed {seed}: {best} > {start_best}");
    }
}
