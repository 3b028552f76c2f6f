//! Reading what Slurm says about a job step: the marker line our wrapper prints when the
//! step starts, srun's own messages (job id, task exit), slurmstepd's cancellation banner
//! (`*** STEP 12.0 ON node1 CANCELLED AT ... DUE TO TIME LIMIT ***`) and
//! `scontrol show job -o` records. Pure text in, facts out.

/// The first line the wrapper prints on stderr once the step runs on a node.
pub const STARTED_MARKER: &str = "REPRO_SLURM_STEP";

/// Where the step started: the Slurm node name and the job id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub node: String,
    pub job_id: Option<u64>,
}

/// Parses the wrapper's marker: `REPRO_SLURM_STEP node=<node> job=<id>`.
pub fn parse_started(line: &str) -> Option<Started> {
    let rest = line
        .trim_end()
        .strip_prefix(STARTED_MARKER)?
        .strip_prefix(' ')?;
    let mut node = None;
    let mut job_id = None;
    for field in rest.split(' ') {
        if let Some(v) = field.strip_prefix("node=") {
            node = Some(v.to_string()).filter(|v| !v.is_empty());
        } else if let Some(v) = field.strip_prefix("job=") {
            job_id = v.parse().ok();
        }
    }
    Some(Started {
        node: node?,
        job_id,
    })
}

/// The job id in srun's queueing messages: `srun: job 12 queued and waiting for
/// resources`, `srun: job 12 has been allocated resources`.
pub fn parse_srun_job_id(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("srun: job ")?;
    let (id, tail) = rest.split_once(' ')?;
    if tail.starts_with("queued") || tail.starts_with("has been allocated") {
        id.parse().ok()
    } else {
        None
    }
}

/// slurmstepd's banner when Slurm (not the program) ended a step or job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    /// `STEP 12.0` or `JOB 12`.
    pub what: String,
    pub node: String,
    pub at: String,
    /// `TIME LIMIT`, `NODE FAILURE`, `PREEMPTION`, ... (None: a plain scancel).
    pub due_to: Option<String>,
}

impl Cancelled {
    /// Slurm's job-state name for the reason: `TIMEOUT`, `NODE_FAIL`, `PREEMPTED`, ...
    pub fn state(&self) -> String {
        match self.due_to.as_deref() {
            Some("TIME LIMIT") => "TIMEOUT".into(),
            Some("NODE FAILURE") => "NODE_FAIL".into(),
            Some("PREEMPTION") => "PREEMPTED".into(),
            Some("JOB REQUEUE") => "REQUEUED".into(),
            Some(other) => other.replace(' ', "_"),
            None => "CANCELLED".into(),
        }
    }

    /// The reason recorded in `ExitKind::Scheduler`, e.g.
    /// `TIMEOUT: Slurm cancelled STEP 12.0 on node1 at 2026-11-22T03:17:44 due to time limit`.
    pub fn describe(&self) -> String {
        let due = match &self.due_to {
            Some(d) => format!(" due to {}", d.to_lowercase()),
            None => String::new(),
        };
        format!(
            "{}: Slurm cancelled {} on {} at {}{}",
            self.state(),
            self.what,
            self.node,
            self.at,
            due
        )
    }
}

/// Parses `... *** STEP 12.0 ON node1 CANCELLED AT 2026-11-22T03:17:44 DUE TO TIME LIMIT ***`
/// (the prefix, `slurmstepd: error:` or `slurmstepd-node1: error:`, varies).
pub fn parse_cancelled(line: &str) -> Option<Cancelled> {
    let start = line.find("*** ")?;
    let body = line[start + 4..].trim_end().strip_suffix("***")?.trim_end();
    let (kind, rest) = body.split_once(' ')?;
    if kind != "STEP" && kind != "JOB" {
        return None;
    }
    let (id, rest) = rest.split_once(" ON ")?;
    let (node, rest) = rest.split_once(" CANCELLED AT ")?;
    let (at, due_to) = match rest.split_once(" DUE TO ") {
        Some((at, due)) => (at, Some(due.trim().to_string())),
        None => (rest.split(' ').next().unwrap_or(rest), None),
    };
    Some(Cancelled {
        what: format!("{kind} {id}"),
        node: node.to_string(),
        at: at.trim().to_string(),
        due_to,
    })
}

