//! The Slurm executor against a real cluster (`ci/slurm/setup.sh` starts a one-node one).
//! Runs only with REPRO_SLURM_TESTS=1, and then fails if the cluster is not up.

use repro::executor::slurm::{SlurmError, SlurmExecutor, SlurmSettings};
use repro::executor::{CancelFlag, Executor, ExitKind, Job};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[path = "support/slurm.rs"]
mod support;
use support::{enabled, queued, wait_until_gone};

fn executor(settings: SlurmSettings) -> SlurmExecutor {
    SlurmExecutor::new(settings).unwrap_or_else(|e| {
        panic!("REPRO_SLURM_TESTS=1 but the Slurm cluster is not usable: {e}\nrun `bash ci/slurm/setup.sh`")
    })
}

fn debug() -> SlurmSettings {
    SlurmSettings {
        partition: Some("debug".into()),
        time: Some("5".into()),
        ..SlurmSettings::default()
    }
}

/// A job name no other test (or concurrent test run) uses.
fn unique(name: &str) -> String {
    format!("repro-test-{name}-{}", std::process::id())
}

fn sh(name: &str, script: &str, cwd: &std::path::Path) -> Job {
    Job::new(
        unique(name),
        vec!["sh".into(), "-c".into(), script.into()],
        cwd,
    )
}

fn never() -> CancelFlag {
    Arc::new(AtomicBool::new(false))
}

fn slurm_nodes() -> Vec<String> {
    let out = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N"])
        .output()
        .expect("sinfo runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A cancel flag that a thread sets once the job `name` is in Slurm's queue in `state`
/// (`PENDING`, `RUNNING`), as Ctrl-C would.
fn cancel_once(name: &str, state: &'static str) -> (CancelFlag, thread::JoinHandle<()>) {
    let cancel = never();
    let flag = cancel.clone();
    let name = name.to_string();
    let setter = thread::spawn(move || {
        for _ in 0..600 {
            if queued(&name).contains(state) {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        flag.store(true, Ordering::SeqCst);
    });
    (cancel, setter)
}

#[test]
fn exit_code_output_log_and_node_come_back() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut job = sh(
        "exit",
        "echo to-stdout; echo to-stderr >&2; exit 3",
        dir.path(),
    );
    job.log = Some(dir.path().join("logs/job.log"));
    let out = executor(debug()).run(&job, &never()).unwrap();
    assert_eq!(out.exit, ExitKind::Code(3), "tail:\n{}", out.tail);
    assert!(out.stdout.is_empty(), "stdout is only kept when asked");
    let log = std::fs::read_to_string(dir.path().join("logs/job.log")).unwrap();
    assert!(log.contains("to-stdout\n"), "log: {log}");
    assert!(log.contains("to-stderr\n"), "log: {log}");
    assert!(
        !log.contains("REPRO_SLURM_STEP"),
        "the start marker stays out of the log: {log}"
    );
    let node = out.node.expect("node recorded");
    assert!(slurm_nodes().contains(&node), "{node} is not a Slurm node");
    assert!(out.tail.contains("to-stderr"));
}

#[test]
fn env_cwd_stdin_and_captured_stdout() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut job = sh(
        "env",
        "printf '%s\\n' \"$REPRO_T_VALUE\" \"$(pwd)\"; cat; echo noise >&2",
        dir.path(),
    );
    job.env.insert("REPRO_T_VALUE".into(), "a,b c=d".into());
    let stdin = dir.path().join("stdin.txt");
    std::fs::write(&stdin, "from the stdin file\n").unwrap();
    job.stdin = Some(stdin);
    job.capture_stdout = true;
    let out = executor(debug()).run(&job, &never()).unwrap();
    assert!(out.success(), "{:?}\n{}", out.exit, out.tail);
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("a,b c=d\n{}\nfrom the stdin file\n", cwd.display())
    );
}

#[test]
fn a_missing_directory_on_the_node_fails_the_job_instead_of_running_in_tmp() {
    if !enabled() {
        return;
    }
    let job = sh("nodir", "pwd", std::path::Path::new("/nonexistent/repro"));
    let out = executor(debug()).run(&job, &never()).unwrap();
    assert_eq!(out.exit, ExitKind::Code(127));
    assert!(
        out.tail.contains("must be on a filesystem shared"),
        "{}",
        out.tail
    );
}

#[test]
fn a_signal_is_reported_as_a_signal() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = sh("segv", "kill -SEGV $$", dir.path());
    let out = executor(debug()).run(&job, &never()).unwrap();
    assert_eq!(out.exit, ExitKind::Signal(11), "{}", out.tail);
}

#[test]
fn a_gpu_job_gets_the_gres() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut job = sh("gres", "scontrol show job -o $SLURM_JOB_ID", dir.path());
    job.gpu = Some(0);
    job.capture_stdout = true;
    let slurm = executor(SlurmSettings {
        gres: Some("gpu:1".into()),
        ..debug()
    });
    let out = slurm.run(&job, &never()).unwrap();
    assert!(out.success(), "{:?}\n{}", out.exit, out.tail);
    let record = String::from_utf8(out.stdout).unwrap();
    assert!(record.contains("TresPerNode=gres:gpu:1"), "{record}");
}

