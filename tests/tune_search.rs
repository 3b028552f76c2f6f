//! The tune search on synthetic, deterministic landscapes (no GPU): it must find a
//! configuration within 2% of the true optimum in at most 20% of the space (median over
//! 10 seeds) and sooner than random sampling; never evaluate a configuration twice; and
//! resume after a kill to the same result as an uninterrupted run.
//!
//! `cargo test --release --test tune_search tune_synthetic -- --nocapture` prints the table
//! in docs/PERFORMANCE.md.

use repro::schema::TrialStatus;
use repro::tune::memo::{Evaluation, Memo};
use repro::tune::search::{self, Candidate, Objective, Settings};
use repro::tune::space::{Config, Space};
use std::collections::HashSet;

/// A landscape: a space and a deterministic time (µs) or failure per configuration.
struct Landscape {
    name: &'static str,
    space: Space,
    eval: fn(&Config) -> Evaluation,
}

impl Landscape {
    fn new(
        name: &'static str,
        space: &str,
        constraints: &str,
        eval: fn(&Config) -> Evaluation,
    ) -> Self {
        let space = Space::from_yaml(
            &serde_yaml::from_str(space).unwrap(),
            Some(&serde_yaml::from_str(constraints).unwrap()),
        )
        .unwrap();
        Landscape { name, space, eval }
    }

    fn optimum(&self) -> f64 {
        self.space
            .valid()
            .iter()
            .filter_map(|c| (self.eval)(c).score)
            .fold(f64::INFINITY, f64::min)
    }
}

