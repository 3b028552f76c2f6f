//! `repro run` with the Slurm executor, through the real binary, against a real cluster
//! (`ci/slurm/setup.sh`). Cluster tests run only with REPRO_SLURM_TESTS=1 and then fail
//! if the cluster is not up.

#[path = "support/slurm.rs"]
mod support;

use assert_cmd::Command;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{enabled, job_records, queued, wait_until_gone};

/// Two `cmd` stages; `total` overrides the pipeline's Slurm time limit and asks for a GPU
/// (docs/guide/slurm.md shows this file).
const PIPELINE: &str = r#"version: 1
executor:
  kind: slurm
  partition: debug
  time: "10"
stages:
  prepare:
    uses: cmd
    run: "mkdir -p out && printf '%s\n' 3 1 2 > out/numbers.txt && hostname > out/host.txt"
    shell: true
    outs: [out/numbers.txt]
  total:
    uses: cmd
    needs: [prepare]
    run: "sort -n out/numbers.txt > out/sorted.txt && awk '{s+=$1} END {print s}' out/numbers.txt > out/total.txt"
    shell: true
    deps: [out/numbers.txt]
    outs: [out/sorted.txt, out/total.txt]
    executor: {kind: slurm, time: "2", srun_args: ["--gres=gpu:1"]}
"#;

fn project(pipeline: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pipeline.yaml"), pipeline).unwrap();
    dir
}

fn repro(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(dir);
    cmd
}

