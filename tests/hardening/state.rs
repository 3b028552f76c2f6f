//! I/O errors that name their path, state a stage can destroy, and the lock's schema.

use super::*;

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
