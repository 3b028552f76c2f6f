//! A reference command (`reference: {run: [...]}`) on one case: the case written to a
//! folder ([`super::case`]), the command run on it from the project root, its outputs read
//! back. Kept under `.repro/cache/reference/<digest>/`, the digest covering the case's
//! files, the command's words and the contents of the project files it names, so a case is
//! computed once until one of them changes.

use super::case;
use super::inputs::Case;
use super::spec::Declaration;
use anyhow::{bail, Context as _};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the outputs are kept, under the project root.
pub const CACHE_DIR: &str = ".repro/cache/reference";

/// The expected outputs of `case` of workload `name` (ABI order), from the command `run`
/// executed as `run... --case CASE --out OUT` in the project `root`.
pub fn expected(
    root: &Path,
    name: &str,
    decl: &Declaration,
    case: &Case,
    run: &[String],
) -> anyhow::Result<Vec<Vec<f64>>> {
    let cache = root.join(CACHE_DIR);
    let scratch = Scratch::new(&cache)?;
    let case_dir = scratch.0.join("case");
    case::write(&case_dir, name, decl, case)?;
    let kept = cache.join(digest(root, &case_dir, run)?);
    if let Ok(values) = case::read_expected(&kept, decl, case) {
        return Ok(values);
    }
    let out = scratch.0.join("out");
    create(&out)?;
    let program = match run.first() {
        Some(p) if p.contains('/') && root.join(p).is_file() => root.join(p),
        Some(p) => PathBuf::from(p),
        None => bail!("the reference command of workload `{name}` is empty"),
    };
    let ran = std::process::Command::new(&program)
        .args(&run[1..])
        .arg("--case")
        .arg(&case_dir)
        .arg("--out")
        .arg(&out)
        .current_dir(root)
        .output()
        .with_context(|| format!("cannot run the reference command `{}`", run.join(" ")))?;
    if !ran.status.success() {
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        bail!(
            "the reference command `{}` failed ({}) on shape `{}`, recipe `{}`, seed {}: {}",
            run.join(" "),
            ran.status,
            case.shape,
            case.recipe,
            case.seed,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    let values = case::read_expected(&out, decl, case).map_err(anyhow::Error::msg)?;
    // A concurrent worker may have kept the same case first: either copy is the same.
    let _ = std::fs::rename(&out, &kept);
    Ok(values)
}

/// A folder of this process under the cache, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(cache: &Path) -> anyhow::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = cache.join(format!("tmp-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        create(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn create(dir: &Path) -> anyhow::Result<&Path> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// What the expected outputs depend on: the case folder's files (names and bytes), the
/// command's words, and the bytes of every word that names a file of the project.
fn digest(root: &Path, case_dir: &Path, run: &[String]) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(case_dir)
        .with_context(|| format!("cannot read {}", case_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    for f in files {
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update([0]);
        h.update(std::fs::read(&f).with_context(|| format!("cannot read {}", f.display()))?);
    }
    for word in run {
        h.update(word.as_bytes());
        h.update([0]);
        if let Ok(bytes) = std::fs::read(root.join(word)) {
            h.update(bytes);
        }
    }
    Ok(repro_base::tools::hex(&h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::exprs::Compiled;
    use crate::workload::testing::rmsnorm;

    /// A command that writes each output as `value` (f64), counting its runs in `runs`.
    fn script(dir: &Path, value: f64) -> Vec<String> {
        let path = dir.join("ref.sh");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\n# {value}\necho run >> runs\nout=$4\npython3 -c \"import struct,sys; sys.stdout.buffer.write(struct.pack('<d', {value}) * (4 * 1024))\" > $out/y.f64\n"
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        vec!["./ref.sh".into()]
    }

    #[test]
    fn a_case_is_computed_once_until_the_command_changes() {
        if !crate::workload::testing::python3_or_skip(
            "a_case_is_computed_once_until_the_command_changes",
        ) {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let case = Case::generate(&c, "small", "gaussian", 0).unwrap();
        let run = script(root.path(), 1.5);
        let runs = || {
            std::fs::read_to_string(root.path().join("runs"))
                .unwrap()
                .lines()
                .count()
        };
        let got = expected(root.path(), "rmsnorm", &decl, &case, &run).unwrap();
        assert_eq!((got[0].len(), got[0][7]), (4096, 1.5));
        expected(root.path(), "rmsnorm", &decl, &case, &run).unwrap();
        assert_eq!(runs(), 1, "the second call reads the kept outputs");
        let other = Case::generate(&c, "small", "gaussian", 1).unwrap();
        expected(root.path(), "rmsnorm", &decl, &other, &run).unwrap();
        assert_eq!(runs(), 2, "another seed is another case");
        let run = script(root.path(), 2.5);
        let got = expected(root.path(), "rmsnorm", &decl, &case, &run).unwrap();
        assert_eq!((runs(), got[0][0]), (3, 2.5), "an edited script runs again");
    }

    #[test]
    fn a_failing_command_says_which_case_and_why() {
        let root = tempfile::tempdir().unwrap();
        let decl = rmsnorm();
        let c = Compiled::new("rmsnorm", &decl, &[]).unwrap();
        let case = Case::generate(&c, "small", "tiny", 2).unwrap();
        let run = vec!["sh".into(), "-c".into(), "echo broken >&2; exit 3".into()];
        let err = expected(root.path(), "rmsnorm", &decl, &case, &run)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("shape `small`, recipe `tiny`, seed 2") && err.ends_with("broken"),
            "{err}"
        );
    }
}
