//! The tune stage's orchestration without a GPU (search, memo, CSV, elite, cubins,
//! exhaustive comparison, declared outputs) with a fake backend in place of nvcc and
//! `repro exec`.

use super::*;
use crate::tests::calls::Calls;
use repro_pipeline::kind::Overrides;
use repro_pipeline::kind::TuneOverrides;
use repro_schema::BenchResult;
use repro_schema::EliteEntry;
use repro_schema::RunStatus;
use repro_schema::TrialStatus;
use repro_schema::TuneTrial;
use repro_tune::memo::Evaluation;
use repro_tune::search::Candidate;
use repro_tune::search::Objective;
use repro_tune::space::show;

const PIPELINE: &str = r#"kernels:
  attn_fp8: {source: kernels/attn_fp8.cu, entry: attn_fp8_fwd}
variants:
  base: {kernel: attn_fp8, defines: {USE_CP_ASYNC: 1}}
stages:
  evo-tune:
    uses: tune
    base: base
    budget: 24
    population: 6
    elite: 3
    seed: 1
    space:
      TILE_M: [32, 64, 128]
      TILE_N: [32, 64, 128]
      NUM_WARPS: [2, 4, 8]
      USE_WARP_SPECIALIZATION: [0, 1]
      NUM_PRODUCER_WARPS: {values: [1, 2], when: "USE_WARP_SPECIALIZATION == 1"}
    constraints: ["TILE_M * TILE_N <= 8192", "USE_WARP_SPECIALIZATION == 0 || NUM_PRODUCER_WARPS < NUM_WARPS"]
"#;

pub(super) fn options() -> (Pipeline, TuneOptions) {
    let p = repro_pipeline::workload::testing::tiny_pipeline(PIPELINE, &["attn_fp8"]);
    let o = TuneOptions::parse(&p.stages["evo-tune"], &p).unwrap();
    (p, o)
}

pub(super) fn settings(o: &TuneOptions) -> Settings {
    Settings {
        budget: o.budget,
        population: o.population,
        elite: o.elite,
        seed: o.seed,
        exhaustive: false,
        start: Vec::new(),
    }
}

/// Stands in for nvcc + `repro exec`: a deterministic time per configuration, big tiles
/// fail a PTXAS gate, a proposed source (read under `dir`, the project root) that says
/// `FAST` is 3 µs faster, and cubins are small files naming their configuration.
pub(super) struct Fake {
    pub(super) dir: PathBuf,
    pub(super) evaluated: usize,
    pub(super) all_fail: bool,
}

impl Objective for Fake {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        for (i, c) in batch.iter().enumerate() {
            self.evaluated += 1;
            let (m, n, w) = (
                c.config["TILE_M"],
                c.config["TILE_N"],
                c.config["NUM_WARPS"],
            );
            let e = if self.all_fail || m == 128 || (w == 2 && n >= 64) {
                Evaluation::rejected(TrialStatus::PtxasGate, "ptxas.max_registers 168 > 128")
            } else {
                let ws = c.config["USE_WARP_SPECIALIZATION"] as f64;
                let fast = c.source.as_ref().is_some_and(|s| {
                    std::fs::read_to_string(self.dir.join(&s.path))
                        .unwrap()
                        .contains("FAST")
                });
                let time = 10.0 - if fast { 3.0 } else { 0.0 }
                    + ((m - 64) as f64 / 32.0).powi(2)
                    + (n as f64 / 64.0)
                    + (w as f64 - 4.0).abs()
                    - ws * 0.5
                    + c.config.get("NUM_PRODUCER_WARPS").copied().unwrap_or(0) as f64 * 0.1;
                let mut e = Evaluation::ok(time);
                e.registers = Some(96);
                e.spill_bytes = Some(0);
                e.max_abs_err = Some(0.001);
                e.correctness_pass = Some(true);
                let mut r = BenchResult::blank("mission", mission(), 0, (10, 50), RunStatus::Ok);
                r.p50_us = Some(time);
                e.bench = vec![r];
                e
            };
            done(i, e);
        }
        Ok(())
    }
}

impl Backend for Fake {
    fn cubins(&mut self, elite: &[Candidate]) -> anyhow::Result<Vec<PathBuf>> {
        elite
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let path = self.dir.join(format!("{i}.cubin"));
                std::fs::write(&path, show(&c.config))?;
                Ok(path)
            })
            .collect()
    }
}

/// The dimensions of the `tiny` workload's `mission` shape.
pub(super) fn mission() -> repro_pipeline::workload::exprs::Bindings {
    [("n".to_string(), 4096)].into()
}

