//! How soon the search gets within 2% of the optimum, against random sampling.

use super::landscapes::{bowl, kernel, kernel_cp_wmma, realistic};
use super::*;

/// Trials (1-based) until the first score within 2% of the optimum; `budget + 1` if never.
fn trials_to_target(
    scores: impl Iterator<Item = Option<f64>>,
    target: f64,
    budget: usize,
) -> usize {
    scores
        .take(budget)
        .position(|s| s.is_some_and(|s| s <= target))
        .map_or(budget + 1, |i| i + 1)
}

fn median(mut v: Vec<usize>) -> f64 {
    v.sort();
    let n = v.len();
    (v[(n - 1) / 2] + v[n / 2]) as f64 / 2.0
}

/// Random sampling without replacement with the same budget, seeded.
fn random_sampling(l: &Landscape, seed: u64, target: f64, budget: usize) -> usize {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<&Config> = l.space.valid().iter().collect();
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed));
    trials_to_target(order.into_iter().map(|c| (l.eval)(c).score), target, budget)
}

fn check_landscape(l: &Landscape) {
    let size = l.space.valid().len();
    assert!(
        (200..=1000).contains(&size),
        "{}: {size} configurations",
        l.name
    );
    let failing = l
        .space
        .valid()
        .iter()
        .filter(|c| (l.eval)(c).score.is_none())
        .count();
    assert!(
        failing > 0,
        "{}: the landscape needs invalid regions",
        l.name
    );
    let optimum = l.optimum();
    let target = optimum * 1.02;
    let near = l
        .space
        .valid()
        .iter()
        .filter(|c| (l.eval)(c).score.is_some_and(|s| s <= target))
        .count();
    let budget = size / 5;
    let mut evo = Vec::new();
    let mut random = Vec::new();
    let mut random_unbounded = Vec::new();
    for seed in 0..10 {
        let mut objective = Synthetic::new(l);
        let outcome = search::run(
            &l.space,
            &settings(budget as u32, seed),
            &mut objective,
            &mut Memo::in_memory(),
            &mut |_| {},
        )
        .unwrap();
        evo.push(trials_to_target(
            outcome.trials.iter().map(|t| t.evaluation.score),
            target,
            budget,
        ));
        random.push(random_sampling(l, seed, target, budget));
        random_unbounded.push(random_sampling(l, seed, target, size));
    }
    let (evo_median, random_median) = (median(evo.clone()), median(random.clone()));
    println!(
        "| {} | {size} (+{} ruled out by constraints) | {failing} | {near} | {budget} | {evo_median} ({:.1}%) | {random_median} ({:.1}%) | {} | {evo:?} | {random_unbounded:?} |",
        l.name,
        l.space.rejected(),
        100.0 * evo_median / size as f64,
        100.0 * random_median / size as f64,
        median(random_unbounded.clone()),
    );
    assert!(
        evo_median <= budget as f64,
        "{}: median {evo_median} trials to within 2% > 20% of {size}",
        l.name
    );
    assert!(
        evo_median < random_median,
        "{}: evolutionary median {evo_median} is not better than random sampling's {random_median}",
        l.name
    );
}

fn print_header() {
    println!("| landscape | valid configs | failing gates | within 2% | budget (20%) | evo median trials | random median trials (same budget; budget+1 = not reached) | random median, no budget | evo per seed | random per seed, no budget |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
}

#[test]
fn tune_synthetic_bowl() {
    print_header();
    check_landscape(&bowl());
}

#[test]
fn tune_synthetic_realistic() {
    print_header();
    check_landscape(&realistic());
}

#[test]
fn tune_synthetic_kernel_space() {
    print_header();
    check_landscape(&kernel());
}

/// The GPU criterion on the model of the space the lead tunes for real: with a
/// budget of 40 trials (21% of 189), the best found is within 3% of the optimum in at least
/// 8 of 10 seeds (a search this short can stall in a basin: seed 7 does, at +10.7%).
#[test]
fn tune_synthetic_kernel_budget_40_within_3pct() {
    let l = kernel_cp_wmma();
    assert_eq!(l.space.valid().len(), 189);
    let optimum = l.optimum();
    let mut gaps = Vec::new();
    for seed in 0..10 {
        let outcome = search::run(
            &l.space,
            &settings(40, seed),
            &mut Synthetic::new(&l),
            &mut Memo::in_memory(),
            &mut |_| {},
        )
        .unwrap();
        let best = outcome.best().unwrap().evaluation.score.unwrap();
        gaps.push((best / optimum - 1.0) * 100.0);
    }
    let shown: Vec<String> = gaps.iter().map(|g| format!("{g:.2}%")).collect();
    println!(
        "kernel space (189), budget 40, gap to the optimum per seed: {}",
        shown.join(", ")
    );
    assert!(gaps.iter().filter(|g| **g <= 3.0).count() >= 8, "{shown:?}");
}