/// Runs `cmd`, expects exit code 1 (a failed stage) and returns its stderr.
fn stage_fails(mut cmd: Command) -> String {
    let out = cmd.assert().code(1).get_output().clone();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn cmd_stages_give_the_same_outputs_and_lock_locally_and_on_slurm() {
    if !enabled() {
        return;
    }
    let local = project(PIPELINE);
    let slurm = project(PIPELINE);
    repro(local.path())
        .args(["run", "--executor", "local"])
        .assert()
        .success();
    repro(slurm.path()).arg("run").assert().success();

    for file in [
        "out/numbers.txt",
        "out/sorted.txt",
        "out/total.txt",
        "artifacts/repro.lock",
    ] {
        assert_eq!(
            read(local.path(), file),
            read(slurm.path(), file),
            "{file} differs"
        );
    }
    assert_eq!(read(slurm.path(), "out/total.txt"), b"6\n");

    // Each stage ran as a Slurm job, in the project directory, with its own time limit.
    let workdir = format!("WorkDir={}", slurm.path().display());
    let records = job_records();
    let mine: Vec<&str> = records.lines().filter(|l| l.contains(&workdir)).collect();
    for (stage, minutes) in [("prepare", 10), ("total", 2)] {
        let name = format!("Name=cmd:{stage} ");
        let record = mine
            .iter()
            .find(|l| l.contains(&name))
            .unwrap_or_else(|| panic!("no Slurm record of stage {stage} in:\n{records}"));
        assert!(record.contains("JobState=COMPLETED"), "{record}");
        assert!(
            record.contains(&format!("TimeLimit={minutes} ")),
            "{record}"
        );
    }

    // A second run is up to date: nothing is submitted.
    let before = job_records().lines().count();
    repro(slurm.path()).arg("run").assert().success();
    assert_eq!(job_records().lines().count(), before);
}

#[test]
fn ctrl_c_during_a_slurm_stage_leaves_nothing_queued() {
    if !enabled() {
        return;
    }
    let stage = format!("wait{}", std::process::id());
    let dir = project(&format!(
        "version: 1\nexecutor: {{kind: slurm, partition: debug, time: \"5\"}}\nstages:\n  \
         {stage}:\n    uses: cmd\n    run: [sleep, \"600\"]\n"
    ));
    let job = format!("cmd:{stage}");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("repro"))
        .arg("run")
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !queued(&job).contains("RUNNING") {
        assert!(
            Instant::now() < deadline,
            "the stage never started in Slurm"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: sends SIGINT to the child we started, as Ctrl-C would.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(queued(&job), "", "nothing left in Slurm's queue");
    assert!(!dir.path().join("artifacts/repro.lock").exists());
}

#[test]
fn a_slurm_time_limit_fails_the_stage_with_slurms_reason() {
    if !enabled() {
        return;
    }
    let dir = project(
        "version: 1\nexecutor: {kind: slurm, partition: debug, time: \"1\"}\nstages:\n  \
         forever:\n    uses: cmd\n    run: [sleep, \"600\"]\n",
    );
    let mut cmd = repro(dir.path());
    cmd.arg("run");
    let stderr = stage_fails(cmd);
    assert!(
        stderr.contains("the scheduler ended `sleep`: TIMEOUT: Slurm cancelled STEP "),
        "{stderr}"
    );
    assert!(stderr.contains("due to time limit"), "{stderr}");
    wait_until_gone("cmd:forever");
}

#[test]
fn a_missing_partition_is_named_with_the_fix() {
    if !enabled() {
        return;
    }
    let dir = project(
        "version: 1\nexecutor: {kind: slurm, partition: gpu-nodes}\nstages:\n  \
         one:\n    uses: cmd\n    run: [\"true\"]\n",
    );
    let mut cmd = repro(dir.path());
    cmd.arg("run");
    let stderr = stage_fails(cmd);
    assert!(
        stderr.contains(
            "Slurm partition 'gpu-nodes' does not exist (partitions here: debug*); \
             fix `partition:` under `executor:` in pipeline.yaml"
        ),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_controller_is_named_with_the_fix() {
    if !enabled() {
        return;
    }
    // This cluster's configuration, but a port nothing listens on.
    let config = std::fs::read_to_string("/etc/slurm/slurm.conf").unwrap();
    let dir = project(
        "version: 1\nexecutor: {kind: slurm}\nstages:\n  one:\n    uses: cmd\n    run: [\"true\"]\n",
    );
    let bogus: String = config
        .lines()
        .map(|l| {
            if l.starts_with("SlurmctldPort=") {
                "SlurmctldPort=6999".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, bogus).unwrap();
    let mut cmd = repro(dir.path());
    cmd.arg("run");
    cmd.env("SLURM_CONF", &conf);
    let stderr = stage_fails(cmd);
    assert!(
        stderr.contains("cannot reach the Slurm controller: ")
            && stderr.contains("Unable to contact slurm controller"),
        "{stderr}"
    );
    assert!(stderr.contains("`scontrol ping`"), "{stderr}");
}

/// Needs no cluster: runs everywhere.
#[test]
fn missing_client_tools_are_named_with_the_fix() {
    let dir = project("version: 1\nstages:\n  one:\n    uses: cmd\n    run: [\"true\"]\n");
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = repro(dir.path());
    cmd.args(["run", "--executor", "slurm"]);
    cmd.env("PATH", empty.path());
    let stderr = stage_fails(cmd);
    assert!(
        stderr.contains(
            "Slurm's client tools are not on PATH (missing: srun, scancel, squeue, sinfo, scontrol): \
             install slurm-client or use --executor local"
        ),
        "{stderr}"
    );
}

/// `srun ... repro run` (repro on a compute node): each stage is still a Slurm job of its
/// own, not a step of repro's job, so cancelling it cannot cancel repro.
#[test]
fn repro_inside_a_slurm_job_submits_separate_jobs() {
    if !enabled() {
        return;
    }
    let stage = format!("inner{}", std::process::id());
    let dir = project(&format!(
        "version: 1\nexecutor: {{kind: slurm, partition: debug, time: \"5\"}}\nstages:\n  \
         {stage}:\n    uses: cmd\n    run: [sh, -c, \"echo $SLURM_JOB_ID > job.txt\"]\n    outs: [job.txt]\n"
    ));
    let out = std::process::Command::new("srun")
        .args(["--job-name=repro-outer", "-N1", "-n1", "-t", "2", "--chdir"])
        .arg(dir.path())
        .arg(assert_cmd::cargo::cargo_bin("repro"))
        .arg("run")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let inner = String::from_utf8(read(dir.path(), "job.txt")).unwrap();
    let records = job_records();
    let record = records
        .lines()
        .find(|l| l.starts_with(&format!("JobId={} ", inner.trim())))
        .unwrap_or_else(|| panic!("no record of job {inner} in:\n{records}"));
    assert!(record.contains(&format!("Name=cmd:{stage} ")), "{record}");
}
