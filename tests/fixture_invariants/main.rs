//! Every record the tests read — the report fixtures, the bench fixtures and the project's
//! own committed `artifacts/` — holds a state the tool can produce: gates agree with the
//! numbers they judge (recomputed with the stages' own gate functions), a tune log never
//! evaluates a configuration twice, and the elite is drawn from the valid trials.
//!
//! A fixture that breaks one of these makes tests pass on a state no run can reach; fix the
//! fixture (or its generator, `tests/fixtures/report/generate.py`), not this test.

mod records;
mod shipped;
mod tune;

use records::{check_bench, check_build, check_ncu, check_result};
use repro::pipeline::Pipeline;
use repro::report::artifacts::Artifacts;
use repro::schema::{BenchFile, BenchResult, BuildRecord};
use repro::workload::{Declaration, Workloads};
use std::path::{Path, PathBuf};
use tune::{check_tune, tune_gates};

fn source_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every project folder holding `artifacts/`: the report fixtures and the project itself.
fn projects() -> Vec<PathBuf> {
    let root = source_root();
    let mut out = vec![root.clone()];
    let fixtures = root.join("tests/fixtures/report");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("artifacts").is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "report fixtures not found in {fixtures:?}");
    out.extend(dirs);
    out
}

fn pipeline_of(project: &Path) -> Pipeline {
    let file = project.join("pipeline.yaml");
    repro::pipeline::load(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .pipeline
}

/// The declaration `f`'s results were judged by: its variant's workload, else the one its
/// file names, else the pipeline's first.
fn declaration_of(p: &Pipeline, f: &BenchFile) -> Declaration {
    let w = Workloads::of(p);
    w.of_variant(p, &f.name)
        .or_else(|| {
            f.workload
                .as_deref()
                .and_then(|n| w.iter().find(|(m, _)| *m == n))
        })
        .or_else(|| w.iter().next())
        .map(|(_, d)| d.clone())
        .expect("the fixture's pipeline declares a workload")
}

/// What was checked, so the test cannot pass by finding nothing.
#[derive(Default)]
struct Counts {
    builds: usize,
    benches: usize,
    trials: usize,
    elite: usize,
    ncu: usize,
}

fn check_project(root: &Path, counts: &mut Counts, problems: &mut Vec<String>) {
    let name = root
        .strip_prefix(source_root())
        .unwrap_or(root)
        .display()
        .to_string();
    let name = if name.is_empty() {
        ".".to_string()
    } else {
        name
    };
    let pipeline = pipeline_of(root);
    let a = Artifacts::load(root).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    for r in a.builds.iter().flatten() {
        counts.builds += 1;
        let ptxas = pipeline.ptxas_gates_for(&r.kernel);
        let at = format!("{name} build/{}", r.variant);
        check_build(&at, r, ptxas.as_ref(), problems);
    }
    let benches = a.benches.iter().flatten().map(|f| ("bench", f));
    let baselines = a.baselines.iter().flatten().map(|f| ("baseline", f));
    for (kind, f) in benches.chain(baselines) {
        counts.benches += 1;
        let at = format!("{name} {kind}/{}", f.name);
        check_bench(&at, f, &declaration_of(&pipeline, f), problems);
    }
    if let Some(t) = &a.tune {
        counts.trials += t.trials.len();
        counts.elite += t.elite.len();
        let ptxas = tune_gates(&pipeline);
        check_tune(&format!("{name} tune"), t, ptxas.as_ref(), problems);
        for e in &t.elite {
            for r in &e.bench {
                check_result(&format!("{name} elite #{}", e.rank), r, problems);
            }
        }
    }
    if let Some(s) = &a.ncu {
        counts.ncu += s.targets.len();
        check_ncu(&format!("{name} ncu"), s, problems);
    }
}

#[test]
fn every_fixture_holds_a_state_the_tool_can_produce() {
    let mut counts = Counts::default();
    let mut problems = Vec::new();
    for p in projects() {
        check_project(&p, &mut counts, &mut problems);
    }
    let bench = source_root().join("tests/fixtures/bench");
    for name in ["torch-attention-best.json", "torch-attention-default.json"] {
        let text = std::fs::read_to_string(bench.join(name)).unwrap();
        let f: BenchFile = serde_json::from_str(&text).unwrap();
        counts.benches += 1;
        let attention = Workloads::of(&pipeline_of(&source_root()));
        let decl = attention.iter().next().map(|(_, d)| d.clone()).unwrap();
        check_bench(name, &f, &decl, &mut problems);
    }
    let exec = std::fs::read_to_string(bench.join("h100-exec.jsonl")).unwrap();
    for (i, line) in exec.lines().enumerate() {
        let r: BenchResult = serde_json::from_str(line).unwrap();
        check_result(&format!("h100-exec.jsonl:{}", i + 1), &r, &mut problems);
    }
    assert!(
        counts.builds >= 12 && counts.benches >= 20 && counts.trials >= 48,
        "too little was checked: {} builds, {} bench files, {} trials",
        counts.builds,
        counts.benches,
        counts.trials
    );
    assert!(counts.elite >= 6 && counts.ncu >= 8);
    assert!(
        problems.is_empty(),
        "{} impossible states:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
