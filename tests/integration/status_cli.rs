//! `repro status` for a reviewer and a script: a changed long list reads as what changed in
//! it within a terminal line (the full values stay in `--json`), and `--exit-code` says
//! whether anything is stale.

use assert_cmd::Command;
use std::path::Path;

/// The profile stage's metric list, as a param of a `cmd` stage: about 40 long names.
fn metrics(skip: usize, extra: &[&str]) -> Vec<String> {
    (0..40)
        .filter(|&i| i != skip)
        .map(|i| format!("smsp__pcsamp_warps_issue_stalled_reason_{i:02}.sum"))
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
}

fn pipeline(metrics: &[String]) -> String {
    format!(
        "version: 1\nstages:\n  profile-like:\n    uses: cmd\n    run: [sh, -c, \"echo ok > out.txt\"]\n    params:\n      metrics: [{}]\n    outs: [out.txt]\n",
        metrics.join(", ")
    )
}

fn repro(root: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    Command::cargo_bin("repro")
        .unwrap()
        .args(args)
        .current_dir(root)
        .assert()
}

fn stdout(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stdout).into_owned()
}

#[test]
fn a_changed_metric_list_says_what_changed_in_a_terminal_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let before = metrics(99, &[]);
    std::fs::write(root.join("pipeline.yaml"), pipeline(&before)).unwrap();
    repro(root, &["run", "-q"]).success();
    let after = metrics(7, &["l1tex__t_bytes.sum", "dram__bytes_read.sum"]);
    std::fs::write(root.join("pipeline.yaml"), pipeline(&after)).unwrap();

    let out = stdout(&repro(root, &["status"]).success());
    for line in out.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    assert!(
        out.contains("param `metrics` changed: added 2 (l1tex__t_bytes.sum, …1 more); removed 1"),
        "{out}"
    );

    // The JSON keeps both lists in full.
    let json = stdout(&repro(root, &["status", "--json"]).success());
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let change = &rows[0]["changes"][0];
    assert_eq!(change["name"], "metrics");
    let to: Vec<String> = serde_json::from_str(change["to"].as_str().unwrap()).unwrap();
    assert_eq!(to, after);
    let from: Vec<String> = serde_json::from_str(change["from"].as_str().unwrap()).unwrap();
    assert_eq!(from, before);
}

#[test]
fn exit_code_is_1_while_anything_is_stale_or_never_run_and_0_when_all_are_up_to_date() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("pipeline.yaml"), pipeline(&metrics(99, &[]))).unwrap();
    // Without the flag, status always exits 0.
    repro(root, &["status"]).code(0);
    let never_run = repro(root, &["status", "--exit-code"]).code(1);
    assert!(stdout(&never_run).contains("never-run"));
    repro(root, &["run", "-q"]).success();
    repro(root, &["status", "--exit-code"]).code(0);
    repro(root, &["status", "--exit-code", "--json"]).code(0);
    std::fs::write(root.join("pipeline.yaml"), pipeline(&metrics(3, &[]))).unwrap();
    let stale = repro(root, &["status", "--exit-code"]).code(1);
    assert!(stdout(&stale).contains("stale"));
    // A failed stage, too.
    std::fs::write(
        root.join("pipeline.yaml"),
        "version: 1\nstages:\n  bad:\n    uses: cmd\n    run: [sh, -c, \"exit 3\"]\n    outs: [x.txt]\n",
    )
    .unwrap();
    let quiet = repro(root, &["run", "-q"]).code(1);
    let err = String::from_utf8_lossy(&quiet.get_output().stderr).into_owned();
    assert!(
        err.contains("error: stage `bad` failed"),
        "-q still shows errors: {err}"
    );
    let failed = repro(root, &["status", "--exit-code"]).code(1);
    assert!(stdout(&failed).contains("failed"), "{}", stdout(&failed));
}

#[test]
fn help_documents_exit_code() {
    let help = stdout(&repro(Path::new("."), &["status", "--help"]).success());
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("--exit-code Exit 1 when a stage is stale, never run, failed, or kept although its sources changed; 0 when all are up to date or kept only because this machine cannot measure them (as `git diff --exit-code`)"),
        "{help}"
    );
}

/// In a project where nothing has run, `dag` and `status` make `.repro/cache` once they
/// loaded a valid pipeline, so the loads after them read the parse from there instead of
/// the YAML; an invalid pipeline leaves no `.repro`, and a `.repro` that is a symlink is not
/// followed.
#[test]
fn read_only_commands_make_the_parse_cache_folder_of_a_valid_pipeline_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("pipeline.yaml"),
        "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"]}\n  a: {}\n",
    )
    .unwrap();
    for command in ["dag", "status"] {
        repro(root, &[command]).code(2);
        assert!(
            !root.join(".repro").exists(),
            "{command} of an invalid pipeline"
        );
    }
    std::fs::write(root.join("pipeline.yaml"), pipeline(&metrics(0, &[]))).unwrap();
    for command in ["dag", "status"] {
        std::fs::remove_dir_all(root.join(".repro")).ok();
        repro(root, &[command]).success();
        assert!(root.join(".repro/cache").is_dir(), "{command}");
        repro(root, &[command]).success();
        assert!(
            root.join(".repro/cache/pipeline.json").is_file(),
            "{command}"
        );
    }
    std::fs::remove_dir_all(root.join(".repro")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), root.join(".repro")).unwrap();
    repro(root, &["dag"]).success();
    assert!(
        !elsewhere.path().join("cache").exists(),
        "followed the symlink"
    );
}
