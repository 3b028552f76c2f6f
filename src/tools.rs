//! Versions of the external tools stages call (nvcc, ncu, python, ...), for fingerprints
//! and the manifest. A probe runs `<tool> --version` once and caches the answer under
//! `.repro/cache/tools/`, keyed by the binary's path, size and modification time (and those
//! of any argument that is a file), so `repro status` does not start compilers. A version
//! that changes without its binary changing (a package installed into the same python)
//! is seen once `.repro/cache/tools/` is removed.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tool found on this machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub path: PathBuf,
    /// The first line of its version output that `pick` chose (trimmed).
    pub version: String,
}

/// Find `program` (a name looked up on PATH, or a path) and read its version: run it with
/// `args`, and keep the line for which `pick` returns true (the last non-empty line if
/// none does). `None` when the program is not found or fails.
pub fn probe(
    root: &Path,
    program: &str,
    args: &[&str],
    pick: impl Fn(&str) -> bool,
) -> Option<Tool> {
    let path = which::which(program).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    // Arguments that are files (a script the tool runs) are part of the key too.
    let arg_files: String = args
        .iter()
        .filter_map(|a| std::fs::metadata(root.join(a)).ok().map(|m| (a, m)))
        .filter(|(_, m)| m.is_file())
        .map(|(a, m)| format!("{a}:{}:{:?}\0", m.len(), m.modified().ok()))
        .collect();
    let key = hex(&Sha256::digest(
        format!(
            "{}\0{}\0{}\0{}\0{arg_files}",
            path.display(),
            meta.len(),
            mtime,
            args.join("\0")
        )
        .as_bytes(),
    ));
    let cache = root.join(".repro/cache/tools").join(&key);
    if let Ok(version) = std::fs::read_to_string(&cache) {
        return Some(Tool { path, version });
    }
    let out = Command::new(&path)
        .args(args)
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
    let version = lines.iter().find(|l| pick(l)).or(lines.last())?.to_string();
    if let Some(dir) = cache.parent() {
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(&cache, &version);
    }
    Some(Tool { path, version })
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
