//! The classes of failure of a third hostile drill of the engine (issue 29): the cache must
//! never be fooled, and nothing outside the project is touched. Each test ran the real
//! binary and failed before its fix; the pipeline-file cases are in `tests/bad_pipelines/`
//! (`dep_whole_project`, `dep_empty`, `env_reserved`, `alias_bomb`, `param_env_clash`,
//! `run_empty_program`, `output_under_lock`). docs/RELIABILITY.md lists them.
//!
//! The `round4_` tests are issue 39's classes (A: an earlier fix that missed a path, B:
//! panics at the process level, E: symlinks among the results, H: a stage that calls repro).

#[path = "support/project.rs"]
mod project;
#[path = "support/skip.rs"]
mod skip;
use project::{assert_gone, Project};
use std::path::Path;
use std::time::Duration;

/// Rewrite `path` in place (same inode) and set its modification time back to `mtime`, as
/// `touch -r`, `cp -p`, `rsync -t` or tar extraction leave an edit.
fn edit_in_place_keeping_mtime(path: &Path, text: &str) {
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

#[test]
fn class1_an_edit_with_its_mtime_set_back_is_never_trusted() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"cat d > o\"], deps: [d], outs: [o]}\n",
    );
    p.write("d", "one\n");
    p.expect(&["run"], 0);
    // A dep: same size, mtime restored.
    edit_in_place_keeping_mtime(&p.root().join("d"), "two\n");
    assert_eq!(p.states()["s"], "stale", "{}", p.expect(&["status"], 0));
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "two\n");
    // An output: same size, mtime restored.
    edit_in_place_keeping_mtime(&p.root().join("o"), "bad\n");
    let status = p.expect(&["status"], 0);
    assert!(status.contains("output `o` modified"), "{status}");
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), "two\n");
}

#[test]
fn class2_two_outputs_naming_one_file_through_a_symlink_are_refused() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a > real/x\"], outs: [real/x]}\n  b: {uses: cmd, run: [sh, -c, \"echo b > link/x\"], outs: [link/x]}\n",
    );
    std::fs::create_dir(p.root().join("real")).unwrap();
    std::os::unix::fs::symlink("real", p.root().join("link")).unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains(
            "pipeline.yaml:4:59: error: output `real/x` (`link/x` through a symlink) is also written by stage `a`"
        ),
        "{out}"
    );
    assert!(!p.root().join("real/x").exists());
}

#[test]
fn class2_a_dep_reaching_an_output_through_a_symlink_needs_its_writer() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo a > real/x\"], outs: [real/x]}\n  b: {uses: cmd, run: [sh, -c, \"cat link/x > o\"], deps: [link/x], outs: [o]}\n",
    );
    std::fs::create_dir(p.root().join("real")).unwrap();
    std::os::unix::fs::symlink("real", p.root().join("link")).unwrap();
    let out = p.expect(&["run", "-j", "2"], 2);
    assert!(
        out.contains("error: dep `link/x` (through a symlink: `real/x`) is written by stage `a`, which `b` does not need"),
        "{out}"
    );
}

#[test]
fn class3_a_deleted_empty_output_folder_is_stale_and_made_again() {
    let p = Project::new("version: 1\nstages:\n  s: {uses: cmd, run: [mkdir, -p, d], outs: [d]}\n");
    p.expect(&["run"], 0);
    std::fs::remove_dir(p.root().join("d")).unwrap();
    let status = p.expect(&["status"], 0);
    assert!(status.contains("output `d` missing"), "{status}");
    p.expect(&["run"], 0);
    assert!(p.root().join("d").is_dir());
    assert_eq!(p.states()["s"], "up-to-date");
}

