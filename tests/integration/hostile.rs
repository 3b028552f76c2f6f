//! The reproductions of a hostile test of the engine (issue 16), each run on the real
//! binary: processes a killed run leaves behind, recovery that must not follow paths out
//! of the project, reserved outputs, special files and dangling links among the deps,
//! huge timeouts, and usage errors.

use crate::project;
use project::{assert_gone, send_signal, Project};
use std::time::{Duration, Instant};

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// `s1` writes its six lines itself; `s2` from a background subshell, which is not its
/// process group's leader and so outlives a `repro` killed with SIGKILL unless the next
/// run kills it.
const ORPHANS: &str = r#"version: 1
stages:
  s1:
    uses: cmd
    run: [sh, -c, 'for i in 1 2 3 4 5 6; do echo "$$ $i" >> o1; sleep .5; done']
    deps: [dep]
    outs: [o1]
  s2:
    uses: cmd
    run: [sh, -c, '( for i in 1 2 3 4 5 6; do echo "$$ $i" >> o2; sleep .5; done ) & wait']
    deps: [dep]
    outs: [o2]
"#;

/// The output's lines all come from one process and count 1 to 6.
fn assert_one_complete_run(p: &Project, out: &str) {
    let text = p.read(out);
    let lines: Vec<(&str, &str)> = text
        .lines()
        .map(|l| l.split_once(' ').unwrap_or((l, "")))
        .collect();
    let counts: Vec<&str> = lines.iter().map(|(_, i)| *i).collect();
    assert_eq!(counts, ["1", "2", "3", "4", "5", "6"], "{out}:\n{text}");
    assert!(
        lines.iter().all(|(pid, _)| *pid == lines[0].0),
        "{out} mixes two runs:\n{text}"
    );
}

#[test]
fn an_orphan_of_a_killed_run_never_writes_into_the_rerun() {
    let p = Project::new(ORPHANS);
    p.write("dep", "1");
    p.expect(&["run", "-j", "2"], 0);
    p.write("dep", "2");
    let killed = p.spawn(&["run", "-j", "2"]);
    std::thread::sleep(Duration::from_millis(1200));
    send_signal(killed.id(), 9);
    killed.wait_with_output().unwrap();
    let out = p.expect(&["run", "-j", "2"], 0);
    assert!(out.contains("took over the project lock"), "{out}");
    // Long enough for a surviving writer of the killed run to finish its six lines.
    std::thread::sleep(Duration::from_millis(3500));
    assert_one_complete_run(&p, "o1");
    assert_one_complete_run(&p, "o2");
    assert!(
        p.states().values().all(|s| s == "up-to-date"),
        "{:?}",
        p.states()
    );
}

#[test]
fn a_stage_process_dies_with_a_repro_killed_by_sigkill() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, 'echo $$ > leader; sleep 30; touch o'], outs: [o]}\n",
    );
    let killed = p.spawn(&["run"]);
    p.wait_for("leader");
    std::thread::sleep(Duration::from_millis(100));
    send_signal(killed.id(), 9);
    killed.wait_with_output().unwrap();
    // No rerun: the kernel kills the stage's first process when repro dies.
    assert_gone(p.read("leader").trim());
}

#[test]
fn a_dep_folder_written_by_a_needed_stage_need_not_exist_yet() {
    let p = Project::new(
        "version: 1\nstages:\n  gen: {uses: cmd, run: [sh, -c, \"echo x > data/x\"], outs: [data/x]}\n  use: {uses: cmd, needs: [gen], run: [sh, -c, \"cat data/* > all\"], deps: [data], outs: [all]}\n",
    );
    p.expect(&["run"], 0);
    assert_eq!(p.read("all"), "x\n");
    assert!(p.states().values().all(|s| s == "up-to-date"));
}

#[test]
fn recovery_never_follows_a_backup_list_out_of_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("precious"), "keep").unwrap();
    let p = Project::new("version: 1\nstages:\n  s: {uses: cmd, run: [touch, o], outs: [o]}\n");
    let target = outside.path().join("precious");
    for (stage, list) in [
        ("x", format!("{}\n", target.display())),
        (
            "y",
            format!("present {}\nabsent ../{}\n", target.display(), "x"),
        ),
        ("z", "absent .git\nabsent pipeline.yaml\n".to_string()),
    ] {
        p.write(&format!(".repro/backup/{stage}/outs"), &list);
    }
    std::fs::create_dir_all(p.root().join(".git")).unwrap();
    std::fs::write(p.root().join(".git/HEAD"), "ref").unwrap();
    let out = p.expect(&["run"], 0);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(p.read(".git/HEAD"), "ref");
    assert!(p.read("pipeline.yaml").contains("touch"));
    assert!(out.contains("did not restore"), "{out}");
}

