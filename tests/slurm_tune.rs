//! A CPU-only tune through the real Slurm executor: the tune search (`repro::tune`) with
//! an objective that evaluates each trial as a shell job through an executor, a
//! generation's jobs running concurrently up to the executor's `gpu_slots`, each holding
//! one (fake) GPU. The same search through the local executor must give identical trials.
//! Runs only with REPRO_SLURM_TESTS=1 (`ci/slurm/setup.sh` starts the cluster).

#[path = "support/slurm.rs"]
mod support;

use repro::executor::local::LocalExecutor;
use repro::executor::slurm::{SlurmExecutor, SlurmSettings};
use repro::executor::{CancelFlag, Executor, Job};
use repro::schema::TrialStatus;
use repro::tune::memo::{Evaluation, Memo};
use repro::tune::search::{self, Candidate, Objective, Settings};
use repro::tune::space::Space;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use support::enabled;

/// The score a trial's job prints: a bowl with its minimum at X=5, Y=3; Y=0 "crashes".
const SCORE: &str = r#"if [ "$Y" -eq 0 ]; then echo "Y=0 is invalid" >&2; exit 2; fi
echo $(( (X - 5) * (X - 5) * 3 + (Y - 3) * (Y - 3) * 2 + 10 ))"#;

/// Evaluates a generation by running one job per candidate, `gpu_slots` at a time.
struct JobObjective<'a> {
    executor: &'a dyn Executor,
    dir: &'a Path,
    prefix: String,
    cancel: CancelFlag,
    nodes: Mutex<Vec<String>>,
}

impl JobObjective<'_> {
    fn evaluate_one(&self, c: &Candidate, slot: u32) -> Evaluation {
        let mut job = Job::new(
            format!("{}-{}", self.prefix, c.trial),
            vec!["sh".into(), "-c".into(), SCORE.into()],
            self.dir,
        );
        for (k, v) in &c.config {
            job.env.insert(k.clone(), v.to_string());
        }
        job.gpu = Some(slot);
        job.capture_stdout = true;
        let out = match self.executor.run(&job, &self.cancel) {
            Ok(out) => out,
            Err(e) => return Evaluation::rejected(TrialStatus::Failed, e.to_string()),
        };
        if let Some(node) = out.node.clone() {
            self.nodes.lock().unwrap().push(node);
        }
        if !out.success() {
            return Evaluation::rejected(
                TrialStatus::Failed,
                format!("{:?}: {}", out.exit, out.tail),
            );
        }
        match String::from_utf8_lossy(&out.stdout).trim().parse::<f64>() {
            Ok(score) => Evaluation::ok(score),
            Err(_) => Evaluation::rejected(TrialStatus::Failed, "no score printed"),
        }
    }
}

impl Objective for JobObjective<'_> {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        let slots = self.executor.gpu_slots().max(1) as usize;
        for (chunk_index, chunk) in batch.chunks(slots).enumerate() {
            let this = &*self;
            let results: Vec<Evaluation> = std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .enumerate()
                    .map(|(slot, c)| s.spawn(move || this.evaluate_one(c, slot as u32)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for (i, evaluation) in results.into_iter().enumerate() {
                done(chunk_index * slots + i, evaluation);
            }
        }
        Ok(())
    }
}

/// Runs the search through `executor` in a fresh memo; returns (config, status, score)
/// per trial in trial order, the elite's trial numbers and the nodes that ran jobs.
fn tune(executor: &dyn Executor, label: &str) -> (Vec<String>, Vec<u32>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let space = Space::from_yaml(
        &serde_yaml::from_str("X: [1, 2, 3, 4, 5, 6, 7, 8]\nY: [0, 1, 2, 3, 4, 5, 6]").unwrap(),
        None,
    )
    .unwrap();
    let settings = Settings {
        budget: 16,
        population: 4,
        elite: 2,
        seed: 7,
        exhaustive: false,
        start: Vec::new(),
    };
    let mut memo = Memo::open(&dir.path().join("memo"), &serde_json::json!({"t": label})).unwrap();
    let mut objective = JobObjective {
        executor,
        dir: dir.path(),
        prefix: format!("repro-tune-{label}-{}", std::process::id()),
        cancel: Arc::new(AtomicBool::new(false)),
        nodes: Mutex::new(Vec::new()),
    };
    let outcome = search::run(&space, &settings, &mut objective, &mut memo, &mut |_| {}).unwrap();
    let trials = outcome
        .trials
        .iter()
        .map(|t| {
            format!(
                "{:?} {} {:?}",
                t.candidate.config, t.evaluation.status, t.evaluation.score
            )
        })
        .collect();
    let elite = outcome
        .elite
        .iter()
        .map(|&i| outcome.trials[i].candidate.trial)
        .collect();
    (trials, elite, objective.nodes.into_inner().unwrap())
}

#[test]
fn a_cpu_tune_through_slurm_matches_the_local_executor() {
    if !enabled() {
        return;
    }
    let slurm = SlurmExecutor::new(SlurmSettings {
        partition: Some("debug".into()),
        gres: Some("gpu:1".into()),
        time: Some("5".into()),
        ..SlurmSettings::default()
    })
    .unwrap_or_else(|e| panic!("REPRO_SLURM_TESTS=1 but the Slurm cluster is not usable: {e}"));
    assert!(slurm.gpu_slots() >= 2, "the CI cluster has 2 fake GPUs");

    let (local_trials, local_elite, _) = tune(&LocalExecutor::new(), "local");
    let (slurm_trials, slurm_elite, nodes) = tune(&slurm, "slurm");

    assert_eq!(slurm_trials.len(), 16);
    assert_eq!(slurm_trials, local_trials);
    assert_eq!(slurm_elite, local_elite);
    assert!(
        slurm_trials.iter().any(|t| t.contains(" failed ")),
        "some trials fail (Y=0): {slurm_trials:#?}"
    );
    assert_eq!(nodes.len(), 16, "every Slurm trial recorded its node");
}