#[test]
fn class3_a_stray_file_in_an_output_folder_is_reported_and_goes() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"mkdir -p d && echo a > d/a\"], outs: [d]}\n  t: {uses: cmd, needs: [s], run: [sh, -c, \"ls d > o\"], deps: [d], outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    p.write("d/stray", "x");
    let status = p.expect(&["status"], 0);
    assert!(status.contains("output `d/stray` added"), "{status}");
    p.expect(&["run"], 0);
    assert!(!p.root().join("d/stray").exists());
    assert_eq!(
        p.read("o"),
        "a\n",
        "the downstream stage never reads the stray file"
    );
}

#[test]
fn class5_a_process_a_stage_detaches_is_killed_before_its_outputs_are_sealed() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"setsid sh -c 'echo $$ > detached; sleep 2; echo late >> o' & while [ ! -s detached ]; do sleep 0.05; done; echo done > o\"], outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    // Killed when the stage ended, before its output was recorded.
    assert_gone(p.read("detached").trim());
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(p.read("o"), "done\n");
    assert_eq!(p.states()["s"], "up-to-date");
}

#[test]
fn class7_a_restore_never_follows_a_symlink_out_of_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o"), "theirs").unwrap();
    std::fs::write(outside.path().join("keep"), "keep").unwrap();
    // A first run writes d/o in a real folder.
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"mkdir -p d && echo mine > d/o\"], outs: [d/o]}\n",
    );
    p.expect(&["run"], 0);
    // Now the stage swaps its output's folder for a link out of the project, then fails.
    std::fs::write(
        p.root().join("pipeline.yaml"),
        format!(
            "version: 1\nstages:\n  s: {{uses: cmd, run: [sh, -c, \"rm -rf d && ln -s {} d && exit 3\"], outs: [d/o]}}\n",
            outside.path().display()
        ),
    )
    .unwrap();
    let out = p.expect(&["run"], 1);
    assert!(out.contains("removed the symlink `d`"), "{out}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("o")).unwrap(),
        "theirs"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep")).unwrap(),
        "keep"
    );
    assert!(!p.root().join("d").is_symlink());
    assert_eq!(
        p.read("d/o"),
        "mine\n",
        "the previous output is back where it was"
    );
}

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
fn class12_a_dangling_symlink_as_an_output_is_named() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [ln, -s, nowhere, o], outs: [o]}\n",
    );
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("the stage's output `o` is a symlink to `nowhere`, which does not exist"),
        "{out}"
    );
    assert!(
        !p.root().join("o").is_symlink(),
        "the failed stage's output is removed"
    );
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

#[test]
fn class13_a_failed_write_names_its_path_and_leaves_no_temporary_file() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"cat d* > o\"], deps: [d1, d2, d3, d4, d5, d6, d7, d8], outs: [o]}\n",
    );
    for k in 1..=8 {
        p.write(&format!("d{k}"), &format!("{k}\n"));
    }
    // Files may grow to 512 bytes (the lock and the stat cache are larger): writes fail as
    // on a full disk, with EFBIG instead of ENOSPC.
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            "trap '' XFSZ; ulimit -f 1; exec \"$0\" run",
            assert_cmd::cargo::cargo_bin("repro").to_str().unwrap(),
        ])
        .current_dir(p.root())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{text}");
    let failed: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("File too large"))
        .collect();
    assert!(!failed.is_empty(), "{text}");
    for line in failed {
        assert!(
            line.contains(".repro/") || line.contains("artifacts/"),
            "no path: {line}"
        );
    }
    let left: Vec<_> = files_under(p.root())
        .into_iter()
        .filter(|f| f.file_name().unwrap().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // With room again, the run completes.
    p.expect(&["run"], 0);
    assert_eq!(p.states()["s"], "up-to-date");
}

/// Every file under `dir`, `.repro/` included.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.is_symlink() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

// Issue 39 ("Hardening, round four"). Class C: values that lost information on the way
// into the fingerprint.

