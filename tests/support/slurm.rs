//! Shared by the tests that need a Slurm cluster (`ci/slurm/setup.sh` starts one).
// Each test binary includes this file and uses a part of it.
#![allow(dead_code)]

use std::process::Command;

#[path = "skip.rs"]
mod skip;

/// True when REPRO_SLURM_TESTS=1; otherwise prints why the test is skipped. With the
/// variable set, a cluster that is not up makes the tests fail, never skip.
pub fn enabled() -> bool {
    if std::env::var("REPRO_SLURM_TESTS").as_deref() == Ok("1") {
        return true;
    }
    skip::skipped(
        skip::Need::Slurm,
        "set REPRO_SLURM_TESTS=1 (ci/slurm/setup.sh starts a one-node cluster)",
    );
    false
}

/// `<id> <state>` lines of jobs named `name` in Slurm's queue ("" when none).
pub fn queued(name: &str) -> String {
    let out = Command::new("squeue")
        .args(["-h", "-n", name, "-o", "%i %T"])
        .output()
        .expect("squeue runs");
    assert!(
        out.status.success(),
        "squeue failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits (up to a minute) until no job named `name` is in the queue: a job Slurm itself
/// ended may stay COMPLETING a few seconds after srun returns.
pub fn wait_until_gone(name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let left = queued(name);
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still in Slurm's queue after a minute: {left}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Where slurmctld appends finished jobs (`JobCompLoc`).
pub fn job_records() -> String {
    let out = std::process::Command::new("scontrol")
        .args(["show", "config"])
        .output()
        .expect("scontrol runs");
    let config = String::from_utf8_lossy(&out.stdout);
    let path = config
        .lines()
        .find_map(|l| l.strip_prefix("JobCompLoc"))
        .and_then(|l| l.split('=').nth(1))
        .map(str::trim)
        .expect("JobCompLoc in scontrol show config")
        .to_string();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
