//! A temporary `repro` project for the integration tests that run the real binary:
//! write files, run or spawn `repro`, read states, and watch processes.
#![allow(dead_code)]

use assert_cmd::Command;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    pub fn new(pipeline: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pipeline.yaml"), pipeline).unwrap();
        Project { dir }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// `repro ARGS` in the project, with a 60 s limit (change it with `.timeout`).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("repro").unwrap();
        cmd.args(args)
            .current_dir(self.root())
            .timeout(Duration::from_secs(60));
        cmd
    }

    pub fn repro(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().unwrap()
    }

    /// Run and expect exit code `code`; return stdout + stderr.
    pub fn expect(&self, args: &[&str], code: i32) -> String {
        let out = self.repro(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "repro {args:?}:\n{text}");
        text
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("repro"))
            .args(args)
            .current_dir(self.root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Stage name → state, from `repro status --json`.
    pub fn states(&self) -> BTreeMap<String, String> {
        let out = self.expect(&["status", "--json"], 0);
        let json = out.split_once('[').map(|(_, r)| format!("[{r}")).unwrap();
        let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
        rows.iter()
            .map(|r| {
                (
                    r["stage"].as_str().unwrap().to_string(),
                    r["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Every file under the project (but `.repro/cache`) with its contents.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.ends_with(".repro/cache") {
                    continue;
                }
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    out.insert(
                        p.strip_prefix(root).unwrap().to_path_buf(),
                        std::fs::read(&p).unwrap(),
                    );
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.root(), self.root(), &mut out);
        out
    }

    pub fn wait_for(&self, rel: &str) {
        let start = Instant::now();
        while !self.root().join(rel).exists() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{rel} never appeared"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The process is gone (or a zombie nobody reaped yet: it no longer runs).
pub fn assert_gone(pid: &str) {
    let start = Instant::now();
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let running = state
            .as_deref()
            .is_some_and(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'));
        if !running {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "process {pid} is still running"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn send_signal(pid: u32, signal: i32) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}
