//! SIGKILL `repro` at random moments of a run, then run again: every output must end up
//! the complete new version, and at no point may the lock record as passed an output that
//! is not one complete version (old or new) — a mix of two runs, or a half-written file.
//!
//! Three `cmd` stages write 4 MB each in four appends with pauses (`c` from a background
//! subshell, which outlives a killed `repro` unless the next run kills it); `b` needs `a`;
//! two run at once (`-j 2`). `REPRO_KILL_ITERATIONS` (default 6) kills, `REPRO_KILL_SEED`
//! fixes the moments (printed on every run).

use crate::project;
use project::{send_signal, Project};
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

const PIPELINE: &str = r#"version: 1
stages:
  a:
    uses: cmd
    run: [sh, -c, 'for i in 1 2 3 4; do yes "$(cat v) a $i" | head -c 1000000 >> out/a; sleep 0.25; done']
    deps: [v]
    outs: [out/a]
  b:
    uses: cmd
    needs: [a]
    run: [sh, -c, 'for i in 1 2 3 4; do yes "$(cat v) b $i" | head -c 1000000 >> out/b; sleep 0.25; done']
    deps: [v, out/a]
    outs: [out/b]
  c:
    uses: cmd
    run: [sh, -c, '( for i in 1 2 3 4; do yes "$(cat v) c $i" | head -c 1000000 >> out/c; sleep 0.25; done ) & wait']
    deps: [v]
    outs: [out/c]
"#;

const STAGES: [&str; 3] = ["a", "b", "c"];

/// What stage `label` writes for version `v`.
fn expected(v: u32, label: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4_000_000);
    for i in 1..=4 {
        let line = format!("{v} {label} {i}\n");
        out.extend(line.bytes().cycle().take(1_000_000));
    }
    out
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Output path → digest, as the lock records them.
fn locked_outputs(p: &Project) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(p.root().join("artifacts/repro.lock")) else {
        return BTreeMap::new();
    };
    let lock: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let mut out = BTreeMap::new();
    for stage in STAGES {
        if let Some(outputs) = lock["stages"][stage]["outputs"].as_mapping() {
            for (path, digest) in outputs {
                out.insert(
                    path.as_str().unwrap().to_string(),
                    digest.as_str().unwrap().to_string(),
                );
            }
        }
    }
    out
}

/// Every output whose bytes match the lock's digest is one complete version (`old` or
/// `new`); says how many matched.
fn check_recorded_outputs_are_complete(p: &Project, old: u32, new: u32, when: &str) -> usize {
    let mut matched = 0;
    for (path, digest) in locked_outputs(p) {
        let Ok(bytes) = std::fs::read(p.root().join(&path)) else {
            continue;
        };
        if sha256(&bytes) != digest {
            continue; // not recorded as it is: the next run redoes it
        }
        let label = path.trim_start_matches("out/");
        assert!(
            bytes == expected(old, label) || bytes == expected(new, label),
            "{when}: {path} matches the lock but is not a complete version {old} or {new} ({} bytes)",
            bytes.len()
        );
        matched += 1;
    }
    matched
}

#[test]
fn sigkill_at_random_moments_never_leaves_a_mixed_output_recorded_as_passed() {
    let iterations: u32 = std::env::var("REPRO_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("REPRO_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    println!("REPRO_KILL_SEED={seed} REPRO_KILL_ITERATIONS={iterations}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let p = Project::new(PIPELINE);
    p.write("v", "0");
    p.expect(&["run", "-j", "2"], 0);
    for v in 1..=iterations {
        p.write("v", &v.to_string());
        let killed = p.spawn(&["run", "-j", "2"]);
        let after = Duration::from_millis(rng.random_range(0..2500));
        std::thread::sleep(after);
        send_signal(killed.id(), 9);
        killed.wait_with_output().unwrap();
        let when = format!("version {v}, killed after {after:?} (seed {seed})");
        check_recorded_outputs_are_complete(&p, v - 1, v, &when);
        p.expect(&["run", "-j", "2"], 0);
        // Time for anything left of the killed run to write, were it still alive.
        std::thread::sleep(Duration::from_millis(300));
        for label in STAGES {
            let bytes = std::fs::read(p.root().join("out").join(label)).unwrap();
            assert!(
                bytes == expected(v, label),
                "{when}: after the rerun out/{label} is not version {v} ({} bytes)",
                bytes.len()
            );
        }
        assert_eq!(
            check_recorded_outputs_are_complete(&p, v, v, &when),
            STAGES.len(),
            "{when}: the lock does not record every output as it is"
        );
        assert!(
            p.states().values().all(|s| s == "up-to-date"),
            "{when}: {:?}",
            p.states()
        );
    }
}
