//! A run at the edges: deep nesting, escapes, another run, a closed pipe, no threads, nested repro.

use super::*;

#[test]
fn class8_deep_nesting_is_refused_at_once() {
    let p = Project::new("");
    let n = 100_000;
    std::fs::write(
        p.root().join("pipeline.yaml"),
        format!(
            "version: 1\nstages:\n  s:\n    uses: cmd\n    run: [\"true\"]\n    params:\n      x: {}{}\n",
            "[".repeat(n),
            "]".repeat(n)
        ),
    )
    .unwrap();
    // A watchdog, not a timing: before the fix this took about 40 s.
    let out = p
        .command(&["dag"])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with(
            "pipeline.yaml:7:74: error: lists and mappings nest more than 64 levels deep here"
        ),
        "{err}"
    );
}

#[test]
fn class9_status_shows_escape_sequences_and_keeps_lines_within_100_columns() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"head -c 65545 /dev/zero | tr '\\\\0' x; echo; printf '\\\\033[2J\\\\033]0;owned\\\\007\\\\n'; exit 1\"], outs: [o]}\n",
    );
    let run = p.expect(&["run"], 1);
    assert!(!run.contains('\u{1b}'), "{run:?}");
    let status = p.expect(&["status"], 0);
    assert!(
        !status.contains('\u{1b}') && !status.contains('\u{7}'),
        "{status:?}"
    );
    assert!(status.contains("^[[2J^[]0;owned^G"), "{status}");
    for line in status.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn class11_a_param_with_a_dash_is_exported_with_an_underscore() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"echo $REPRO_PARAM_learning_rate > o\"], params: {learning-rate: 0.1}, outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "0.1\n");
}

#[test]
fn class13_status_and_dry_run_during_a_run_say_a_run_is_in_progress() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"touch started; sleep 3; echo x > o\"], outs: [o]}\n",
    );
    p.write("o", "old\n");
    p.expect(&["run", "--force"], 0);
    // The first run's marker would let the wait below return before the second run starts.
    std::fs::remove_file(p.root().join("started")).unwrap();
    let mut running = p.spawn(&["run", "--force"]);
    p.wait_for("started");
    for args in [&["status"][..], &["run", "--dry-run"]] {
        let out = p.expect(args, 0);
        assert!(
            out.contains("note: a run is in progress (pid "),
            "{args:?}: {out}"
        );
    }
    assert!(running.wait().unwrap().success());
    assert!(!p.expect(&["status"], 0).contains("in progress"));
}

/// A stage whose param (and so its stale reason) carries an escape sequence, and a stage
/// that needs it: `a` ran with `p: x`, then `p` became ESC ] 0 ; owned BEL.
fn project_with_an_escape_in_a_param() -> Project {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a > a.txt\"], outs: [a.txt], params: {p: x}}\n  b: {uses: cmd, run: [sh, -c, \"cat a.txt > b.txt\"], deps: [a.txt], needs: [a], outs: [b.txt]}\n",
    );
    p.expect(&["run"], 0);
    let yaml = p
        .read("pipeline.yaml")
        .replace("p: x", "p: \"\\e]0;owned\\a\"");
    p.write("pipeline.yaml", &yaml);
    p
}

#[test]
fn round4_a_escape_sequences_are_shown_on_every_output_path() {
    let p = project_with_an_escape_in_a_param();
    let plan = p.expect(&["run", "--dry-run"], 0);
    assert!(plan.contains("^[]0;owned^G"), "{plan}");
    let stale = p.expect(&["stage", "b"], 1);
    assert!(
        stale.contains("which is stale (param `p` changed: x → ^[]0;owned^G)"),
        "{stale}"
    );
    let status = p.expect(&["status"], 0);
    for text in [plan, stale, status] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }
}

/// `repro ARGS` in `p` with stdout and stderr a pipe whose reader is already gone.
fn repro_into_a_closed_pipe(p: &Project, args: &[&str]) -> std::process::ExitStatus {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    std::process::Command::new(assert_cmd::cargo::cargo_bin("repro"))
        .args(args)
        .current_dir(p.root())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .status()
        .unwrap()
}