#[test]
fn git_as_an_output_is_refused_before_anything_runs() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"mkdir .git; touch .git/x\"], outs: [.git]}\n",
    );
    let repo = git2::Repository::init(p.root()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let tree = repo.treebuilder(None).unwrap().write().unwrap();
    let tree = repo.find_tree(tree).unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[])
        .unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains(
            "pipeline.yaml:3:68: error: output `.git` of stage `s` is git's repository (`.git`)"
        ),
        "{out}"
    );
    let repo = git2::Repository::open(p.root()).unwrap();
    assert_eq!(
        repo.head().unwrap().peel_to_commit().unwrap().message(),
        Some("first")
    );
}

#[test]
fn a_dangling_link_in_a_dep_folder_does_not_hide_edits() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"cat d/a > o\"], deps: [d], outs: [o]}\n",
    );
    p.write("d/a", "one\n");
    std::os::unix::fs::symlink("user@host.1234:1700000000", p.root().join("d/.#x")).unwrap();
    p.expect(&["run"], 0);
    let lock = p.read("artifacts/repro.lock");
    assert!(!lock.contains("missing"), "{lock}");
    assert!(lock.contains("d/.#x"), "{lock}");
    p.write("d/a", "two\n");
    assert_eq!(p.states()["s"], "stale");
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "two\n");
}

#[test]
fn special_files_among_the_deps_never_hang_a_run() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"cat d/a > o\"], deps: [d, zero], outs: [o]}\n",
    );
    p.write("d/a", "one\n");
    mkfifo(&p.root().join("d/pipe"));
    let socket = std::os::unix::net::UnixListener::bind(p.root().join("d/sock")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", p.root().join("zero")).unwrap();
    let started = Instant::now();
    let out = p
        .command(&["run"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let lock = p.read("artifacts/repro.lock");
    assert!(
        lock.contains("d/pipe: fifo") && lock.contains("zero: char-device:1:5"),
        "{lock}"
    );
    p.write("d/a", "two\n");
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "two\n");
    drop(socket);
}

#[test]
fn a_second_interrupt_ends_a_run_stuck_in_a_blocking_read() {
    let p = Project::new("version: 1\nstages:\n  s: {uses: cmd, run: [touch, o], outs: [o]}\n");
    std::fs::create_dir_all(p.root().join("artifacts")).unwrap();
    // The lock as a FIFO with no writer: reading it blocks.
    mkfifo(&p.root().join("artifacts/repro.lock"));
    let mut run = p.spawn(&["run"]);
    p.wait_for(".repro/lock");
    std::thread::sleep(Duration::from_millis(300));
    send_signal(run.id(), 2);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(run.id(), 2);
    let started = Instant::now();
    while run.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            run.kill().unwrap();
            panic!("repro did not end after a second SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(run.wait().unwrap().code(), Some(130));
}

#[test]
fn a_timeout_too_long_for_the_clock_is_refused_at_load_time() {
    for timeout in ["\"99999999999999999999\"", "9223372036854775000"] {
        let p = Project::new(&format!(
            "version: 1\nstages:\n  s: {{uses: cmd, run: [touch, o], timeout: {timeout}, outs: [o]}}\n"
        ));
        for command in ["dag", "run"] {
            let out = p.expect(&[command], 2);
            assert!(
                out.contains("pipeline.yaml:3:44: error: invalid timeout")
                    && out.contains("longer than the maximum of 30 days"),
                "{out}"
            );
        }
        assert!(!p.root().join("o").exists());
    }
}

#[test]
fn an_unknown_executor_is_a_usage_error_before_any_stage_runs() {
    let p = Project::new("version: 1\nstages:\n  s: {uses: cmd, run: [touch, o], outs: [o]}\n");
    for command in [
        &["run", "--executor", "foo"][..],
        &["stage", "s", "--executor", "foo"],
    ] {
        let out = p.expect(command, 2);
        assert!(out.contains("foo") && out.contains("local"), "{out}");
    }
    assert!(!p.root().join("o").exists());
    assert!(!p.root().join(".repro").exists());
}

#[test]
fn a_byte_order_mark_is_read_and_invalid_utf8_is_placed() {
    let p = Project::new("");
    std::fs::write(
        p.root().join("pipeline.yaml"),
        b"\xEF\xBB\xBFversion: 1\nstages:\n  s: {uses: cmd, run: [touch, o], outs: [o]}\n",
    )
    .unwrap();
    p.expect(&["run"], 0);
    assert!(p.root().join("o").exists());
    std::fs::write(
        p.root().join("pipeline.yaml"),
        b"version: 1\nstages:\n  s: {uses: cmd, run: [echo, caf\xE9], outs: [o]}\n",
    )
    .unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains("pipeline.yaml:3:33: error: the file is not UTF-8 text (byte 0xE9)"),
        "{out}"
    );
}

// Cases of a third hostile round (issue 29), beyond its thirteen classes (those are in
// `tests/hardening.rs`): what repro keeps under `.repro/`, its lock, and deps that reach
// its own state. Each failed before its fix. Four more are pipeline files in
// `tests/bad_pipelines/`: `output_control_char`, `dep_holds_lock`, `env_bad_name`,
// `run_nul_byte`.

/// A folder outside the project holding `SUB/precious` (text `keep`), and that file.
fn outside_with(sub: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join(sub).join("precious");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "keep").unwrap();
    (outside, file)
}

