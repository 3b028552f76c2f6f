//! Build, bench and ncu records: every gate agrees with the numbers it judges.

use super::*;
use repro::pipeline::PtxasGates;
use repro::schema::RunStatus;
use repro::schema::{GateResult, NcuSummary};
use repro::stages::bench::correctness_gates;
use repro::stages::build::gates::record_gates;

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
pub(super) fn check_build(
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

pub(super) fn check_result(where_: &str, r: &BenchResult, problems: &mut Vec<String>) {
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

pub(super) fn check_bench(
    where_: &str,
    f: &BenchFile,
    decl: &Declaration,
    problems: &mut Vec<String>,
) {
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

pub(super) fn check_ncu(where_: &str, s: &NcuSummary, problems: &mut Vec<String>) {
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