#[test]
fn class_c_non_finite_and_big_integer_params_keep_their_text() {
    let pipeline = |x: &str| {
        format!("version: 1\nstages:\n  s: {{uses: cmd, run: [sh, -c, \"echo $REPRO_PARAM_x > o\"], params: {{x: {x}}}, outs: [o]}}\n")
    };
    let p = Project::new(&pipeline(".inf"));
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), ".inf\n");
    for x in ["-.inf", ".nan", "123456789012345678901234567890"] {
        p.write("pipeline.yaml", &pipeline(x));
        assert_eq!(
            p.states()["s"],
            "stale",
            "{x}: {}",
            p.expect(&["status"], 0)
        );
        p.expect(&["run"], 0);
        assert_eq!(p.read("o"), format!("{x}\n"));
    }
}

#[test]
fn class_c_an_edit_of_a_file_whose_name_is_not_utf8_is_seen() {
    use std::os::unix::ffi::OsStrExt;
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"cat d/* > o\"], deps: [d], outs: [o]}\n",
    );
    let name = |b: &[u8]| p.root().join("d").join(std::ffi::OsStr::from_bytes(b));
    std::fs::create_dir(p.root().join("d")).unwrap();
    std::fs::write(name(b"caf\xe9"), "1\n").unwrap();
    std::fs::write(name(b"caf\xe8"), "2\n").unwrap();
    p.expect(&["run"], 0);
    let lock = p.read("artifacts/repro.lock");
    assert!(
        lock.contains(r"d/caf\xE8") && lock.contains(r"d/caf\xE9"),
        "{lock}"
    );
    // Whichever of the two a lossy name kept, an edit of the other went unseen.
    for (file, text) in [(b"caf\xe9", "3\n"), (b"caf\xe8", "4\n")] {
        std::fs::write(name(file), text).unwrap();
        assert_eq!(p.states()["s"], "stale", "{}", p.expect(&["status"], 0));
        p.expect(&["run"], 0);
    }
}

// Class G: I/O errors with no path, and state a stage can destroy.

const ONE_OUTPUT: &str =
    "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"echo v > o\"], outs: [o]}\n";

#[test]
fn class_g_a_stage_that_removes_repro_and_fails_shows_its_failure_and_what_was_lost() {
    let p = Project::new(ONE_OUTPUT);
    p.expect(&["run"], 0);
    p.write(
        "pipeline.yaml",
        &ONE_OUTPUT.replace("echo v > o", "rm -rf .repro; echo w > o; exit 3"),
    );
    let out = p.expect(&["run"], 1);
    assert!(out.contains("`sh` exited with code 3"), "{out}");
    assert!(
        out.contains("the stage removed the backup of its previous outputs")
            && out.contains("could not be put back: `o`")
            && out.contains("git checkout -- o"),
        "{out}"
    );
    assert!(!out.contains("os error 2"), "{out}");
}

#[test]
fn class_g_a_repro_folder_that_is_a_file_is_named_with_the_fix() {
    let p = Project::new(ONE_OUTPUT);
    p.write(".repro", "");
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains(".repro` is a file where a folder is needed: move it away"),
        "{out}"
    );
    assert!(!p.root().join("o").exists());
}

#[test]
fn class_g_a_state_folder_repro_cannot_write_is_named_with_the_fix() {
    let p = Project::new(ONE_OUTPUT);
    p.expect(&["run"], 0);
    p.write("pipeline.yaml", &ONE_OUTPUT.replace("echo v", "echo w"));
    // A file where the backup folder goes (tests run as root, who may write anywhere).
    std::fs::remove_dir_all(p.root().join(".repro/backup")).ok();
    p.write(".repro/backup", "");
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains(".repro/backup/s: Not a directory")
            && out.contains(".repro/backup` is a file where a folder is needed"),
        "{out}"
    );
    assert_eq!(p.read("o"), "v\n");
    std::fs::remove_file(p.root().join(".repro/backup")).unwrap();
    // A folder not even root may change: the logs', without the stage's log.
    let logs = p.root().join(".repro/logs");
    std::fs::remove_file(logs.join("s.log")).unwrap();
    let Some(out) = failed_run_with_immutable(&p, &logs) else {
        return;
    };
    assert!(
        out.contains(".repro/logs/s.log: Operation not permitted")
            && out.contains("this user may not change")
            && out.contains("chmod u+w"),
        "{out}"
    );
    assert_eq!(p.read("o"), "v\n");
}