/// srun's summary of how task 0 ended: `srun: error: node1: task 0: Exited with exit code 3`
/// → `Some(TaskEnd::Exited(3))`; `... task 0: Segmentation fault` → `Some(TaskEnd::Signalled)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEnd {
    Exited(i32),
    Signalled,
}

pub fn parse_task_end(line: &str) -> Option<TaskEnd> {
    let rest = line.trim().strip_prefix("srun: error: ")?;
    let (_, what) = rest.split_once(": task ")?;
    let (_, what) = what.split_once(": ")?;
    match what.strip_prefix("Exited with exit code ") {
        Some(code) => code.trim().parse().ok().map(TaskEnd::Exited),
        None => Some(TaskEnd::Signalled),
    }
}

/// srun's complaint when it could not get an allocation at all, e.g.
/// `srun: error: Unable to allocate resources: Invalid partition name specified`.
pub fn parse_allocation_error(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("srun: error: Unable to allocate resources: ")
        .or_else(|| {
            line.trim()
                .strip_prefix("srun: error: Unable to create step for job ")
        })
}

/// Job states in which Slurm, not the program, ended the job.
const SCHEDULER_END_STATES: &[&str] = &[
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "CANCELLED",
];

/// From one `scontrol show job -o <id>` line: Slurm's reason if the scheduler ended the
/// job (`TIMEOUT (Slurm job 12, reason TimeLimit)`), None if it ended on its own.
pub fn scheduler_end_from_scontrol(line: &str) -> Option<String> {
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    let state = field("JobState")?;
    let reason = field("Reason").unwrap_or_else(|| "None".into());
    let id = field("JobId").unwrap_or_default();
    let state = if state == "COMPLETING" && reason == "TimeLimit" {
        "TIMEOUT".to_string()
    } else {
        state
    };
    SCHEDULER_END_STATES
        .contains(&state.as_str())
        .then(|| format!("{state} (Slurm job {id}, reason {reason})"))
}