const ONE_STAGE: &str =
    "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"echo hi; echo o > o\"], outs: [o]}\n";

#[test]
fn a_repro_folder_that_is_a_symlink_out_of_the_project_is_refused() {
    let (outside, precious) = outside_with("staging");
    let p = Project::new(ONE_STAGE);
    std::os::unix::fs::symlink(outside.path(), p.root().join(".repro")).unwrap();
    let out = p.expect(&["run"], 1);
    assert!(out.contains("`.repro` is a symlink"), "{out}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
    assert!(!p.root().join("o").exists());
}

#[test]
fn a_backup_folder_planted_as_a_symlink_is_refused() {
    let (outside, precious) = outside_with("s/files");
    let p = Project::new(ONE_STAGE);
    std::fs::create_dir(p.root().join(".repro")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.root().join(".repro/backup")).unwrap();
    let out = p.expect(&["run"], 1);
    assert!(out.contains("`.repro/backup` is a symlink"), "{out}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
}

#[test]
fn a_project_lock_planted_as_a_symlink_is_refused() {
    let (_outside, precious) = outside_with("");
    let p = Project::new(ONE_STAGE);
    std::fs::create_dir(p.root().join(".repro")).unwrap();
    std::os::unix::fs::symlink(&precious, p.root().join(".repro/lock")).unwrap();
    let out = p.expect(&["run"], 1);
    assert!(out.contains("`.repro/lock` is a symlink"), "{out}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
}

#[test]
fn a_stage_log_planted_as_a_symlink_is_replaced_not_written_through() {
    let (_outside, precious) = outside_with("");
    let p = Project::new(ONE_STAGE);
    std::fs::create_dir_all(p.root().join(".repro/logs")).unwrap();
    std::os::unix::fs::symlink(&precious, p.root().join(".repro/logs/s.log")).unwrap();
    p.expect(&["run"], 0);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep");
    assert!(!p.root().join(".repro/logs/s.log").is_symlink());
    assert_eq!(p.read(".repro/logs/s.log"), "hi\n");
}

#[test]
fn a_lock_folder_leading_out_of_the_project_is_refused() {
    let (outside, _) = outside_with("");
    let p = Project::new(ONE_STAGE);
    std::os::unix::fs::symlink(outside.path(), p.root().join("artifacts")).unwrap();
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("the folder of repro's lock, `artifacts`, leads outside the project"),
        "{out}"
    );
    assert!(!outside.path().join("repro.lock").exists());
    assert!(!p.root().join("o").exists(), "refused before any stage ran");
}

#[test]
fn a_dep_reaching_the_whole_project_through_a_symlink_is_refused() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"ls all > /dev/null\"], deps: [all]}\n",
    );
    std::os::unix::fs::symlink(".", p.root().join("all")).unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains("pipeline.yaml:3:62: error: dep `all` of stage `s` reaches `.` through a symlink; it is the whole project"),
        "{out}"
    );
}

// Issue 39 ("Hardening, round four"): the minor list, and five cases of its own.

#[test]
fn an_output_symlink_leading_out_of_the_project_is_refused() {
    let (outside, file) = outside_with("");
    let p = Project::new(&format!(
        "version: 1\nstages:\n  s: {{uses: cmd, run: [ln, -s, \"{}\", o], outs: [o]}}\n",
        file.display()
    ));
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("the stage's output `o` is a symlink leading outside the project"),
        "{out}"
    );
    assert!(
        !p.root().join("o").is_symlink(),
        "the stage's link is removed"
    );
    assert!(
        !p.root().join("artifacts/repro.lock").exists(),
        "nothing recorded"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    drop(outside);
}

