//! Cross-checks ptxas's figures (the build record of the measured architecture) with what
//! the CUDA driver reports for the loaded function (`repro exec --attributes`, run as a
//! child job so a driver fault stays contained). Only a GPU can say this, so it is the
//! bench stage's, recorded in its records; the build's records stay machine-independent.

use repro_executor::{CancelFlag, Executor, Job};
use repro_schema::{DriverCheck, EntryResources};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// What `repro exec --attributes --cubin P --entry E` prints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DriverAttributes {
    pub registers: u32,
    pub static_smem_bytes: u64,
    pub local_bytes: u64,
    pub max_threads_per_block: u32,
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// Load `cubin` on GPU `gpu`, read the attributes of the entry `res` (ptxas's figures for
/// it) and compare: `ok` or
/// `mismatch: ...`. A failure to load is an `Err` with the reason (the caller records it as
/// `skipped`; the measurement itself does not fail for it).
pub fn cross_check(
    executor: &dyn Executor,
    cancel: &CancelFlag,
    repro_exe: &Path,
    root: &Path,
    gpu: u32,
    cubin: &Path,
    res: &EntryResources,
) -> anyhow::Result<DriverCheck> {
    let argv = vec![
        repro_exe.to_string_lossy().into_owned(),
        "exec".into(),
        "--attributes".into(),
        "--cubin".into(),
        cubin.to_string_lossy().into_owned(),
        "--entry".into(),
        res.name.clone(),
    ];
    let mut job = Job::new(format!("bench:attributes:{}", res.name), argv, root);
    job.capture_stdout = true;
    job.timeout = Some(TIMEOUT);
    job.gpu = Some(gpu);
    let outcome = executor.run(&job, cancel)?;
    anyhow::ensure!(
        outcome.success(),
        "`repro exec --attributes` failed ({:?}): {}",
        outcome.exit,
        outcome.tail.trim()
    );
    let line = outcome.last_stdout_line().unwrap_or_default();
    let attrs: DriverAttributes = serde_json::from_str(&line).map_err(|e| {
        anyhow::anyhow!("`repro exec --attributes` printed `{line}`, not the attributes JSON: {e}")
    })?;
    Ok(compare(res, &attrs))
}

/// The driver's figures, and whether they agree with ptxas's (`res`).
pub fn compare(res: &EntryResources, attrs: &DriverAttributes) -> DriverCheck {
    let mut diffs = Vec::new();
    if res.registers != Some(attrs.registers) {
        diffs.push(format!(
            "registers: ptxas {} vs driver {}",
            show(res.registers.map(u64::from)),
            attrs.registers
        ));
    }
    // ptxas omits `smem` when it is zero.
    if res.smem_bytes.unwrap_or(0) != attrs.static_smem_bytes {
        diffs.push(format!(
            "static smem bytes: ptxas {} vs driver {}",
            show(res.smem_bytes),
            attrs.static_smem_bytes
        ));
    }
    DriverCheck {
        check: if diffs.is_empty() {
            "ok".into()
        } else {
            format!("mismatch: {} ({})", res.name, diffs.join("; "))
        },
        registers: Some(attrs.registers),
        static_smem_bytes: Some(attrs.static_smem_bytes),
    }
}

/// The record of a check that could not run, and why.
pub fn skipped(why: &str) -> DriverCheck {
    DriverCheck {
        check: format!("skipped: {why}"),
        registers: None,
        static_smem_bytes: None,
    }
}

fn show(v: Option<u64>) -> String {
    v.map_or("?".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(registers: u32, smem: u64) -> DriverAttributes {
        DriverAttributes {
            registers,
            static_smem_bytes: smem,
            local_bytes: 0,
            max_threads_per_block: 1024,
        }
    }

    #[test]
    fn agreement_is_ok_with_the_driver_figures() {
        let e = EntryResources {
            name: "k".into(),
            registers: Some(30),
            smem_bytes: None,
            ..EntryResources::default()
        };
        let check = compare(&e, &attrs(30, 0));
        assert_eq!(check.check, "ok");
        assert_eq!(check.registers, Some(30));
        assert_eq!(check.static_smem_bytes, Some(0));
    }

    #[test]
    fn disagreement_names_both_figures() {
        let e = EntryResources {
            name: "k".into(),
            registers: Some(30),
            smem_bytes: Some(1024),
            ..EntryResources::default()
        };
        let check = compare(&e, &attrs(32, 1024));
        assert_eq!(
            check.check,
            "mismatch: k (registers: ptxas 30 vs driver 32)"
        );
        assert_eq!(check.registers, Some(32));
    }

    #[test]
    fn attributes_json_parses() {
        let a: DriverAttributes = serde_json::from_str(
            r#"{"registers":30,"static_smem_bytes":1024,"local_bytes":128,"max_threads_per_block":1024}"#,
        )
        .unwrap();
        assert_eq!(
            a,
            DriverAttributes {
                local_bytes: 128,
                ..attrs(30, 1024)
            }
        );
    }
}

#[cfg(test)]
mod job_tests {
    use super::*;
    use repro_pipeline::test_support::{make_executable, CountingExecutor};

    /// A stand-in for `repro` whose `exec --attributes` prints `json` (or fails on `fail`).
    fn fake_repro(dir: &Path, json: &str) -> std::path::PathBuf {
        let path = dir.join("repro");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1 $2\" = \"exec --attributes\" ] || exit 9\n\
                 [ \"{json}\" = fail ] && {{ echo 'CUDA_ERROR_INVALID_IMAGE' >&2; exit 1; }}\n\
                 echo 'noise'\necho '{json}'\n"
            ),
        )
        .unwrap();
        make_executable(&path);
        path
    }

    fn entry() -> EntryResources {
        EntryResources {
            name: "k".into(),
            registers: Some(30),
            smem_bytes: Some(1024),
            ..EntryResources::default()
        }
    }

    #[test]
    fn reads_the_attributes_line_from_a_child_job() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_repro(
            dir.path(),
            r#"{"registers":32,"static_smem_bytes":1024,"local_bytes":0,"max_threads_per_block":1024}"#,
        );
        let ex = CountingExecutor::default();
        let check = cross_check(
            &ex,
            &CancelFlag::default(),
            &exe,
            dir.path(),
            0,
            Path::new("x.cubin"),
            &entry(),
        )
        .unwrap();
        assert_eq!(
            check.check,
            "mismatch: k (registers: ptxas 30 vs driver 32)"
        );
        assert_eq!(check.registers, Some(32));
        let argv = &ex.jobs.lock().unwrap()[0];
        assert_eq!(
            argv[1..],
            ["exec", "--attributes", "--cubin", "x.cubin", "--entry", "k"]
        );
    }

    #[test]
    fn a_failing_child_is_an_error_with_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_repro(dir.path(), "fail");
        let err = cross_check(
            &CountingExecutor::default(),
            &CancelFlag::default(),
            &exe,
            dir.path(),
            0,
            Path::new("x.cubin"),
            &entry(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("CUDA_ERROR_INVALID_IMAGE"), "{err}");
    }
}
