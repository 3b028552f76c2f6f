//! The tune log and its elite: no configuration twice on one source, an elite of valid
//! trials, gates as judged.

use super::*;
use repro::pipeline::PtxasGates;
use repro::report::artifacts::TuneData;
use repro::schema::TrialStatus;
use repro::stages::BuiltinKind;
use repro::tune::options::{TuneOptions, DEFAULT_DIR};
use std::collections::{BTreeMap, BTreeSet};

fn config_map(json: &str) -> Option<BTreeMap<String, i64>> {
    serde_json::from_str(json).ok()
}

/// The PTXAS gates the trials in `artifacts/tune` were judged by: its tune stage's kernel's.
pub(super) fn tune_gates(p: &Pipeline) -> Option<PtxasGates> {
    p.stages
        .values()
        .filter(|s| s.is(BuiltinKind::Tune))
        .filter_map(|s| TuneOptions::parse(s, p).ok())
        .find(|o| o.dir == DEFAULT_DIR)
        .expect("a tune stage writes artifacts/tune")
        .ptxas
}

/// `ptxas`: the gates of the tuned kernel ([`tune_gates`]).
pub(super) fn check_tune(
    where_: &str,
    t: &TuneData,
    ptxas: Option<&PtxasGates>,
    problems: &mut Vec<String>,
) {
    let mut seen = BTreeMap::new();
    for tr in &t.trials {
        let at = format!("{where_} trial {}", tr.trial);
        // A proposed source is another program: the same config on it is another trial.
        if let Some(first) = seen.insert((tr.source.clone(), tr.config.clone()), tr.trial) {
            problems.push(format!(
                "{at}: same config and source as trial {first} (the tuner never evaluates a config twice on one source)"
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
        if !elite_configs.insert((e.source.clone(), e.config.clone())) {
            problems.push(format!("{at}: the same config and source as a higher rank"));
        }
        let same_config: Vec<_> = t
            .trials
            .iter()
            .filter(|tr| config_map(&tr.config).as_ref() == Some(&e.config))
            .filter(|tr| tr.source == e.source.clone().unwrap_or_default())
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
#[test]
fn a_duplicate_trial_and_an_elite_that_failed_are_caught() {
    let root = source_root().join("tests/fixtures/report/green");
    let mut t = Artifacts::load(&root).unwrap().tune.unwrap();
    let gates = tune_gates(&pipeline_of(&root));
    let mut problems = Vec::new();
    check_tune("ok", &t, gates.as_ref(), &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    // The elite's config on a proposed source is another trial.
    let mut proposed = t
        .trials
        .iter()
        .find(|tr| tr.trial == t.elite[0].trial)
        .unwrap()
        .clone();
    proposed.trial = 998;
    proposed.source = "0123456789abcdef".into();
    proposed.p50_us = Some(1e6); // slower than the elite: it stays out of it

    let mut other = t.clone();
    other.trials.push(proposed);
    check_tune("proposed", &other, gates.as_ref(), &mut problems);
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
        problems
            .iter()
            .any(|p| p.contains("same config and source as trial"))
            && problems
                .iter()
                .any(|p| p.contains("failed in another trial")),
        "{problems:?}"
    );
}
