//! Test helpers: a plain local executor that counts the jobs it runs, and a fake nvcc.

use repro_executor::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Runs each job as a local child process and remembers its argv.
#[derive(Default)]
pub struct CountingExecutor {
    pub jobs: Mutex<Vec<Vec<String>>>,
}

impl CountingExecutor {
    pub fn count(&self) -> usize {
        self.jobs.lock().unwrap().len()
    }
}

impl Executor for CountingExecutor {
    fn name(&self) -> &str {
        "test-local"
    }

    fn run(&self, job: &Job, _cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        self.jobs.lock().unwrap().push(job.argv.clone());
        let start = Instant::now();
        let out = std::process::Command::new(&job.argv[0])
            .args(&job.argv[1..])
            .current_dir(&job.cwd)
            .envs(&job.env)
            .output()?;
        let mut combined = out.stdout.clone();
        combined.extend_from_slice(&out.stderr);
        if let Some(log) = &job.log {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)?
                .write_all(&combined)?;
        }
        let exit = match (out.status.code(), out.status.signal()) {
            (Some(c), _) => ExitKind::Code(c),
            (None, Some(s)) => ExitKind::Signal(s),
            (None, None) => ExitKind::Code(-1),
        };
        Ok(JobOutcome {
            exit,
            stdout: if job.capture_stdout {
                out.stdout
            } else {
                Vec::new()
            },
            tail: String::from_utf8_lossy(&combined).into_owned(),
            node: None,
            elapsed: start.elapsed(),
        })
    }

    fn gpu_slots(&self) -> u32 {
        0
    }
}

/// Write an executable `nvcc` shell script into `dir`: `--version` prints a release line;
/// a compile writes a small cubin to `-o`, prints a one-entry ptxas report for entry `k`
/// (`REGS` define: the register count), and fails when a define `BREAK` is given.
pub fn fake_nvcc(dir: &Path) -> PathBuf {
    fake_nvcc_version(dir, "99.9.1")
}

/// [`fake_nvcc`] reporting version `version` (`13.0.88`).
pub fn fake_nvcc_version(dir: &Path, version: &str) -> PathBuf {
    let path = dir.join("nvcc");
    let release = version.rsplit_once('.').map_or(version, |(r, _)| r);
    let version_line = format!("Cuda compilation tools, release {release}, V{version}");
    std::fs::write(
        &path,
        r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "VERSION_LINE"; exit 0; fi
out=""; prev=""; regs=10
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  case "$a" in -DBREAK*) echo "k.cu(1): error: broken on purpose" >&2; exit 2;; -DREGS=*) regs="${a#-DREGS=}";; esac
  prev="$a"
done
printf 'cubin %s' "$*" > "$out"
echo "ptxas info    : Compiling entry function 'k' for 'sm_90'" >&2
echo "ptxas info    : Function properties for k" >&2
echo "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" >&2
echo "ptxas info    : Used $regs registers, used 0 barriers" >&2
"#
        .replace("VERSION_LINE", &version_line),
    )
    .unwrap();
    make_executable(&path);
    path
}

/// `chmod 755`.
pub fn make_executable(path: &Path) {
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).unwrap();
}

/// A real nvcc, found as `repro` finds one (PATH, CUDA_HOME, ..., repro's toolchain
/// cache), or `None` after saying that the calling test is skipped.
pub fn real_nvcc(test: &str) -> Option<crate::toolchain::Toolchain> {
    let probe_root = tempfile::tempdir().unwrap();
    match crate::toolchain::find(probe_root.path(), None) {
        Ok(tc) => Some(tc),
        Err(_) => {
            crate::test_skip::skipped(
                crate::test_skip::Need::Nvcc,
                &format!("{test} needs nvcc; none found"),
            );
            None
        }
    }
}
