//! Versions of the external tools stages call (nvcc, ncu, python, ...), for fingerprints
//! and the manifest. A probe runs `<tool> --version` (or the command a stage declares) in
//! the stage's environment — its `env:` over repro's, in the project root — once, and
//! caches the answer, a version or a failure, under `.repro/cache/tools/`, so `repro
//! status` neither starts compilers nor retries an `import torch` that failed.
//!
//! The cache key ([`cache_key`]) is what can change the answer without the command
//! changing: the program found on the stage's `PATH` (its real file: size, mtime, ctime,
//! inode) and the folder it is in (a `pip install` that adds a command, or a version
//! manager's rehash, changes it), files among the arguments, the stage's `env:`, the
//! variables that choose an interpreter ([`ANSWER_VARS`], and any `*_VERSION`), and the
//! version managers' files (`.python-version`, `.tool-versions` from the project root up,
//! pyenv's global `version`). A version that changes without any of these changing (a
//! package installed into the same python, adding no command) is seen once
//! `.repro/cache/tools/` is removed.

use crate::fsio::identity;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the probe cache lives, under the project root.
const CACHE_DIR: &str = ".repro/cache/tools";

/// Variables that choose which interpreter or library a program name runs without the
/// program's file changing (shims, virtual environments, search paths). Any variable
/// whose name ends in `_VERSION` (`PYENV_VERSION`, `ASDF_PYTHON_VERSION`) counts too.
const ANSWER_VARS: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
];

/// Version managers' files, looked for in the project root and every folder above it.
const VERSION_FILES: &[&str] = &[".python-version", ".tool-versions"];

/// A tool found on this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub path: PathBuf,
    /// The first line of its version output that `pick` chose (trimmed).
    pub version: String,
}

/// [`probe_in`] with repro's own environment (the built-in stages' tools).
pub fn probe(
    root: &Path,
    program: &str,
    args: &[&str],
    pick: impl Fn(&str) -> bool,
) -> Option<Tool> {
    probe_in(root, &BTreeMap::new(), program, args, pick)
}

/// Find `program` (a name looked up on the stage's PATH, or a path) and read its version:
/// run it with `args` and the variables of `env` set over repro's, in `root`, and keep the
/// line for which `pick` returns true (the last non-empty line if none does). `None` when
/// the program is not found or fails; both answers are cached.
pub fn probe_in(
    root: &Path,
    env: &BTreeMap<String, String>,
    program: &str,
    args: &[&str],
    pick: impl Fn(&str) -> bool,
) -> Option<Tool> {
    let path = which::which_in(program, search_path(root, env), root).ok()?;
    let cache = root
        .join(CACHE_DIR)
        .join(cache_key(root, env, &path, args)?);
    let version = match std::fs::read(&cache)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Option<String>>(&bytes).ok())
    {
        Some(answer) => answer,
        None => {
            let answer = run_probe(root, env, &path, args, pick);
            // A cache that cannot be written only costs the next call a probe.
            let _ =
                serde_json::to_vec(&answer).map(|bytes| crate::fsio::write_atomic(&cache, &bytes));
            answer
        }
    };
    version.map(|version| Tool { path, version })
}

/// The PATH a stage's processes search: its `env:`'s, else repro's; relative folders are
/// taken from the project root, where the stage runs.
fn search_path(root: &Path, env: &BTreeMap<String, String>) -> Option<OsString> {
    let path = env_value(env, "PATH")?;
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .map(|d| if d.is_relative() { root.join(d) } else { d })
        .collect();
    std::env::join_paths(dirs).ok()
}

/// The probe's cache key (see the module doc); `None` when the program cannot be read.
fn cache_key(
    root: &Path,
    env: &BTreeMap<String, String>,
    path: &Path,
    args: &[&str],
) -> Option<String> {
    let mut h = Sha256::new();
    let real = std::fs::canonicalize(path).ok()?;
    for part in [path, real.as_path()] {
        h.update(format!("{}\0", part.display()));
    }
    h.update(identity(&std::fs::metadata(&real).ok()?));
    if let Some(meta) = path.parent().and_then(|d| std::fs::metadata(d).ok()) {
        h.update(identity(&meta));
    }
    h.update(args.join("\0"));
    // Arguments that are files (a script the tool runs) are part of the key too.
    for (arg, meta) in args
        .iter()
        .filter_map(|a| std::fs::metadata(root.join(a)).ok().map(|m| (a, m)))
        .filter(|(_, m)| m.is_file())
    {
        h.update(format!("\0{arg}:{}", identity(&meta)));
    }
    for (name, value) in answer_env(env) {
        h.update(format!("\0{name}={}", value.to_string_lossy()));
    }
    for (file, text) in version_files(root, env) {
        h.update(format!("\0{}:", file.display()));
        h.update(text);
    }
    Some(hex(&h.finalize()))
}

/// The value a probe sees of a variable: the stage's `env:`, else repro's.
fn env_value(env: &BTreeMap<String, String>, name: &str) -> Option<OsString> {
    env.get(name)
        .map(OsString::from)
        .or_else(|| std::env::var_os(name))
}

/// The stage's `env:` and the values the probe sees of the variables that choose an
/// interpreter ([`ANSWER_VARS`], `*_VERSION`), by name.
fn answer_env(env: &BTreeMap<String, String>) -> BTreeMap<String, OsString> {
    let versions = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .chain(env.keys().cloned())
        .filter(|k| k.ends_with("_VERSION"));
    let names = ANSWER_VARS.iter().map(|s| s.to_string()).chain(versions);
    let mut out: BTreeMap<String, OsString> = names
        .filter_map(|name| env_value(env, &name).map(|v| (name, v)))
        .collect();
    out.extend(env.iter().map(|(k, v)| (k.clone(), OsString::from(v))));
    out
}