#[test]
fn class_g_a_read_only_output_folder_is_named_with_the_fix() {
    let p = Project::new(&ONE_OUTPUT.replace("> o\"], outs: [o]", "> out/o\"], outs: [out/o]"));
    p.expect(&["run"], 0);
    p.write(
        "pipeline.yaml",
        &p.read("pipeline.yaml").replace("echo v", "echo w"),
    );
    let out_dir = p.root().join("out");
    let Some(out) = failed_run_with_immutable(&p, &out_dir) else {
        return;
    };
    assert!(
        out.contains("cannot back up output `out/o`")
            && out.contains(&format!("this user may not change `{}`", out_dir.display())),
        "{out}"
    );
    assert_eq!(p.read("out/o"), "v\n");
}

/// The output of a `repro run` that fails (exit 1) while `dir` is immutable, a folder not
/// even root may change; `None` (and a skip said) where the file system has no such flag.
fn failed_run_with_immutable(p: &Project, dir: &Path) -> Option<String> {
    if !chattr(dir, "+i") {
        skip::skipped(skip::Need::Other, "chattr +i is not supported here");
        return None;
    }
    let out = p.repro(&["run"]);
    chattr(dir, "-i");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    Some(text)
}

/// `chattr FLAG path`; whether it worked (not every file system has the flag).
fn chattr(path: &Path, flag: &str) -> bool {
    std::process::Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

// The lock's schema.

#[test]
fn a_lock_written_by_a_newer_repro_is_refused_and_nothing_runs() {
    let p = Project::new(ONE_OUTPUT);
    p.write(
        "artifacts/repro.lock",
        "version: 99\nstages:\n  s:\n    fingerprint: f\n    inputs: {kind: cmd, command: c}\n",
    );
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("artifacts/repro.lock:1:1: the lock was written by a newer repro (version 99"),
        "{out}"
    );
    assert!(!p.root().join("o").exists());
}

