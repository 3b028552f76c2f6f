//! Every record the tests read — the report fixtures, the bench fixtures and the project's
//! own committed `artifacts/` — holds a state the tool can produce: gates agree with the
//! numbers they judge (recomputed with the stages' own gate functions), a tune log never
//! evaluates a configuration twice, and the elite is drawn from the valid trials.
//!
//! A fixture that breaks one of these makes tests pass on a state no run can reach; fix the
//! fixture (or its generator, `tests/fixtures/report/generate.py`), not this test.

use repro::pipeline::{Pipeline, PtxasGates};
use repro::report::artifacts::{Artifacts, TuneData};
use repro::schema::{
    BenchFile, BenchResult, BuildRecord, GateResult, NcuSummary, RunStatus, TrialStatus,
};
use repro::stages::bench::correctness_gates;
use repro::stages::build::gates::record_gates;
use repro::stages::BuiltinKind;
use repro::tune::options::{TuneOptions, DEFAULT_DIR};
use repro::workload::{Declaration, Workloads};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

/// A gate's verdict is its comparison: recompute it with the tool's constructor.
fn check_verdict(where_: &str, g: &GateResult, problems: &mut Vec<String>) {
    let again = match g.op.as_str() {
        "<=" => GateResult::at_most(&g.gate, &g.subject, g.measured, g.threshold),
        ">=" => GateResult::at_least(&g.gate, &g.subject, g.measured, g.threshold),
        op => {
            problems.push(format!("{where_}: gate {} has op {op:?}", g.gate));
            return;
        }
    };
    if again.pass != g.pass {
        problems.push(format!(
            "{where_}: gate {} {} says pass={} but {} {} {} is {}",
            g.gate, g.subject, g.pass, g.measured, g.op, g.threshold, again.pass
        ));
    }
}

/// `ptxas`: the gates of the record's kernel (`Pipeline::ptxas_gates_for`).
fn check_build(
    where_: &str,
    r: &BuildRecord,
    ptxas: Option<&PtxasGates>,
    problems: &mut Vec<String>,
) {
    for (arch, b) in &r.archs {
        let where_ = format!("{where_} ({arch})");
        for g in &b.gates {
            check_verdict(&where_, g, problems);
        }
        if !b.ok() {
            if !b.gates.is_empty() {
                problems.push(format!("{where_}: a build that did not compile has gates"));
            }
            continue;
        }
        let Some(ptxas) = ptxas else { continue };
        let expected = record_gates(b, &r.entry, ptxas, arch);
        let recorded: Vec<_> = b
            .gates
            .iter()
            .filter(|g| g.gate.starts_with("ptxas."))
            .cloned()
            .collect();
        if recorded != expected {
            problems.push(format!(
                "{where_}: PTXAS gates are not what the build stage computes from the record's \
                 resources (static + dynamic shared memory): recorded {:?}, expected {:?}",
                brief(&b.gates),
                brief(&expected)
            ));
        }
    }
}

fn brief(gates: &[GateResult]) -> Vec<String> {
    gates
        .iter()
        .map(|g| {
            format!(
                "{} {} {} {} → {}",
                g.gate, g.measured, g.op, g.threshold, g.pass
            )
        })
        .collect()
}

fn check_result(where_: &str, r: &BenchResult, problems: &mut Vec<String>) {
    let at = format!("{where_} {}/seed{}", r.shape, r.seed);
    if r.status.is_ok() && r.timing_mode.is_some() {
        match (r.min_us, r.p50_us, r.p90_us, r.p99_us) {
            (Some(min), Some(p50), Some(p90), Some(p99)) => {
                if !(min <= p50 && p50 <= p90 && p90 <= p99 && min > 0.0) {
                    problems.push(format!(
                        "{at}: percentiles out of order: min {min} p50 {p50} p90 {p90} p99 {p99}"
                    ));
                }
            }
            _ => problems.push(format!("{at}: timed (status ok) without min/p50/p90/p99")),
        }
    } else if r.status.is_ok() {
        // A correctness-only run (the tuner's untimed checks): no time at all.
        if r.p50_us.is_some() {
            problems.push(format!("{at}: a time without a timing mode"));
        }
    } else if r.p50_us.is_some() || r.correctness_pass == Some(true) {
        problems.push(format!(
            "{at}: status {} but carries a time or a correctness pass",
            r.status
        ));
    }
}

