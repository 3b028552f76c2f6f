//! The tune search on synthetic, deterministic landscapes (no GPU): it must find a
//! configuration within 2% of the true optimum in at most 20% of the space (median over
//! 10 seeds) and sooner than random sampling; never evaluate a configuration twice; and
//! resume after a kill to the same result as an uninterrupted run.
//!
//! `cargo test --release --test tune_search tune_synthetic -- --nocapture` prints the table
//! in docs/PERFORMANCE.md.

mod determinism;
mod landscapes;
mod quality;

use repro::tune::memo::{Evaluation, Memo};
use repro::tune::search::{self, Candidate, Objective, Settings};
use repro::tune::space::{Config, Space};

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
        start: Vec::new(),
    }
}