/// The version managers' files that can choose the interpreter a shim runs, with their
/// text: [`VERSION_FILES`] from `root` up, pyenv's global `version` and `~/.tool-versions`.
fn version_files(root: &Path, env: &BTreeMap<String, String>) -> Vec<(PathBuf, Vec<u8>)> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let home = env_value(env, "HOME").map(PathBuf::from);
    let pyenv_root = env_value(env, "PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
    let local = root
        .ancestors()
        .flat_map(|dir| VERSION_FILES.iter().map(move |f| dir.join(f)));
    let global = [
        pyenv_root.map(|p| p.join("version")),
        home.map(|h| h.join(".tool-versions")),
    ];
    local
        .chain(global.into_iter().flatten())
        .filter_map(|file| std::fs::read(&file).ok().map(|text| (file, text)))
        .collect()
}

/// Run the probe (see [`probe_in`]) and pick its version line; `None` when it fails.
fn run_probe(
    root: &Path,
    env: &BTreeMap<String, String>,
    path: &Path,
    args: &[&str],
    pick: impl Fn(&str) -> bool,
) -> Option<String> {
    let out = Command::new(path)
        .args(args)
        .envs(env)
        .current_dir(root)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .find(|l| pick(l))
        .or(lines.last())
        .map(|l| l.to_string())
}

/// Lower-case hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The version recorded for a declared tool that is not there.
pub const MISSING_TOOL: &str = "missing";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_caches_a_real_tool() {
        let dir = tempfile::tempdir().unwrap();
        let tool = probe(
            dir.path(),
            "sh",
            &["-c", "echo noise; echo tool 1.2.3"],
            |l| l.starts_with("tool"),
        )
        .unwrap();
        assert_eq!(tool.version, "tool 1.2.3");
        let cached = std::fs::read_dir(dir.path().join(".repro/cache/tools"))
            .unwrap()
            .count();
        assert_eq!(cached, 1);
    }

    /// Write an executable shell script at `dir/rel`.
    fn script(dir: &Path, rel: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn version_in(root: &Path, env: &BTreeMap<String, String>, program: &str) -> Option<String> {
        probe_in(root, env, program, &["--version"], |_| true).map(|t| t.version)
    }

    #[test]
    fn a_failed_probe_is_cached_like_a_successful_one() {
        let dir = tempfile::tempdir().unwrap();
        let failing = ["-c", "echo ran >> probes; exit 1"];
        for _ in 0..3 {
            assert!(probe(dir.path(), "sh", &failing, |_| true).is_none());
        }
        let ran = std::fs::read_to_string(dir.path().join("probes")).unwrap();
        assert_eq!(ran.lines().count(), 1, "a failure is asked once: {ran:?}");
    }

    #[test]
    fn the_probe_runs_with_the_stages_path_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for v in ["1", "2"] {
            script(
                root,
                &format!("v{v}/tool"),
                &format!("echo tool {v} $FLAVOUR"),
            );
        }
        let v2 = env(&[("PATH", "v2:/usr/bin:/bin"), ("FLAVOUR", "plain")]);
        let tool = probe_in(root, &v2, "tool", &["--version"], |_| true).unwrap();
        assert_eq!(tool.version, "tool 2 plain");
        assert_eq!(tool.path, root.join("v2/tool"));
        let v1 = env(&[("PATH", "v1:/usr/bin:/bin"), ("FLAVOUR", "plain")]);
        assert_eq!(version_in(root, &v1, "tool").unwrap(), "tool 1 plain");
        // Another value of a stage's variable is another answer, not the cached one.
        let salted = env(&[("PATH", "v2:/usr/bin:/bin"), ("FLAVOUR", "salted")]);
        assert_eq!(version_in(root, &salted, "tool").unwrap(), "tool 2 salted");
        assert_eq!(version_in(root, &v2, "tool").unwrap(), "tool 2 plain");
    }

    /// A version manager's shim: its file never changes, the interpreter it runs does.
    #[test]
    fn a_shims_switch_of_version_is_seen_and_an_ordinary_call_hits_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("project");
        let shims = dir.path().join("shims");
        script(
            &shims,
            "py",
            "echo probed >> \"$COUNT\"\nv=${PYENV_VERSION:-$(cat .python-version 2>/dev/null || echo 3.0)}\necho Python $v",
        );
        std::fs::create_dir_all(&root).unwrap();
        let count = dir.path().join("count");
        let path = format!("{}:/usr/bin:/bin", shims.display());
        let base = [("PATH", path.as_str()), ("COUNT", count.to_str().unwrap())];
        let plain = env(&base);
        assert_eq!(version_in(&root, &plain, "py").unwrap(), "Python 3.0");
        std::fs::write(root.join(".python-version"), "3.12\n").unwrap();
        assert_eq!(version_in(&root, &plain, "py").unwrap(), "Python 3.12");
        let pinned = env(&[base[0], base[1], ("PYENV_VERSION", "3.10")]);
        assert_eq!(version_in(&root, &pinned, "py").unwrap(), "Python 3.10");
        let probes = || std::fs::read_to_string(&count).unwrap().lines().count();
        assert_eq!(probes(), 3);
        for _ in 0..3 {
            assert_eq!(version_in(&root, &plain, "py").unwrap(), "Python 3.12");
        }
        assert_eq!(probes(), 3, "nothing changed: every call read the cache");
    }

    #[test]
    fn missing_tool_is_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            probe(dir.path(), "surely-not-a-tool-xyz", &["--version"], |_| {
                true
            })
            .is_none()
        );
    }
}