fn check_bench(where_: &str, f: &BenchFile, decl: &Declaration, problems: &mut Vec<String>) {
    for r in &f.results {
        check_result(where_, r, problems);
    }
    let class = f.precision.as_deref().or(decl.precision.as_deref());
    let expected = correctness_gates(&f.results, decl, class);
    for g in &f.gates {
        check_verdict(where_, g, problems);
        if !g.gate.starts_with("correctness.") {
            continue;
        }
        match expected
            .iter()
            .find(|e| e.gate == g.gate && e.subject == g.subject)
        {
            Some(e) if e == g => {}
            Some(e) => problems.push(format!(
                "{where_}: {} {} recorded as {:?}, the bench stage computes {:?}",
                g.gate,
                g.subject,
                brief(std::slice::from_ref(g)),
                brief(std::slice::from_ref(e))
            )),
            None => problems.push(format!(
                "{where_}: {} {} is not a gate the bench stage writes for these results",
                g.gate, g.subject
            )),
        }
    }
    // A record counts as correct only if every correctness gate of its (shape, seed) passed.
    for r in &f.results {
        let subject = format!("{}/seed{}", r.shape, r.seed);
        let mine: Vec<&GateResult> = f
            .gates
            .iter()
            .filter(|g| g.subject == subject && g.gate.starts_with("correctness."))
            .collect();
        if !mine.is_empty() && r.correctness_pass.is_some() {
            let all = mine.iter().all(|g| g.pass);
            if r.correctness_pass != Some(all) {
                problems.push(format!(
                    "{where_} {subject}: correctness_pass {:?} but its gates say {all}",
                    r.correctness_pass
                ));
            }
        }
    }
}

fn config_map(json: &str) -> Option<BTreeMap<String, i64>> {
    serde_json::from_str(json).ok()
}

/// The PTXAS gates the trials in `artifacts/tune` were judged by: its tune stage's kernel's.
fn tune_gates(p: &Pipeline) -> Option<PtxasGates> {
    p.stages
        .values()
        .filter(|s| s.is(BuiltinKind::Tune))
        .filter_map(|s| TuneOptions::parse(s, p).ok())
        .find(|o| o.dir == DEFAULT_DIR)
        .expect("a tune stage writes artifacts/tune")
        .ptxas
}

