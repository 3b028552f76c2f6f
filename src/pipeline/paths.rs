//! Output paths must stay inside the project: no absolute paths, no `..`, no symlink that
//! leads out, and nothing repro or git keep: `.repro/` (but `.repro/cubins/`), the lock
//! file or a folder holding it, `.git`, and the pipeline file itself ([`check_not_reserved`]):
//! a stage's outputs are moved aside and deleted when it runs or fails.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Where repro keeps its lock of stage fingerprints (committed).
pub const LOCK_FILE: &str = "artifacts/repro.lock";
/// The summary's manifest: the environment and commit the results were made in.
pub const MANIFEST_FILE: &str = "artifacts/manifest.yaml";
/// The folders that hold a run's results, committed by `repro commit`.
pub const RESULT_DIRS: [&str; 2] = ["artifacts", "reports"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    Empty,
    Absolute,
    ParentDir,
    /// A symlink on the way (named, relative to the root) points outside the project.
    SymlinkOut(PathBuf),
    /// Under `.repro/` but not `.repro/cubins/` (where built-in kinds keep binaries), the
    /// lock file or a folder holding it, `.git`, or the pipeline file: what it is.
    Reserved(&'static str),
}

impl fmt::Display for PathProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathProblem::Empty => write!(f, "is empty"),
            PathProblem::Absolute => {
                write!(f, "is an absolute path, outside the project directory")
            }
            PathProblem::ParentDir => write!(f, "uses `..` and leaves the project directory"),
            PathProblem::SymlinkOut(link) => write!(
                f,
                "leads outside the project directory through the symlink `{}`",
                link.display()
            ),
            PathProblem::Reserved(what) => write!(f, "is {what}"),
        }
    }
}

/// Check an output path written relative to `root` and return it as a clean relative path.
pub fn check_output(root: &Path, rel: &str) -> Result<PathBuf, PathProblem> {
    let path = check_relative(rel)?;
    check_not_reserved(&path, None)?;
    check_no_symlink_out(root, &path)?;
    Ok(path)
}

/// `path` (clean, relative) is none of the places an output may not be; `pipeline_file`
/// is the pipeline file's name in the project root, when known.
pub fn check_not_reserved(path: &Path, pipeline_file: Option<&Path>) -> Result<(), PathProblem> {
    let first = path.components().next();
    let cubins = Path::new(".repro/cubins");
    if first == Some(Component::Normal(".repro".as_ref()))
        && !(path.starts_with(cubins) && path != cubins)
    {
        return Err(PathProblem::Reserved(
            "a place repro manages itself (`.repro/`)",
        ));
    }
    if Path::new(LOCK_FILE).starts_with(path) {
        return Err(PathProblem::Reserved(
            "repro's lock file, or a folder holding it",
        ));
    }
    if first == Some(Component::Normal(".git".as_ref())) {
        return Err(PathProblem::Reserved("git's repository (`.git`)"));
    }
    if pipeline_file.is_some_and(|p| p == path) {
        return Err(PathProblem::Reserved("the pipeline file itself"));
    }
    Ok(())
}

/// A relative path without `..`, `.` removed.
pub fn check_relative(rel: &str) -> Result<PathBuf, PathProblem> {
    if rel.trim().is_empty() {
        return Err(PathProblem::Empty);
    }
    let mut clean = PathBuf::new();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(PathProblem::ParentDir),
            Component::RootDir | Component::Prefix(_) => return Err(PathProblem::Absolute),
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(PathProblem::Empty);
    }
    Ok(clean)
}

/// Every existing prefix of `rel` that is a symlink must resolve inside `root`.
pub fn check_no_symlink_out(root: &Path, rel: &Path) -> Result<(), PathProblem> {
    let Ok(real_root) = root.canonicalize() else {
        return Ok(());
    };
    let mut prefix = PathBuf::new();
    for c in rel.components() {
        prefix.push(c);
        let full = root.join(&prefix);
        match std::fs::symlink_metadata(&full) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let inside = full
                    .canonicalize()
                    .map(|t| t.starts_with(&real_root))
                    // A dangling link: judge by where it points.
                    .unwrap_or_else(|_| {
                        std::fs::read_link(&full)
                            .map(|t| {
                                t.is_relative() && check_relative(&t.to_string_lossy()).is_ok()
                            })
                            .unwrap_or(false)
                    });
                if !inside {
                    return Err(PathProblem::SymlinkOut(prefix));
                }
            }
            Ok(_) => {}
            Err(_) => return Ok(()), // nothing further exists yet
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(check_output(root, "../x"), Err(PathProblem::ParentDir));
        assert_eq!(check_output(root, "a/../../x"), Err(PathProblem::ParentDir));
        assert_eq!(check_output(root, "/etc/x"), Err(PathProblem::Absolute));
        for reserved in [
            ".repro/logs/x",
            ".repro",
            ".repro/cubins",
            LOCK_FILE,
            "artifacts",
            "./artifacts/",
            ".git",
            ".git/x",
            "./.git/HEAD",
        ] {
            assert!(
                matches!(check_output(root, reserved), Err(PathProblem::Reserved(_))),
                "{reserved}"
            );
        }
        assert!(check_output(root, "artifacts/x").is_ok());
        assert!(check_output(root, ".gitignore").is_ok());
        assert_eq!(
            check_not_reserved(Path::new("p.yaml"), Some(Path::new("p.yaml"))),
            Err(PathProblem::Reserved("the pipeline file itself"))
        );
        assert_eq!(
            check_output(root, "./out/a.txt"),
            Ok(PathBuf::from("out/a.txt"))
        );
        assert_eq!(
            check_output(root, ".repro/cubins/v.cubin"),
            Ok(PathBuf::from(".repro/cubins/v.cubin"))
        );
    }

    #[test]
    fn rejects_symlinks_leading_out() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", dir.path().join("inner")).unwrap();
        assert_eq!(
            check_output(dir.path(), "link/x"),
            Err(PathProblem::SymlinkOut("link".into()))
        );
        assert!(check_output(dir.path(), "inner/x").is_ok());
    }
}
