//! Cross-checks ptxas's figures (the build record of the measured architecture) with what
//! the CUDA driver reports for the loaded function (`repro exec --attributes`, run as a
//! child job so a driver fault stays contained). Only a GPU can say this, so it is the
//! bench stage's, recorded in its records; the build's records stay machine-independent.

use repro_executor::{CancelFlag, Executor, Job};
use repro_schema::{DriverCheck, EntryResources};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What `repro exec --attributes CUBIN ENTRY` prints for a kernel it read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DriverAttributes {
    pub registers: u32,
    pub static_smem_bytes: u64,
    pub local_bytes: u64,
    pub max_threads_per_block: u32,
}

/// One line of `repro exec --attributes`: the kernel's attributes, or why it did not load.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AttributesLine {
    Read(DriverAttributes),
    Failed { error: String },
}

/// A kernel to check: its cubin, and ptxas's figures for its entry.
pub struct Kernel<'a> {
    pub cubin: PathBuf,
    pub res: &'a EntryResources,
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// Load every kernel's cubin on GPU `gpu` in one child `repro exec --attributes` (one CUDA
/// context for all: opening one is most of a check's time), read each entry's attributes and
/// compare them with ptxas's: one check per kernel, in order. A kernel the driver cannot load
/// is `skipped` with the driver's reason; a child that ends without a line per kernel is an
/// `Err` (the caller records every check as `skipped`; the measurement does not fail for it).
pub fn cross_check(
    executor: &dyn Executor,
    cancel: &CancelFlag,
    repro_exe: &Path,
    root: &Path,
    gpu: u32,
    kernels: &[Kernel],
) -> anyhow::Result<Vec<DriverCheck>> {
    let mut argv = vec![repro_exe.to_string_lossy().into_owned(), "exec".into()];
    for k in kernels {
        argv.push("--attributes".into());
        argv.push(k.cubin.to_string_lossy().into_owned());
        argv.push(k.res.name.clone());
    }
    let mut job = Job::new("bench:attributes", argv, root);
    job.capture_stdout = true;
    job.timeout = Some(TIMEOUT);
    job.gpu = Some(gpu);
    let outcome = executor.run(&job, cancel)?;
    // A kernel's line starts with `{`; the driver or a library may print other lines.
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    let lines: Vec<AttributesLine> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            anyhow::anyhow!(
                "`repro exec --attributes` printed a line that is not the attributes JSON: {e}"
            )
        })?;
    anyhow::ensure!(
        lines.len() == kernels.len(),
        "`repro exec --attributes` ended ({:?}) with {} of {} kernels read: {}",
        outcome.exit,
        lines.len(),
        kernels.len(),
        outcome.tail.trim()
    );
    Ok(kernels
        .iter()
        .zip(lines)
        .map(|(k, line)| match line {
            AttributesLine::Read(attrs) => compare(k.res, &attrs),
            AttributesLine::Failed { error } => {
                skipped(&format!("the driver could not load it: {error}"))
            }
        })
        .collect())
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

    /// A stand-in for `repro` whose `exec --attributes` prints `stdout` and exits `code`.
    fn fake_repro(dir: &Path, stdout: &str, code: i32) -> PathBuf {
        let path = dir.join("repro");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n[ \"$1 $2\" = \"exec --attributes\" ] || exit 9\n\
                 echo 'CUDA_ERROR_INVALID_IMAGE' >&2\ncat <<'EOF'\n{stdout}\nEOF\nexit {code}\n"
            ),
        )
        .unwrap();
        make_executable(&path);
        path
    }

    fn entry(name: &str) -> EntryResources {
        EntryResources {
            name: name.into(),
            registers: Some(30),
            smem_bytes: Some(1024),
            ..EntryResources::default()
        }
    }

    fn check(stdout: &str, code: i32) -> (anyhow::Result<Vec<DriverCheck>>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_repro(dir.path(), stdout, code);
        let ex = CountingExecutor::default();
        let (a, b) = (entry("a"), entry("b"));
        let kernels = [
            Kernel {
                cubin: "a.cubin".into(),
                res: &a,
            },
            Kernel {
                cubin: "b.cubin".into(),
                res: &b,
            },
        ];
        let checks = cross_check(&ex, &CancelFlag::default(), &exe, dir.path(), 0, &kernels);
        let argv = ex.jobs.lock().unwrap()[0][1..].to_vec();
        (checks, argv)
    }

    #[test]
    fn one_child_reads_every_kernel_in_order() {
        let (checks, argv) = check(
            "noise\n{\"registers\":32,\"static_smem_bytes\":1024,\"local_bytes\":0,\"max_threads_per_block\":1024}\n\
             {\"registers\":30,\"static_smem_bytes\":1024,\"local_bytes\":0,\"max_threads_per_block\":1024}",
            0,
        );
        assert_eq!(
            argv,
            [
                "exec",
                "--attributes",
                "a.cubin",
                "a",
                "--attributes",
                "b.cubin",
                "b"
            ]
        );
        let checks = checks.unwrap();
        assert_eq!(
            checks[0].check,
            "mismatch: a (registers: ptxas 30 vs driver 32)"
        );
        assert_eq!(checks[0].registers, Some(32));
        assert_eq!(checks[1].check, "ok");
    }

    #[test]
    fn a_kernel_that_does_not_load_is_skipped_alone() {
        let (checks, _) = check(
            "{\"entry\":\"a\",\"error\":\"CUDA_ERROR_INVALID_IMAGE\"}\n\
             {\"registers\":30,\"static_smem_bytes\":1024,\"local_bytes\":0,\"max_threads_per_block\":1024}",
            1,
        );
        let checks = checks.unwrap();
        assert_eq!(
            checks[0].check,
            "skipped: the driver could not load it: CUDA_ERROR_INVALID_IMAGE"
        );
        assert_eq!(checks[1].check, "ok");
    }

    #[test]
    fn a_child_that_fails_before_every_line_is_an_error_with_its_output() {
        let (checks, _) = check("", 1);
        let err = checks.unwrap_err().to_string();
        assert!(
            err.contains("0 of 2 kernels") && err.contains("CUDA_ERROR_INVALID_IMAGE"),
            "{err}"
        );
    }
}