/// A deterministic pseudo-random number in [0, 1) from a configuration (ruggedness
/// without noise: the same configuration always gets the same bump).
fn hash01(c: &Config) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in c {
        for b in k.bytes().chain(v.to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn get(c: &Config, k: &str) -> f64 {
    c[k] as f64
}

/// A smooth bowl with interactions, a ruggedness term, a conditional parameter and an
/// invalid region that "fails to compile".
fn bowl() -> Landscape {
    Landscape::new(
        "bowl",
        r#"
X: [0, 1, 2, 3, 4, 5, 6, 7]
Y: [0, 1, 2, 3, 4, 5]
Z: [0, 1, 2, 3]
MODE: [0, 1]
BOOST: {values: [1, 2, 3], when: "MODE == 1"}
"#,
        r#"["X + Y <= 10", "MODE == 0 || BOOST < 3 || Z > 0"]"#,
        |c| {
            let (x, y, z) = (get(c, "X"), get(c, "Y"), get(c, "Z"));
            if x >= 6.0 && y <= 1.0 {
                return Evaluation::rejected(TrialStatus::CompileError, "synthetic invalid region");
            }
            let bowl = (x - 5.0).powi(2) + 0.7 * (y - 3.0).powi(2) + 2.0 * (z - 2.0).powi(2);
            let interaction = 0.4 * (x - 5.0) * (y - 3.0);
            let mode = match c.get("BOOST") {
                None => 4.0,
                Some(b) => (*b as f64 - 2.0).abs() * 3.0,
            };
            Evaluation::ok(100.0 + bowl + interaction + mode + 6.0 * hash01(c))
        },
    )
}

/// Modelled on tile-size trade-offs of an attention kernel: work per block, waves over
/// the SMs, occupancy from registers and shared memory, pipelining depth, and gates
/// (too many registers or too much shared memory) that reject configurations.
fn realistic() -> Landscape {
    Landscape::new(
        "realistic",
        r#"
TILE_M: [32, 64, 128]
TILE_N: [32, 64, 128]
NUM_WARPS: [2, 4, 8]
STAGES: [1, 2, 3]
UNROLL: [1, 2, 4]
USE_WARP_SPECIALIZATION: [0, 1]
NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
"#,
        r#"["TILE_M * TILE_N <= 8192", "USE_WARP_SPECIALIZATION == 0 || NUM_PRODUCER_WARPS < NUM_WARPS"]"#,
        |c| {
            let (tm, tn, warps, stages, unroll) = (
                get(c, "TILE_M"),
                get(c, "TILE_N"),
                get(c, "NUM_WARPS"),
                get(c, "STAGES"),
                get(c, "UNROLL"),
            );
            let ws = c["USE_WARP_SPECIALIZATION"] == 1;
            let producers = c.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64;
            let consumers = warps - producers;
            let regs = 40.0 + tm * tn / (consumers * 32.0) * 0.9 + 8.0 * unroll;
            let smem = (tm * 64.0 * 2.0 + 2.0 * tn * 64.0 * stages) + if ws { 1024.0 } else { 0.0 };
            if regs > 160.0 {
                let mut e = Evaluation::rejected(TrialStatus::PtxasGate, "registers over the gate");
                e.registers = Some(regs as u32);
                return e;
            }
            if smem > 65536.0 {
                return Evaluation::rejected(TrialStatus::PtxasGate, "shared memory over the gate");
            }
            let blocks = (512.0 / tm).ceil() * 16.0;
            let sms = 132.0;
            let per_sm = ((65536.0 / (regs * warps * 32.0)).floor())
                .min((228.0 * 1024.0 / smem).floor())
                .clamp(1.0, 8.0);
            let waves = (blocks / (sms * per_sm)).ceil();
            let compute = tm * 512.0 * 64.0 / (consumers * 32.0 * 40.0);
            let memory = 512.0 * 64.0 * 2.0 / tn * (1.0 / stages.min(2.0 + producers)).sqrt();
            let overlap = if ws {
                0.72
            } else {
                1.0 - 0.08 * (stages - 1.0)
            };
            let unroll_gain = [1.0, 0.93, 0.97][(unroll as usize).trailing_zeros() as usize];
            let time = waves * (compute + memory * overlap) * unroll_gain;
            Evaluation::ok(time * (1.0 + 0.01 * hash01(c)))
        },
    )
}

/// A cost model over the real kernel's space (`tests/fixtures/tune/kernel_space_full.yaml`:
/// every knob of kernels/sdpa_fp8.cu, 722 configurations) on the mission shape: waves over
/// 132 SMs, occupancy from registers, threads and shared memory (the kernel's formula),
/// tensor-core vs scalar P·V, cp.async / warp-specialized overlap, per-tile sync cost, and a
/// 128-register PTXAS gate.
fn kernel() -> Landscape {
    kernel_landscape("kernel", "kernel_space_full.yaml")
}

/// The same model over the 189 configurations of `benches/tune/pipeline.yaml` (cp.async and
/// WMMA P·V fixed on by the base variant).
fn kernel_cp_wmma() -> Landscape {
    kernel_landscape("kernel, cp.async + WMMA", "kernel_space.yaml")
}

fn kernel_landscape(name: &'static str, fixture: &str) -> Landscape {
    let path = format!(
        "{}/tests/fixtures/tune/{fixture}",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Landscape {
        name,
        space: Space::from_yaml(&v["space"], v.get("constraints")).unwrap(),
        eval: |c| {
            let (tm, tn, nw) = (get(c, "TILE_M"), get(c, "TILE_N"), get(c, "NUM_WARPS"));
            // Absent from the 189-configuration space: the base variant sets them to 1.
            let fixed = |k: &str| c.get(k).copied().unwrap_or(1) as f64;
            let (cp, wmma) = (fixed("USE_CP_ASYNC"), fixed("USE_WMMA_PV"));
            let ws = get(c, "USE_WARP_SPECIALIZATION");
            let producers = c.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64;
            let stages = c.get("NUM_STAGES").copied().unwrap_or(1) as f64;
            let threads = 32.0 * (nw + producers);
            let regs = 48.0
                + tm * 64.0 / (nw * 32.0)
                + if wmma == 1.0 { 0.0 } else { tn / 2.0 }
                + 4.0 * stages;
            if regs > 128.0 {
                let mut e = Evaluation::rejected(TrialStatus::PtxasGate, "ptxas.max_registers");
                e.registers = Some(regs as u32);
                return e;
            }
            let nraw = if cp == 1.0 {
                if ws == 1.0 {
                    2.0
                } else {
                    stages
                }
            } else {
                0.0
            };
            let nbuf = if ws == 1.0 { stages } else { 1.0 };
            let smem = tm * 72.0 * 2.0
                + nbuf * 2.0 * tn * 72.0 * 2.0
                + nraw * 2.0 * tn * 64.0
                + tm * (tn + 4.0) * 4.0
                + tm * (tn + 8.0) * 2.0
                + 8.0 * tm;
            let blocks = (512.0 / tm).ceil() * 16.0;
            let per_sm = (65536.0 / (regs * threads))
                .floor()
                .min((233472.0 / smem).floor())
                .clamp(1.0, 16.0);
            let waves = (blocks / (132.0 * per_sm)).ceil();
            let compute =
                tm * 512.0 * 64.0 * 2.0 / (nw * 32.0 * if wmma == 1.0 { 16.0 } else { 2.0 });
            let memory = 512.0 * 64.0 * 2.0 / 24.0;
            let overlap = if ws == 1.0 {
                0.55 + 0.05 * (2.0 - producers)
            } else if cp == 1.0 {
                1.0 - 0.12 * (stages - 1.0)
            } else {
                1.0
            };
            let sync = 512.0 / tn * 30.0;
            let time = waves * (compute + memory * overlap + sync) / 1000.0;
            Evaluation::ok(time * (1.0 + 0.01 * hash01(c)))
        },
    }
}

/// Evaluates a landscape, counting evaluations per configuration.
struct Synthetic<'l> {
    landscape: &'l Landscape,
    evaluated: Vec<Config>,
    /// Stop with an error (like a kill) after this many evaluations.
    kill_after: Option<usize>,
}

impl<'l> Synthetic<'l> {
    fn new(landscape: &'l Landscape) -> Self {
        Synthetic {
            landscape,
            evaluated: Vec::new(),
            kill_after: None,
        }
    }
}

impl Objective for Synthetic<'_> {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        // Report out of order, as parallel GPU workers would.
        for i in (0..batch.len()).rev() {
            if self.kill_after == Some(self.evaluated.len()) {
                anyhow::bail!("killed");
            }
            self.evaluated.push(batch[i].config.clone());
            done(i, (self.landscape.eval)(&batch[i].config));
        }
        Ok(())
    }
}

fn settings(budget: u32, seed: u64) -> Settings {
    Settings {
        budget,
        population: 8,
        elite: 3,
        seed,
        exhaustive: false,
    }
}

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

/// The issue's GPU criterion on the model of the space the lead tunes for real: with a
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

#[test]
fn never_evaluates_the_same_config_twice_and_stops_when_exhausted() {
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