/// `ptxas`: the gates of the tuned kernel ([`tune_gates`]).
fn check_tune(where_: &str, t: &TuneData, ptxas: Option<&PtxasGates>, problems: &mut Vec<String>) {
    let mut seen = BTreeMap::new();
    for tr in &t.trials {
        let at = format!("{where_} trial {}", tr.trial);
        if let Some(first) = seen.insert(tr.config.clone(), tr.trial) {
            problems.push(format!(
                "{at}: same config as trial {first} (the tuner never evaluates a config twice)"
            ));
        }
        if config_map(&tr.config).is_none() {
            problems.push(format!(
                "{at}: config {:?} is not a JSON object of integers",
                tr.config
            ));
        }
        let over_regs = match (tr.registers, ptxas.and_then(|g| g.max_registers)) {
            (Some(r), Some(max)) => r > max,
            _ => false,
        };
        let over_spill = match (tr.spill_bytes, ptxas.and_then(|g| g.max_spill_bytes)) {
            (Some(s), Some(max)) => s > max,
            _ => false,
        };
        match &tr.status {
            TrialStatus::Ok | TrialStatus::Incorrect => {
                if over_regs || over_spill {
                    problems.push(format!(
                        "{at}: status {} but registers {:?} / spills {:?} fail the PTXAS gate",
                        tr.status, tr.registers, tr.spill_bytes
                    ));
                }
                let want_pass = tr.status.is_ok();
                if tr.correctness_pass != Some(want_pass) {
                    problems.push(format!(
                        "{at}: status {} with correctness_pass {:?}",
                        tr.status, tr.correctness_pass
                    ));
                }
                if want_pass && !tr.p50_us.is_some_and(|p| p > 0.0) {
                    problems.push(format!("{at}: status ok without a p50"));
                }
                if !want_pass && tr.p50_us.is_some() {
                    problems.push(format!("{at}: an incorrect trial carries a time"));
                }
            }
            TrialStatus::PtxasGate => {
                let smem = tr.note.contains("ptxas.max_smem_bytes");
                if !(over_regs || over_spill || smem) {
                    problems.push(format!(
                        "{at}: status ptxas_gate but registers {:?} and spills {:?} pass it \
                         (note {:?})",
                        tr.registers, tr.spill_bytes, tr.note
                    ));
                }
                if let Some(r) = tr.registers.filter(|_| over_regs) {
                    let says = format!("ptxas.max_registers {r} > ");
                    if !tr.note.contains(&says) {
                        problems.push(format!(
                            "{at}: note {:?} does not say {says:?} as the tuner writes it",
                            tr.note
                        ));
                    }
                }
            }
            TrialStatus::CompileError | TrialStatus::Failed | TrialStatus::ProposalError => {}
            TrialStatus::Other(other) => problems.push(format!("{at}: unknown status {other:?}")),
        }
        if !tr.status.is_ok() && tr.p50_us.is_some() {
            problems.push(format!("{at}: status {} carries a time", tr.status));
        }
    }

    let mut elite_configs = BTreeSet::new();
    for (i, e) in t.elite.iter().enumerate() {
        let at = format!("{where_} elite #{}", e.rank);
        if e.rank as usize != i + 1 {
            problems.push(format!("{at}: ranks are not 1..n in order"));
        }
        if i > 0 && t.elite[i - 1].p50_us > e.p50_us {
            problems.push(format!("{at}: faster than the rank above it"));
        }
        if !elite_configs.insert(e.config.clone()) {
            problems.push(format!("{at}: the same config as a higher rank"));
        }
        let same_config: Vec<_> = t
            .trials
            .iter()
            .filter(|tr| config_map(&tr.config).as_ref() == Some(&e.config))
            .collect();
        match t.trials.iter().find(|tr| tr.trial == e.trial) {
            None => problems.push(format!("{at}: trial {} is not in the log", e.trial)),
            Some(tr) => {
                if !tr.status.is_ok() {
                    problems.push(format!("{at}: trial {} has status {}", e.trial, tr.status));
                }
                if config_map(&tr.config).as_ref() != Some(&e.config) {
                    problems.push(format!("{at}: config differs from trial {}'s", e.trial));
                }
                if tr.p50_us.is_some_and(|p| (p - e.p50_us).abs() > 1e-3) {
                    problems.push(format!(
                        "{at}: p50 {} differs from trial {}'s {:?}",
                        e.p50_us, e.trial, tr.p50_us
                    ));
                }
            }
        }
        if same_config.iter().any(|tr| !tr.status.is_ok()) {
            problems.push(format!(
                "{at}: its config failed in another trial ({:?})",
                same_config
                    .iter()
                    .map(|tr| (tr.trial, &tr.status))
                    .collect::<Vec<_>>()
            ));
        }
    }
    // The elite is the fastest valid trials: none left out is faster than the last one in.
    if let Some(last) = t.elite.last() {
        let in_elite: BTreeSet<u32> = t.elite.iter().map(|e| e.trial).collect();
        for tr in t.trials.iter().filter(|tr| tr.status.is_ok()) {
            if !in_elite.contains(&tr.trial) && tr.p50_us.is_some_and(|p| p < last.p50_us) {
                problems.push(format!(
                    "{where_}: trial {} ({:?} µs) is faster than elite #{} ({} µs) but left out",
                    tr.trial, tr.p50_us, last.rank, last.p50_us
                ));
            }
        }
    }
}

