//! How a test that cannot run here says so. libtest hides what a passing test prints with
//! `eprintln!`, so this writes to stderr directly and the line reaches the test log (CI's
//! too): a skipped test never passes silently.
//!
//! Each skip is also appended to [`log_path`], which the last test target cargo runs
//! (`tests/zz_skip_summary.rs`) sums up in one line. `REPRO_REQUIRE=nvcc,slurm` (CI sets
//! it) turns a skip for one of the named needs into a failure.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// What a skipped test lacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Gpu,
    Nvcc,
    Slurm,
    /// PyPI, to install a toolchain for real.
    Network,
    /// Something no switch provides (e.g. a test of the no-driver path on a machine with
    /// a driver).
    Other,
}

impl Need {
    pub const ALL: [Need; 5] = [
        Need::Gpu,
        Need::Nvcc,
        Need::Slurm,
        Need::Network,
        Need::Other,
    ];

    /// The name `REPRO_REQUIRE` and the skip log use.
    pub fn name(self) -> &'static str {
        match self {
            Need::Gpu => "gpu",
            Need::Nvcc => "nvcc",
            Need::Slurm => "slurm",
            Need::Network => "network",
            Need::Other => "other",
        }
    }

    /// How the summary line counts `n` tests that lacked it: what they need, and what
    /// runs them.
    pub fn counted(self, n: usize) -> String {
        let need = if n == 1 { "needs" } else { "need" };
        match self {
            Need::Gpu => format!("{n} {need} a GPU: REPRO_GPU_TESTS=1 on a machine with one"),
            Need::Nvcc => format!("{n} {need} nvcc: `repro toolchain install`"),
            Need::Slurm => {
                format!("{n} {need} Slurm: REPRO_SLURM_TESTS=1 after `bash ci/slurm/setup.sh`")
            }
            Need::Network => format!("{n} {need} PyPI: REPRO_TOOLCHAIN_INSTALL_TESTS=1"),
            Need::Other => format!("{n} cannot run on this machine: see their `skipped:` lines"),
        }
    }
}

/// Skipped for a reason no switch changes.
pub fn say_skipped(why: &str) {
    skipped(Need::Other, why);
}

/// Say that the calling test is skipped for lack of `need`, and log it for the summary.
/// Panics instead when `REPRO_REQUIRE` names `need`.
pub fn skipped(need: Need, why: &str) {
    let required =
        std::env::var("REPRO_REQUIRE").is_ok_and(|v| v.split(',').any(|n| n.trim() == need.name()));
    assert!(
        !required,
        "REPRO_REQUIRE names `{}`, so this test may not be skipped: {why}",
        need.name()
    );
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
    if let Some(path) = log_path() {
        // One line per skip: the process that ran this test binary (cargo), so that a
        // summary counts its own run only; the need; the reason.
        let line = format!(
            "{}\t{}\t{}\n",
            std::os::unix::process::parent_id(),
            need.name(),
            why.replace(['\t', '\n'], " ")
        );
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// `target/<profile>/repro-test-skips.log`: beside the `deps/` folder every test binary
/// runs from.
pub fn log_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join("repro-test-skips.log"))
}