#[test]
fn gpu_slots_count_the_partition_gpus_unless_limited() {
    if !enabled() {
        return;
    }
    let expected: u32 = std::env::var("REPRO_SLURM_GPUS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    assert_eq!(executor(debug()).gpu_slots(), expected);
    let limited = executor(SlurmSettings {
        max_jobs: Some(7),
        ..debug()
    });
    assert_eq!(limited.gpu_slots(), 7);
}

#[test]
fn a_missing_partition_is_a_clear_error() {
    if !enabled() {
        return;
    }
    let err = SlurmExecutor::new(SlurmSettings {
        partition: Some("no-such-partition".into()),
        ..SlurmSettings::default()
    })
    .unwrap_err();
    assert!(matches!(err, SlurmError::NoSuchPartition { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "Slurm partition 'no-such-partition' does not exist (partitions here: debug*); \
         fix `partition:` under `executor:` in pipeline.yaml"
    );
}

#[test]
fn slurms_time_limit_is_reported_as_a_scheduler_timeout() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = sh("timelimit", "echo started; sleep 600", dir.path());
    let slurm = executor(SlurmSettings {
        time: Some("1".into()),
        ..debug()
    });
    let out = slurm.run(&job, &never()).unwrap();
    match &out.exit {
        ExitKind::Scheduler(reason) => {
            assert!(
                reason.starts_with("TIMEOUT: Slurm cancelled STEP "),
                "{reason}"
            );
            assert!(reason.ends_with("due to time limit"), "{reason}");
        }
        other => panic!("expected Slurm's TIMEOUT, got {other:?}\n{}", out.tail),
    }
    wait_until_gone(&job.name);
}

#[test]
fn the_jobs_own_timeout_cancels_it_in_slurm() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut job = sh("timeout", "sleep 600", dir.path());
    job.timeout = Some(Duration::from_secs(2));
    let out = executor(debug()).run(&job, &never()).unwrap();
    assert_eq!(out.exit, ExitKind::TimedOut, "{}", out.tail);
    assert_eq!(queued(&job.name), "", "nothing left in the queue");
}

#[test]
fn cancelling_a_running_step_leaves_nothing_queued() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = sh("cancel-running", "sleep 600", dir.path());
    let (cancel, setter) = cancel_once(&job.name, "RUNNING");
    let out = executor(debug()).run(&job, &cancel).unwrap();
    setter.join().unwrap();
    assert_eq!(out.exit, ExitKind::Cancelled, "{}", out.tail);
    assert_eq!(queued(&job.name), "");
}

#[test]
fn cancelling_a_pending_job_removes_it_from_the_queue() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = sh("cancel-pending", "true", dir.path());
    let (cancel, setter) = cancel_once(&job.name, "PENDING");
    // Held in the queue for an hour: it can only end by being cancelled.
    let slurm = executor(SlurmSettings {
        srun_args: vec!["--begin=now+3600".into()],
        ..debug()
    });
    let out = slurm.run(&job, &cancel).unwrap();
    setter.join().unwrap();
    assert_eq!(out.exit, ExitKind::Cancelled, "{}", out.tail);
    assert_eq!(out.node, None, "it never ran");
    assert_eq!(queued(&job.name), "");
}

#[test]
fn a_request_slurm_refuses_is_an_error_naming_slurms_reason() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut job = sh("refused", "true", dir.path());
    job.gpu = Some(0);
    let slurm = executor(SlurmSettings {
        gres: Some("gpu:64".into()),
        ..debug()
    });
    let err = slurm.run(&job, &never()).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "Slurm did not run job '{}': Requested node configuration is not available",
            job.name
        )),
        "{err}"
    );
    assert!(err.contains("check `executor:` in pipeline.yaml"), "{err}");
}

/// What tune does with a generation: as many GPU jobs at once as `gpu_slots`, each
/// holding one GPU; Slurm queues the rest.
#[test]
fn concurrent_gpu_jobs_each_get_their_own_result() {
    if !enabled() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let slurm = executor(SlurmSettings {
        gres: Some("gpu:1".into()),
        ..debug()
    });
    let results: Vec<String> = thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let slurm = &slurm;
                let dir = dir.path();
                s.spawn(move || {
                    let mut job = sh(
                        &format!("trial{i}"),
                        "echo \"$REPRO_T_TRIAL $((REPRO_T_TRIAL * REPRO_T_TRIAL))\"",
                        dir,
                    );
                    job.env.insert("REPRO_T_TRIAL".into(), i.to_string());
                    job.gpu = Some(i % slurm.gpu_slots());
                    job.capture_stdout = true;
                    let out = slurm.run(&job, &never()).unwrap();
                    assert!(out.success(), "{:?}\n{}", out.exit, out.tail);
                    String::from_utf8(out.stdout).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results, ["0 0\n", "1 1\n", "2 4\n", "3 9\n"]);
}