fn run(
    o: &TuneOptions,
    exhaustive: bool,
    fake: &mut dyn Backend,
    memo: &mut Memo,
    staging: &Path,
) -> (StageOutcome, Vec<String>, String) {
    let lines = std::cell::RefCell::new(Vec::new());
    let progress = |l: &str| lines.borrow_mut().push(l.to_string());
    let mut log = Vec::new();
    let outcome = tune_and_write(
        o,
        &settings(o),
        exhaustive,
        fake,
        memo,
        staging,
        Reporter {
            progress: &progress,
            log: &mut log,
        },
        None,
    )
    .unwrap();
    (outcome, lines.into_inner(), String::from_utf8(log).unwrap())
}

pub(super) fn read_csv(path: &Path) -> Vec<TuneTrial> {
    csv::Reader::from_path(path)
        .unwrap()
        .deserialize()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn writes_the_log_the_elite_and_their_cubins() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::in_memory();
    let (outcome, lines, log) = run(&o, false, &mut fake, &mut memo, &staging);
    assert_eq!(outcome, StageOutcome::Passed);
    assert_eq!(fake.evaluated, 24);

    let text = std::fs::read_to_string(staging.join("artifacts/tune/tune_log.csv")).unwrap();
    assert!(text.starts_with(
        "trial,generation,timestamp,config,status,registers,spill_bytes,max_abs_err,max_err_over_ref_std,p50_us,correctness_pass,note,parents,source,patch\n"
    ));
    let rows = read_csv(&staging.join("artifacts/tune/tune_log.csv"));
    assert_eq!(rows.len(), 24);
    assert_eq!(
        rows.iter().map(|r| r.trial).collect::<Vec<_>>(),
        (1..=24).collect::<Vec<_>>()
    );
    assert_eq!(rows.iter().map(|r| r.generation).max(), Some(3));
    assert!(rows
        .iter()
        .any(|r| r.status == TrialStatus::PtxasGate && r.p50_us.is_none()));
    assert!(rows.iter().any(|r| r.note.starts_with("parents ")));
    let configs: std::collections::HashSet<&str> = rows.iter().map(|r| r.config.as_str()).collect();
    assert_eq!(configs.len(), 24, "a configuration was tried twice");

    let topk: Vec<EliteEntry> = serde_json::from_str(
        &std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        topk.iter().map(|e| e.rank).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(topk.windows(2).all(|w| w[0].p50_us <= w[1].p50_us));
    let best_row = rows
        .iter()
        .filter_map(|r| r.p50_us)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(topk[0].p50_us, best_row);
    assert_eq!(topk[0].bench.len(), 1);
    for e in &topk {
        let cubin = std::fs::read_to_string(staging.join(o.elite_cubin(e.rank))).unwrap();
        assert_eq!(cubin, show(&e.config));
    }

    assert_eq!(lines.iter().filter(|l| l.starts_with("trial ")).count(), 24);
    assert!(lines[0].starts_with("trial 1/24 gen 0 "), "{}", lines[0]);
    assert!(lines
        .last()
        .unwrap()
        .starts_with("tune: 24 trials of 64 configurations (24 evaluated, 0 from the memo)"));
    assert!(log.contains("best "), "{log}");
}

#[test]
fn exhaustive_writes_the_sweep_and_the_comparison_and_replays_the_search() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::in_memory();
    let (outcome, lines, _) = run(&o, true, &mut fake, &mut memo, &staging);
    assert_eq!(outcome, StageOutcome::Passed);
    // The sweep evaluates all 64; the search then replays from the memo.
    assert_eq!(fake.evaluated, 64);
    assert_eq!(
        read_csv(&staging.join("artifacts/tune/exhaustive.csv")).len(),
        64
    );
    let search = read_csv(&staging.join("artifacts/tune/tune_log.csv"));
    assert_eq!(search.len(), 24);
    assert!(search.iter().all(|r| r.note.ends_with("(memo)")));
    let cmp: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(staging.join("artifacts/tune/comparison.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(cmp["space"], 64);
    assert_eq!(cmp["search_trials"], 24);
    assert!(cmp["gap_pct"].as_f64().unwrap() >= 0.0);
    assert!(lines.last().unwrap().starts_with("search best "));
}

#[test]
fn nothing_passing_is_a_failed_gate_with_empty_elite() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: true,
    };
    let (outcome, _, _) = run(&o, false, &mut fake, &mut Memo::in_memory(), &staging);
    assert_eq!(
        outcome,
        StageOutcome::GateFailed(
            "no configuration passed the gates in 24 trials (24 ptxas_gate)".into()
        )
    );
    assert_eq!(
        std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap(),
        "[]\n"
    );
    for rank in 1..=3 {
        assert!(
            !staging.join(o.elite_cubin(rank)).exists(),
            "no cubin may stand in for rank {rank}"
        );
    }
}

