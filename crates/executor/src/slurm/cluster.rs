//! Slurm's client tools and the questions repro asks the controller: which partitions
//! exist, how many GPUs one has, whether a job is still queued, why a job ended, and
//! `scancel`.

use super::report;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

/// Why the Slurm executor cannot be used; each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error(
        "Slurm's client tools are not on PATH (missing: {}): install slurm-client or use --executor local",
        .missing.join(", ")
    )]
    ToolsMissing { missing: Vec<&'static str> },
    #[error(
        "cannot reach the Slurm controller: {detail}\n  check that slurmctld is running (`scontrol ping`) and that this machine's slurm.conf names it, or use --executor local"
    )]
    ControllerUnreachable { detail: String },
    #[error(
        "Slurm partition '{name}' does not exist (partitions here: {available}); fix `partition:` under `executor:` in pipeline.yaml"
    )]
    NoSuchPartition { name: String, available: String },
    #[error("the Slurm cluster has no partitions: ask its administrator, or use --executor local")]
    NoPartitions,
    #[error("`{tool} {args}` failed: {detail}")]
    ToolFailed {
        tool: &'static str,
        args: String,
        detail: String,
    },
}

/// Paths of the client tools repro runs.
#[derive(Debug, Clone)]
pub struct SlurmTools {
    pub(super) srun: PathBuf,
    scancel: PathBuf,
    squeue: PathBuf,
    sinfo: PathBuf,
    scontrol: PathBuf,
}

impl SlurmTools {
    /// Finds every tool on PATH, or names the missing ones.
    pub fn find() -> Result<Self, SlurmError> {
        Self::find_in(std::env::var_os("PATH").unwrap_or_default())
    }

    /// Finds every tool in the directories of `path` (a PATH-style list).
    pub fn find_in(path: std::ffi::OsString) -> Result<Self, SlurmError> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut missing = Vec::new();
        let mut find = |name: &'static str| {
            which::which_in(name, Some(&path), &cwd).unwrap_or_else(|_| {
                missing.push(name);
                PathBuf::new()
            })
        };
        let tools = SlurmTools {
            srun: find("srun"),
            scancel: find("scancel"),
            squeue: find("squeue"),
            sinfo: find("sinfo"),
            scontrol: find("scontrol"),
        };
        if missing.is_empty() {
            Ok(tools)
        } else {
            Err(SlurmError::ToolsMissing { missing })
        }
    }

    /// Runs `sinfo` with these arguments and returns its stdout. A failure here almost
    /// always means the controller cannot be reached, so it says so.
    fn sinfo(&self, args: &[&str]) -> Result<String, SlurmError> {
        let out = Command::new(&self.sinfo).args(args).output().map_err(|e| {
            SlurmError::ControllerUnreachable {
                detail: format!("cannot run {}: {e}", self.sinfo.display()),
            }
        })?;
        if !out.status.success() {
            let detail = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(SlurmError::ControllerUnreachable { detail });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The partition jobs go to: `wanted` once checked to exist, else the cluster's
    /// default (marked `*` by sinfo).
    pub fn resolve_partition(&self, wanted: Option<&str>) -> Result<String, SlurmError> {
        let listing = self.sinfo(&["-h", "-o", "%P"])?;
        let partitions: Vec<&str> = listing.lines().map(str::trim).collect();
        match wanted {
            Some(name) => {
                if partitions.iter().any(|p| p.trim_end_matches('*') == name) {
                    Ok(name.to_string())
                } else {
                    Err(SlurmError::NoSuchPartition {
                        name: name.to_string(),
                        available: partitions.join(", "),
                    })
                }
            }
            None => partitions
                .iter()
                .find(|p| p.ends_with('*'))
                .or(partitions.first())
                .map(|p| p.trim_end_matches('*').to_string())
                .ok_or(SlurmError::NoPartitions),
        }
    }

    /// GPUs in the partition, of the model named in `gres` (`gpu:l4:1` → l4) if any.
    pub fn partition_gpus(&self, partition: &str, gres: Option<&str>) -> Result<u32, SlurmError> {
        let listing = self.sinfo(&["-h", "-N", "-p", partition, "-o", "%N|%G"])?;
        let gpu_type = gres.and_then(|g| match g.split(':').collect::<Vec<_>>().as_slice() {
            ["gpu", ty, _count] => Some(ty.to_string()),
            _ => None,
        });
        Ok(report::count_gpus(&listing, gpu_type.as_deref()))
    }

    /// Cancels the job `job_id` if known, and every job of ours named `name` (which
    /// covers one still waiting in the queue before its id was seen).
    pub fn scancel(&self, job_id: Option<u64>, name: &str) {
        let user = current_uid();
        let mut cmd = Command::new(&self.scancel);
        if let Some(id) = job_id {
            cmd.arg(id.to_string());
        } else {
            cmd.args([format!("--name={name}"), format!("--user={user}")]);
        }
        // scancel's own failures (the job already ended) are not errors here: the caller
        // checks the queue afterwards.
        let _ = cmd.output();
        if job_id.is_some() {
            let _ = Command::new(&self.scancel)
                .args([format!("--name={name}"), format!("--user={user}")])
                .output();
        }
    }

    /// Ids of our jobs named `name` still known to the queue (pending, running or
    /// completing).
    pub fn queued(&self, name: &str) -> Result<Vec<String>, SlurmError> {
        let args = [
            "-h".to_string(),
            format!("--user={}", current_uid()),
            format!("--name={name}"),
            "-o".to_string(),
            "%i".to_string(),
        ];
        let out = Command::new(&self.squeue)
            .args(&args)
            .output()
            .map_err(|e| SlurmError::ToolFailed {
                tool: "squeue",
                args: args.join(" "),
                detail: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(SlurmError::ToolFailed {
                tool: "squeue",
                args: args.join(" "),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }

    /// Waits until no job of ours named `name` is in the queue, cancelling again while
    /// some are. Errors with their ids if they outlive `limit`.
    pub fn drain(&self, job_id: Option<u64>, name: &str, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            let left = self.queued(name)?;
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "Slurm job(s) {} named '{name}' are still in the queue {}s after scancel; cancel them with `scancel {}`",
                    left.join(", "),
                    limit.as_secs(),
                    left.join(" ")
                );
            }
            self.scancel(job_id, name);
            thread::sleep(Duration::from_millis(500));
        }
    }

    /// Slurm's reason if the scheduler (not the program) ended job `id`.
    pub fn scheduler_end(&self, id: u64) -> Option<String> {
        let out = Command::new(&self.scontrol)
            .args(["show", "job", "-o", &id.to_string()])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(report::scheduler_end_from_scontrol)
    }
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_client_tools_are_named_with_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let err = SlurmTools::find_in(empty.path().into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Slurm's client tools are not on PATH (missing: srun, scancel, squeue, sinfo, scontrol): \
             install slurm-client or use --executor local"
        );
    }
}