#[test]
fn round4_b_a_closed_pipe_ends_quietly_and_records_what_finished() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a$(cat n) > a.txt\"], deps: [n], outs: [a.txt]}\n  b: {uses: cmd, run: [sh, -c, \"sleep 0.3; echo b$(cat n) > b.txt\"], deps: [n], outs: [b.txt]}\n  c: {uses: cmd, run: [sh, -c, \"cat b.txt > c.txt\"], deps: [b.txt], needs: [b], outs: [c.txt]}\n",
    );
    p.write("n", "1");
    p.expect(&["run"], 0);
    p.write("n", "2");
    // The first line of progress finds no reader: the stages already started end and are
    // recorded, nothing new starts, and repro exits as SIGPIPE would, without a panic.
    let status = repro_into_a_closed_pipe(&p, &["run", "-j", "2"]);
    assert_eq!(status.code(), Some(141));
    assert_eq!(p.read("a.txt"), "a2\n");
    let states = p.states();
    assert_eq!(states["a"], "up-to-date", "{states:?}");
    assert_eq!(
        std::fs::read_dir(p.root().join(".repro/backup"))
            .unwrap()
            .count(),
        0,
        "a backup was left in place"
    );
    // Nothing started after the reader went: `b` and `c` are as the first run left them.
    assert_eq!(
        (p.read("b.txt"), p.read("c.txt")),
        ("b1\n".into(), "b1\n".into())
    );
    assert_eq!(states["b"], "stale", "{states:?}");
    // `status` into a closed pipe, and into a full disk.
    assert_eq!(repro_into_a_closed_pipe(&p, &["status"]).code(), Some(141));
    let full = std::process::Command::new(assert_cmd::cargo::cargo_bin("repro"))
        .arg("status")
        .current_dir(p.root())
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: cannot write to standard output: No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn round4_b_out_of_threads_fails_the_stages_and_changes_nothing() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"date +%N > a.txt\"], outs: [a.txt]}\n  b: {uses: cmd, run: [sh, -c, \"date +%N > b.txt\"], outs: [b.txt]}\n  c: {uses: cmd, run: [sh, -c, \"date +%N > c.txt\"], outs: [c.txt]}\n",
    );
    p.expect(&["run"], 0);
    let results = || {
        let mut files = p.snapshot();
        files.retain(|path, _| !path.starts_with(".repro"));
        files
    };
    let before = results();
    // RLIMIT_NPROC does not bind root: run as `nobody` there.
    let repro = assert_cmd::cargo::cargo_bin("repro");
    let limited = format!(
        "prlimit --nproc=1 {} run --force -j 4",
        repro.to_str().unwrap()
    );
    // SAFETY: geteuid takes no arguments and cannot fail.
    let script = if unsafe { libc::geteuid() } == 0 {
        std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p.root())
            .status()
            .unwrap();
        format!("exec setpriv --reuid=65534 --regid=65534 --clear-groups {limited}")
    } else {
        format!("exec {limited}")
    };
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .current_dir(p.root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    for stage in ["a", "b", "c"] {
        assert!(
            err.contains(&format!(
                "error: stage `{stage}` failed: cannot start a thread to run the stage"
            )),
            "{err}"
        );
    }
    assert_eq!(
        results(),
        before,
        "a stage that could not start changed files"
    );
    assert_eq!(
        std::fs::read_dir(p.root().join(".repro/backup"))
            .unwrap()
            .count(),
        0,
        "a backup was left in place"
    );
}

#[test]
fn round4_h_a_stage_that_runs_repro_is_refused_not_deadlocked() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a > a.txt\"], outs: [a.txt]}\n  b: {uses: cmd, run: [sh, -c, \"$REPRO_BIN stage a --wait\"], needs: [a], outs: [b.txt], timeout: 30s}\n",
    );
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("this repro runs inside stage `b` of run "),
        "{out}"
    );
    assert!(out.contains("which holds the project lock"), "{out}");
    assert!(!out.contains("timed out"), "{out}");
    assert_eq!(p.states()["a"], "up-to-date");
}