fn check_ncu(where_: &str, s: &NcuSummary, problems: &mut Vec<String>) {
    for t in &s.targets {
        let at = format!("{where_} {}", t.target);
        let metrics = [
            t.sm_util_pct,
            t.tensor_core_util_pct,
            t.achieved_occupancy_pct,
            t.registers_per_thread,
            t.l2_hit_rate_pct,
            t.dram_bw_pct_peak,
            t.kernel_time_us,
        ];
        match &t.status {
            RunStatus::Ok => {
                if !t.kernel_time_us.is_some_and(|x| x > 0.0) {
                    problems.push(format!("{at}: status ok without a kernel time"));
                }
                for pct in [t.achieved_occupancy_pct, t.dram_bw_pct_peak, t.sm_util_pct]
                    .into_iter()
                    .flatten()
                {
                    if !(0.0..=100.0).contains(&pct) {
                        problems.push(format!("{at}: a percentage of {pct}"));
                    }
                }
            }
            RunStatus::Failed | RunStatus::Skipped => {
                if metrics.iter().any(Option::is_some) || t.reason.is_none() {
                    problems.push(format!(
                        "{at}: status {} must carry a reason and no metrics",
                        t.status
                    ));
                }
            }
            RunStatus::Other(other) => problems.push(format!("{at}: unknown status {other:?}")),
        }
    }
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

/// The checks above can fail: the build_list fixture's old gate (static shared memory only,
/// with 45056 B of dynamic shared memory beside it) is caught.
#[test]
fn a_gate_that_ignores_dynamic_shared_memory_is_caught() {
    let text = std::fs::read_to_string(
        source_root().join("tests/fixtures/report/green/artifacts/build/stage2-baseline.json"),
    )
    .unwrap();
    let mut r: BuildRecord = serde_json::from_str(&text).unwrap();
    let pipeline = pipeline_of(&source_root().join("tests/fixtures/report/green"));
    let gates = pipeline.ptxas_gates_for(&r.kernel);
    let mut problems = Vec::new();
    check_build("ok", &r, gates.as_ref(), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    for b in r.archs.values_mut() {
        b.dynamic_smem_bytes = Some(45056);
    }
    check_build("dyn", &r, gates.as_ref(), &mut problems);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("static + dynamic"), "{problems:?}");
}

#[test]
fn a_duplicate_trial_and_an_elite_that_failed_are_caught() {
    let root = source_root().join("tests/fixtures/report/green");
    let mut t = Artifacts::load(&root).unwrap().tune.unwrap();
    let gates = tune_gates(&pipeline_of(&root));
    let mut problems = Vec::new();
    check_tune("ok", &t, gates.as_ref(), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    // The elite's config evaluated again, failing the register gate.
    let mut dup = t.trials[0].clone();
    dup.trial = 999;
    dup.config = serde_json::to_string(&t.elite[0].config).unwrap();
    dup.status = TrialStatus::PtxasGate;
    dup.registers = Some(200);
    dup.p50_us = None;
    dup.correctness_pass = None;
    dup.note = "sdpa_fp8_fwd: ptxas.max_registers 200 > 120".into();
    t.trials.push(dup);
    check_tune("bad", &t, gates.as_ref(), &mut problems);
    assert!(
        problems.iter().any(|p| p.contains("same config as trial"))
            && problems
                .iter()
                .any(|p| p.contains("failed in another trial")),
        "{problems:?}"
    );
}

/// The shipped pipeline profiles what it ships: the profile stage's targets, resolved as the
/// stage resolves them (`control` to the control variant), cover every variant, so the report
/// never shows a shipped variant without its Nsight Compute row.
#[test]
fn the_shipped_profile_stage_covers_every_shipped_variant() {
    use repro::stages::profile::{needed_tunes, resolve_targets, ProfileOptions};
    let root = source_root();
    let project = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let pipeline = &project.pipeline;
    let profiles: Vec<_> = project
        .stages
        .iter()
        .filter(|s| s.config.get::<ProfileOptions>().is_some())
        .collect();
    assert_eq!(profiles.len(), 1, "one profile stage in pipeline.yaml");
    let opts: &ProfileOptions = profiles[0].config.of();
    let tunes = needed_tunes(&profiles[0].spec, &project.configs);
    let (run, _) = resolve_targets(opts, &tunes, pipeline, &root);
    let targets: BTreeSet<&str> = run.iter().map(|t| t.variant.as_str()).collect();
    let missing: Vec<&str> = pipeline
        .variants
        .keys()
        .map(String::as_str)
        .filter(|v| !targets.contains(v))
        .collect();
    assert!(
        missing.is_empty(),
        "pipeline.yaml: shipped variants the profile stage does not profile: {missing:?}"
    );
}

/// The shipped shapes reach every tail path (`kernels.<name>.tails`) of every configuration
/// a shipped tune stage may try — each valid point of its space over its base's defines —
/// not only of the shipped variants, so a tuned kernel's confirmation on every declared
/// shape runs its partial tiles and scalar tails too.
#[test]
fn the_shipped_shapes_reach_every_tail_of_every_tunable_configuration() {
    use repro::pipeline::VariantSpec;
    use repro::workload::tails::of_variant;
    let mut p = pipeline_of(&source_root());
    let tunes: Vec<TuneOptions> = p
        .stages
        .values()
        .filter(|s| s.is(BuiltinKind::Tune))
        .map(|s| TuneOptions::parse(s, &p).unwrap())
        .collect();
    assert_eq!(tunes.len(), 2, "pipeline.yaml tunes both kernels");
    let mut checked = 0;
    for o in &tunes {
        for config in o.space.valid() {
            let mut defines: repro::pipeline::Defines = o
                .base_defines
                .iter()
                .map(|(k, v)| (k.clone(), serde_yaml::from_str(v).unwrap()))
                .collect();
            defines.extend(config.iter().map(|(k, v)| (k.clone(), (*v).into())));
            let trial = VariantSpec {
                kernel: o.kernel.clone(),
                defines,
                precision: None,
            };
            p.variants.insert("trial".into(), trial);
            let reach = of_variant(&p, "trial").unwrap();
            assert!(!reach.is_empty(), "kernel `{}` declares no tails", o.kernel);
            if let Some(r) = reach.iter().find(|r| r.unreached()) {
                panic!(
                    "{} with {config:?}: no shipped shape reaches `{}` ({})",
                    o.kernel, r.tail, r.condition
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} configurations");
}
