//! `git` as a test runs it: the command line in a folder, which must succeed.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// `git ARGS` in `root`; its stdout. Panics, with git's output, when it fails.
pub fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