#[test]
fn two_pipeline_files_sharing_one_lock_keep_each_others_records() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a > a\"], outs: [a]}\n",
    );
    p.write(
        "b.yaml",
        "version: 1\nstages:\n  b: {uses: cmd, run: [sh, -c, \"echo b > b\"], outs: [b]}\n",
    );
    p.expect(&["run"], 0);
    p.expect(&["-f", "b.yaml", "run"], 0);
    let lock = p.read("artifacts/repro.lock");
    assert!(
        lock.contains("\n  a:\n") && lock.contains("\n  b:\n"),
        "{lock}"
    );
    assert_eq!(p.states()["a"], "up-to-date");
}

#[test]
fn a_lock_that_is_a_symlink_to_a_file_outside_is_named_and_left_alone() {
    let (outside, file) = outside_with("");
    let p = Project::new(ONE_STAGE);
    std::fs::create_dir(p.root().join("artifacts")).unwrap();
    std::os::unix::fs::symlink(&file, p.root().join("artifacts/repro.lock")).unwrap();
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("artifacts/repro.lock:1:1: not a repro lock file") && out.contains("help:"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert!(!p.root().join("o").exists(), "nothing ran");
    drop(outside);
}

#[test]
fn a_stage_named_dot_dot_keeps_its_files_inside_repro() {
    let p = Project::new(
        "version: 1\nstages:\n  \"..\": {uses: cmd, run: [sh, -c, \"echo x > o\"], outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    assert!(p.root().join(".repro/logs/%2E..log").is_file());
    assert!(!p.root().join(".repro/...log").exists());
    assert_eq!(p.states()[".."], "up-to-date");
}

#[test]
fn a_param_too_large_for_the_environment_is_refused_at_its_position() {
    let big = "a".repeat(10 << 20);
    let p = Project::new(&format!(
        "version: 1\nstages:\n  s: {{uses: cmd, run: [sh, -c, \"echo x > o\"], params: {{x: {big}}}, outs: [o]}}\n"
    ));
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains("pipeline.yaml:3:56: error: param `x` (exported as `REPRO_PARAM_x`) is 10485775 bytes as an environment variable; a process can be given at most 131072"),
        "{}",
        &out[..out.len().min(400)]
    );
    assert!(!p.root().join("o").exists());
}

// Issue 39: five more cases of our own, in classes the earlier rounds did not list.

#[test]
fn a_pipeline_file_that_is_a_fifo_or_dev_zero_is_refused_without_reading_it() {
    let p = Project::new("");
    let file = p.root().join("pipeline.yaml");
    std::fs::remove_file(&file).unwrap();
    mkfifo(&file);
    for command in ["dag", "status"] {
        let out = p
            .command(&[command])
            .timeout(Duration::from_secs(20))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("is not a regular file (a FIFO, a device or a socket)"),
            "{err}"
        );
    }
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains("is not a regular file (a FIFO, a device or a socket)"),
        "{out}"
    );
    assert!(!p.root().join(".repro").exists(), "something ran");
}

#[test]
fn sighup_ends_a_run_as_sigterm_does_and_restores_the_outputs() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"echo new > o; touch started; sleep 30\"], deps: [d], outs: [o]}\n",
    );
    p.write("d", "1");
    p.write("o", "old\n");
    let lock_before = std::fs::read(p.root().join("artifacts/repro.lock")).ok();
    let run = p.spawn(&["run"]);
    p.wait_for("started");
    send_signal(run.id(), libc::SIGHUP);
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(p.read("o"), "old\n");
    assert_eq!(
        std::fs::read(p.root().join("artifacts/repro.lock")).ok(),
        lock_before
    );
    assert_eq!(
        std::fs::read_dir(p.root().join(".repro/backup"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn an_enormous_single_log_line_is_cut_in_the_error() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"head -c 50000000 /dev/zero | tr '\\\\0' x; printf '\\\\033]0;t\\\\007'; exit 3\"], outs: [o]}\n",
    );
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("`sh` exited with code 3"),
        "{}",
        &out[..out.len().min(500)]
    );
    assert!(out.len() < 10_000, "{} bytes of error", out.len());
    assert!(!out.contains('\u{1b}'), "raw escape in the error");
    assert_eq!(
        std::fs::metadata(p.root().join(".repro/logs/s.log"))
            .unwrap()
            .len(),
        50_000_006
    );
}

#[test]
fn a_stage_that_closes_its_stdout_and_stderr_early_still_passes() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"exec >&- 2>&-; sleep 0.2; echo x > o\"], outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "x\n");
    assert_eq!(p.states()["s"], "up-to-date");
}