#[test]
fn a_rerun_reads_every_trial_from_the_memo() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let key = serde_json::json!({"test": "rerun"});
    let mut fake = Fake {
        dir: dir.path().to_path_buf(),
        evaluated: 0,
        all_fail: false,
    };
    let mut memo = Memo::open(&dir.path().join("memo"), &key).unwrap();
    run(&o, false, &mut fake, &mut memo, &dir.path().join("a"));
    drop(memo);
    let mut memo = Memo::open(&dir.path().join("memo"), &key).unwrap();
    let (_, lines, _) = run(&o, false, &mut fake, &mut memo, &dir.path().join("b"));
    assert_eq!(fake.evaluated, 24);
    assert!(lines
        .last()
        .unwrap()
        .contains("(0 evaluated, 24 from the memo)"));
    let a = std::fs::read_to_string(dir.path().join("a/artifacts/tune/topk.json")).unwrap();
    let b = std::fs::read_to_string(dir.path().join("b/artifacts/tune/topk.json")).unwrap();
    assert_eq!(a, b);
}

#[test]
fn declared_outputs_and_fingerprint_overrides() {
    let (p, _) = options();
    let spec = &p.stages["evo-tune"];
    assert_eq!(
        TuneStage.outputs_of("evo-tune", spec, &p),
        vec![
            PathBuf::from("artifacts/tune"),
            PathBuf::from(".repro/cubins/tune-top1.cubin"),
            PathBuf::from(".repro/cubins/tune-top2.cubin"),
            PathBuf::from(".repro/cubins/tune-top3.cubin"),
        ]
    );
    assert_eq!(
        TuneStage.optional_outputs_of("evo-tune", spec, &p),
        TuneStage.outputs_of("evo-tune", spec, &p)[1..],
        "the elite cubins are optional"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("kernels")).unwrap();
    std::fs::write(
        dir.path().join("kernels/attn_fp8.cu"),
        "#include \"common.cuh\"\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("kernels/common.cuh"), "\n").unwrap();
    let plain = TuneStage
        .inputs_of("evo-tune", spec, &p, dir.path())
        .unwrap();
    assert!(plain.code.contains(&PathBuf::from("kernels/common.cuh")));
    assert_eq!(plain.params["budget"], "24");
    assert_eq!(plain.params["exhaustive"], "false");
    let overrides = Overrides {
        tune: TuneOverrides {
            exhaustive: true,
            budget: std::num::NonZeroU32::new(40),
        },
        ..Overrides::default()
    };
    let over = TuneStage
        .inputs_under("evo-tune", spec, &p, dir.path(), &overrides)
        .unwrap();
    assert_eq!(
        (
            over.params["budget"].as_str(),
            over.params["exhaustive"].as_str()
        ),
        ("40", "true")
    );
    // The lock records them, and they read back as they were given.
    assert!(plain.overrides.is_empty());
    assert_eq!(
        over.overrides,
        BTreeMap::from([
            ("budget".to_string(), "40".to_string()),
            ("exhaustive".to_string(), "true".to_string()),
        ])
    );
    assert_eq!(Overrides::from_recorded(&over.overrides), overrides);
}

/// A trial is a build of the tuned kernel: its own `ptxas:` over `gates.ptxas` judges every
/// trial, keys the fingerprint and the memo, and is what the proposer's brief names.
#[test]
fn trials_are_judged_by_the_tuned_kernels_ptxas_gates() {
    let gated = PIPELINE.replace(
        "entry: attn_fp8_fwd}",
        "entry: attn_fp8_fwd, ptxas: {max_registers: 168}}\ngates:\n  ptxas: {max_registers: 128, max_spill_bytes: 0}",
    );
    let p = repro_pipeline::workload::testing::tiny_pipeline(&gated, &["attn_fp8"]);
    let spec = &p.stages["evo-tune"];
    let o = TuneOptions::parse(spec, &p).unwrap();
    let own = repro_pipeline::PtxasGates {
        max_registers: Some(168),
        max_smem_bytes: None,
        max_spill_bytes: Some(0),
    };
    assert_eq!(o.ptxas, Some(own));
    assert_ne!(o.ptxas, p.gates.ptxas, "not the pipeline's");
    let dir = tempfile::tempdir().unwrap();
    let inputs = TuneStage
        .inputs_of("evo-tune", spec, &p, dir.path())
        .unwrap();
    let json = r#"{"max_registers":168,"max_smem_bytes":null,"max_spill_bytes":0}"#;
    assert_eq!(inputs.params["gates"], json);
    assert!(objective(&o).contains(&format!("passes the ptxas gates {json}")));
}

/// [`Fake`] with a GPU side: each confirmation is one `ragged` seed-2 run, and the trials
/// confirmed are counted in order. With `reject_first`, the first trial it confirms (the
/// search's best) fails its run; a passing run names its trial in `error`.
struct Confirming {
    fake: Fake,
    confirmed: Vec<u32>,
    reject_first: bool,
}

impl Confirming {
    fn new(dir: &Path, reject_first: bool) -> Self {
        Confirming {
            fake: Fake {
                dir: dir.to_path_buf(),
                evaluated: 0,
                all_fail: false,
            },
            confirmed: Vec::new(),
            reject_first,
        }
    }
}

impl Objective for Confirming {
    fn evaluate(
        &mut self,
        batch: &[Candidate],
        done: &mut dyn FnMut(usize, Evaluation),
    ) -> anyhow::Result<()> {
        self.fake.evaluate(batch, done)
    }
}

impl Backend for Confirming {
    fn cubins(&mut self, elite: &[Candidate]) -> anyhow::Result<Vec<PathBuf>> {
        self.fake.cubins(elite)
    }

    fn confirm(&mut self, trial: &Candidate) -> anyhow::Result<Vec<BenchResult>> {
        self.confirmed.push(trial.trial);
        let pass = !(self.reject_first && self.confirmed.len() == 1);
        let mut r = BenchResult::blank("ragged", mission(), 2, (0, 0), RunStatus::Ok);
        r.correctness_pass = Some(pass);
        if pass {
            r.error = Some(format!("confirmed trial {}", trial.trial));
        }
        Ok(vec![r])
    }
}

/// A trial is reported as passing only once it passed every declared shape, recipe and
/// seed: the best one fails its confirmation, so it is `incorrect` in the log, not in the
/// elite, and the next passing trials fill the elite, carrying their confirmation runs.
#[test]
fn a_trial_that_fails_its_confirmation_leaves_the_elite_and_is_logged_incorrect() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    let mut backend = Confirming::new(dir.path(), true);
    let (outcome, _, _) = run(&o, false, &mut backend, &mut Memo::in_memory(), &staging);
    assert_eq!(outcome, StageOutcome::Passed);
    let rejected = *backend
        .confirmed
        .first()
        .expect("the best trial was confirmed first");
    let rows = read_csv(&staging.join("artifacts/tune/tune_log.csv"));
    let row = rows.iter().find(|r| r.trial == rejected).unwrap();
    assert_eq!(
        (&row.status, row.p50_us, row.correctness_pass),
        (&TrialStatus::Incorrect, None, Some(false))
    );
    assert!(
        row.note
            .contains("confirmation: ragged (gaussian inputs, seed 2): max_abs_err"),
        "{}",
        row.note
    );
    let topk: Vec<EliteEntry> = serde_json::from_str(
        &std::fs::read_to_string(staging.join("artifacts/tune/topk.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(topk.len(), 3);
    assert!(topk.iter().all(|e| e.trial != rejected
        && e.bench
            .last()
            .is_some_and(|r| r.shape == "ragged" && r.seed == 2)));
}

/// A rerun in the same memo context confirms nothing again: each elite member's runs come
/// from the memo, and the elite it writes is the same, byte for byte.
#[test]
fn a_rerun_takes_the_elites_confirmations_from_the_memo() {
    let (_, o) = options();
    let dir = tempfile::tempdir().unwrap();
    let key = serde_json::json!({"test": "confirmations"});
    let mut backend = Confirming::new(dir.path(), false);
    let mut topk = Vec::new();
    let mut logs = Vec::new();
    for run_no in 0..2 {
        let staging = dir.path().join(format!("staging{run_no}"));
        let mut memo = Memo::open(&dir.path().join("memo"), &key).unwrap();
        let (outcome, _, log) = run(&o, false, &mut backend, &mut memo, &staging);
        assert_eq!(outcome, StageOutcome::Passed);
        topk.push(std::fs::read(staging.join("artifacts/tune/topk.json")).unwrap());
        logs.push(log);
    }
    assert_eq!(
        backend.confirmed.len(),
        3,
        "the first run confirms the elite of 3, the rerun none"
    );
    assert_eq!(topk[0], topk[1]);
    assert!(
        logs[0].contains("(0 confirmation(s) from the memo)"),
        "{}",
        logs[0]
    );
    assert!(
        logs[1].contains("(3 confirmation(s) from the memo)"),
        "{}",
        logs[1]
    );
    let entries: Vec<EliteEntry> = serde_json::from_slice(&topk[1]).unwrap();
    assert!(entries
        .iter()
        .all(|e| e.bench.last().and_then(|r| r.error.as_deref())
            == Some(&format!("confirmed trial {}", e.trial)[..])));
}