/// Total GPUs in `sinfo -h -N -o '%N|%G'` output (one `node|gres` line per node),
/// counting each node once; `want_type` (`l4` from `gpu:l4:1`) restricts to that model.
pub fn count_gpus(sinfo: &str, want_type: Option<&str>) -> u32 {
    let mut seen = std::collections::BTreeSet::new();
    let mut total = 0;
    for line in sinfo.lines() {
        let Some((node, gres)) = line.trim().split_once('|') else {
            continue;
        };
        if !seen.insert(node.to_string()) {
            continue;
        }
        for entry in gres.split(',') {
            // `gpu:2`, `gpu:l4:4(S:0-1)`, `(null)`.
            let entry = entry.split('(').next().unwrap_or("");
            let parts: Vec<&str> = entry.split(':').collect();
            if parts.first() != Some(&"gpu") {
                continue;
            }
            let (gpu_type, count) = match parts.as_slice() {
                [_, count] => (None, count),
                [_, ty, count] => (Some(*ty), count),
                _ => continue,
            };
            if want_type.is_some() && gpu_type != want_type {
                continue;
            }
            total += count.parse::<u32>().unwrap_or(0);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_marker() {
        assert_eq!(
            parse_started("REPRO_SLURM_STEP node=vm job=12\n"),
            Some(Started {
                node: "vm".into(),
                job_id: Some(12)
            })
        );
        assert_eq!(
            parse_started("REPRO_SLURM_STEP node=gpu-3 job="),
            Some(Started {
                node: "gpu-3".into(),
                job_id: None
            })
        );
        assert_eq!(parse_started("REPRO_SLURM_STEPX node=vm"), None);
        assert_eq!(parse_started("REPRO_SLURM_STEP job=3"), None);
        assert_eq!(parse_started("some output"), None);
    }

    #[test]
    fn srun_job_id() {
        assert_eq!(
            parse_srun_job_id("srun: job 12 queued and waiting for resources"),
            Some(12)
        );
        assert_eq!(
            parse_srun_job_id("srun: job 7 has been allocated resources"),
            Some(7)
        );
        assert_eq!(parse_srun_job_id("srun: job step aborted"), None);
    }

    #[test]
    fn time_limit_banner() {
        let c = parse_cancelled(
            "slurmstepd-vm: error: *** STEP 9.0 ON vm CANCELLED AT 2026-11-22T03:17:44 DUE TO TIME LIMIT ***",
        )
        .unwrap();
        assert_eq!(c.state(), "TIMEOUT");
        assert_eq!(
            c.describe(),
            "TIMEOUT: Slurm cancelled STEP 9.0 on vm at 2026-11-22T03:17:44 due to time limit"
        );
    }

    #[test]
    fn node_failure_and_plain_cancel_banners() {
        let c = parse_cancelled(
            "slurmstepd: error: *** JOB 44 ON n3 CANCELLED AT 2026-01-01T00:00:00 DUE TO NODE FAILURE ***",
        )
        .unwrap();
        assert_eq!(c.state(), "NODE_FAIL");
        assert_eq!(c.what, "JOB 44");
        let c = parse_cancelled(
            "slurmstepd: error: *** STEP 5.0 ON n1 CANCELLED AT 2026-01-01T00:00:00 ***",
        )
        .unwrap();
        assert_eq!(c.state(), "CANCELLED");
        assert_eq!(c.due_to, None);
        assert_eq!(parse_cancelled("*** not a banner ***"), None);
        assert_eq!(parse_cancelled("plain output"), None);
    }

    #[test]
    fn task_end_lines() {
        assert_eq!(
            parse_task_end("srun: error: vm: task 0: Exited with exit code 3"),
            Some(TaskEnd::Exited(3))
        );
        assert_eq!(
            parse_task_end("srun: error: vm: task 0: Segmentation fault"),
            Some(TaskEnd::Signalled)
        );
        assert_eq!(
            parse_task_end("srun: error: Unable to allocate resources: x"),
            None
        );
    }

    #[test]
    fn allocation_errors() {
        assert_eq!(
            parse_allocation_error(
                "srun: error: Unable to allocate resources: Invalid partition name specified"
            ),
            Some("Invalid partition name specified")
        );
        assert_eq!(
            parse_allocation_error("srun: error: vm: task 0: Terminated"),
            None
        );
    }

    #[test]
    fn scontrol_states() {
        let line =
            "JobId=9 JobName=t UserId=root(0) JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15";
        assert_eq!(
            scheduler_end_from_scontrol(line).as_deref(),
            Some("TIMEOUT (Slurm job 9, reason TimeLimit)")
        );
        let completing = "JobId=9 JobState=COMPLETING Reason=TimeLimit";
        assert_eq!(
            scheduler_end_from_scontrol(completing).as_deref(),
            Some("TIMEOUT (Slurm job 9, reason TimeLimit)")
        );
        assert_eq!(
            scheduler_end_from_scontrol("JobId=3 JobState=FAILED Reason=NonZeroExitCode"),
            None
        );
        assert_eq!(
            scheduler_end_from_scontrol("JobId=3 JobState=COMPLETED Reason=None"),
            None
        );
    }

    #[test]
    fn gpu_counts() {
        let sinfo = "vm|gpu:2\nvm|gpu:2\nn2|gpu:l4:4(S:0-1),nic:1\nn3|(null)\nn4|gpu:h100:8\n";
        assert_eq!(count_gpus(sinfo, None), 14);
        assert_eq!(count_gpus(sinfo, Some("l4")), 4);
        assert_eq!(count_gpus(sinfo, Some("a100")), 0);
        assert_eq!(count_gpus("", None), 0);
    }
}
