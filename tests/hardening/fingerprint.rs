//! The cache never fooled: old mtimes, outputs met through links, exact values, probed tools.

use super::*;

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