/// Issue 39 D: a `tools:` probe runs in the stage's environment, so the tool its `env:
/// {PATH}` finds is the one the lock records, whatever repro's own PATH finds first.
#[test]
fn d_a_tools_probe_runs_in_the_stages_environment() {
    let p = Project::new(
        "version: 1\nstages:\n  s:\n    uses: cmd\n    run: [sh, -c, \"tool > o\"]\n    outs: [o]\n    env: {PATH: \"v2:/usr/bin:/bin\"}\n    tools: {tool: [tool, --version]}\n",
    );
    for v in ["1", "2"] {
        p.write(
            &format!("v{v}/tool"),
            &format!("#!/bin/sh\necho tool {v}\n"),
        );
        let path = p.root().join(format!("v{v}/tool"));
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let repros_path = format!(
        "{}:{}",
        p.root().join("v1").display(),
        std::env::var("PATH").unwrap()
    );
    let out = p
        .command(&["run"])
        .env("PATH", repros_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(p.read("o"), "tool 2\n");
    let lock = repro::engine::lockfile::LockFile::load(p.root()).unwrap();
    assert_eq!(lock.stages["s"].inputs.tools["tool"], "tool 2");
}

/// Issue 39 D, with the real pyenv where there is one: a `.python-version` switch behind
/// the `python3` shim (whose file never changes) makes the stage stale with the new version.
#[test]
fn d_a_pyenv_switch_behind_the_shim_is_seen() {
    let versions = std::process::Command::new("pyenv")
        .args(["versions", "--bare"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let versions: Vec<&str> = versions
        .lines()
        .map(str::trim)
        .filter(|v| v.starts_with("3."))
        .collect();
    let shim = which::which("python3").unwrap_or_default();
    if versions.len() < 2 || !shim.to_string_lossy().contains("/shims/") {
        skip::say_skipped("needs pyenv's python3 shim on PATH with two Python 3 versions");
        return;
    }
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"python3 --version > o\"], outs: [o], tools: {python: [python3, --version]}}\n",
    );
    p.write(".python-version", &format!("{}\n", versions[0]));
    p.expect(&["run"], 0);
    p.write(".python-version", &format!("{}\n", versions[1]));
    let status = p.expect(&["status"], 0);
    assert!(
        status.contains(&format!("Python {}", versions[1])),
        "the switch is seen: {status}"
    );
    p.expect(&["run"], 0);
    assert_eq!(p.read("o"), format!("Python {}\n", versions[1]));
    let lock = repro::engine::lockfile::LockFile::load(p.root()).unwrap();
    assert_eq!(
        lock.stages["s"].inputs.tools["python"],
        format!("Python {}", versions[1])
    );
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

#[test]
fn round4_a_a_dep_resolving_to_the_whole_project_is_refused_however_it_is_written() {
    let p = Project::new("version: 1\nstages: {}\n");
    std::fs::create_dir(p.root().join(".git")).unwrap();
    let root = p.root().canonicalize().unwrap();
    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    let cases = [
        (root.display().to_string(), "resolves to the project folder"),
        (format!("../{name}"), "resolves to the project folder"),
        (
            format!("{}/.git", root.display()),
            "resolves to `.git` in the project",
        ),
        ("..".to_string(), "resolves to a folder holding the project"),
    ];
    for (dep, says) in cases {
        p.write(
            "pipeline.yaml",
            &format!(
                "version: 1\nstages:\n  s: {{uses: cmd, run: [\"true\"], deps: [\"{dep}\"]}}\n"
            ),
        );
        let out = p.expect(&["run"], 2);
        assert!(
            out.contains(&format!("dep `{dep}` of stage `s` {says}")),
            "{out}"
        );
        assert!(!p.root().join("artifacts").exists(), "{dep}: something ran");
    }
    // A file of the project written by its absolute path is a dep as before.
    p.write("d", "d");
    p.write(
        "pipeline.yaml",
        &format!(
            "version: 1\nstages:\n  s: {{uses: cmd, run: [\"true\"], deps: [\"{}/d\"]}}\n",
            root.display()
        ),
    );
    p.expect(&["run"], 0);
    assert_eq!(p.states()["s"], "up-to-date");
}

#[test]
fn round4_e_links_among_the_results_are_named_never_followed() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"mkdir -p artifacts/out && echo a > artifacts/out/a.txt\"], outs: [artifacts/out]}\n",
    );
    p.write("src.rs", "source");
    p.expect(&["run"], 0);
    for (link, target) in [
        ("artifacts/a", "."),
        ("artifacts/b", "."),
        ("artifacts/loop", ".."),
        ("artifacts/root", "/"),
        ("artifacts/out/root", "/"),
    ] {
        std::os::unix::fs::symlink(target, p.root().join(link)).unwrap();
    }
    // The output folder's walk records the link, by its target, without going to `/`.
    let status = p.expect(&["status"], 0);
    assert!(
        status.contains("output `artifacts/out/root` added"),
        "{status}"
    );
    let verify = p.expect(&["verify"], 1);
    for link in ["artifacts/a", "artifacts/loop", "artifacts/root"] {
        assert!(
            verify.contains(&format!("remove the link: `rm -- {link}`")),
            "{verify}"
        );
    }
    // Nothing through a link, nothing outside the results; the real file is not "missing".
    assert!(!verify.contains("artifacts/loop/"), "{verify}");
    assert!(!verify.contains("src.rs"), "{verify}");
    assert!(!verify.contains("is missing"), "{verify}");
}
