//! Paths in the project. Outputs must stay inside it: no absolute paths, no `..`, no symlink
//! that leads out, and nothing repro or git keep: `.repro/` (but `.repro/cubins/`), the lock
//! file, a folder holding it or anything under it, `.git`, and the pipeline file itself
//! ([`check_not_reserved`]): a stage's outputs are moved aside and deleted when it runs or
//! fails.
//!
//! A [`Resolver`] reads paths through the symlinks on their way, within the project, so that
//! two spellings of one file (`real/x` and `link/x` with `link -> real`) are one path for
//! the overlap, ordering and cycle checks.

use foldhash::HashMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Where repro keeps its lock of stage fingerprints (committed).
pub const LOCK_FILE: &str = "artifacts/repro.lock";
/// The summary's manifest: the environment and commit the results were made in.
pub const MANIFEST_FILE: &str = "artifacts/manifest.yaml";
/// The folders that hold a run's results, committed by `repro commit`.
pub const RESULT_DIRS: [&str; 2] = ["artifacts", "reports"];
/// Where repro keeps its machine-local state (never committed).
pub const STATE_DIR: &str = ".repro";
/// The one place under [`STATE_DIR`] built-in kinds write outputs (compiled binaries).
pub const CUBIN_DIR: &str = ".repro/cubins";
/// Deps under here are machine-local (cubins): a fresh clone has none. `repro verify`
/// checks them against the lock entry of the stage that wrote them instead.
pub const MACHINE_LOCAL: &str = ".repro/";

/// How many symlinks one path may go through (as the kernel's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    Empty,
    Absolute,
    ParentDir,
    /// A control character (a newline, a tab, an escape): it would break the line-based
    /// lists repro keeps, and what a terminal shows.
    Control,
    /// A symlink on the way (named, relative to the root) points outside the project.
    SymlinkOut(PathBuf),
    /// Symlinks on the way (from the one named) lead to each other without end.
    SymlinkLoop(PathBuf),
    /// Under `.repro/` but not `.repro/cubins/` (where built-in kinds keep binaries), the
    /// lock file, a folder holding it or a path under it, `.git`, or the pipeline file (or a
    /// path under it): what it is.
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
            PathProblem::Control => write!(f, "holds a control character"),
            PathProblem::SymlinkOut(link) => write!(
                f,
                "leads outside the project directory through the symlink `{}`",
                link.display()
            ),
            PathProblem::SymlinkLoop(link) => {
                write!(f, "goes through a loop of symlinks at `{}`", link.display())
            }
            PathProblem::Reserved(what) => write!(f, "is {what}"),
        }
    }
}

/// Check an output path written relative to `root` and return it as a clean relative path,
/// its folders resolved through the symlinks on the way (see [`Resolver`]).
pub fn check_output(root: &Path, rel: &str) -> Result<PathBuf, PathProblem> {
    let path = check_relative(rel)?;
    check_not_reserved(&path, None)?;
    let resolved = Resolver::new(root).resolve_parent(&path)?;
    check_not_reserved(&resolved, None)?;
    Ok(resolved)
}

/// `path` (clean, relative) is none of the places an output may not be; `pipeline_file`
/// is the pipeline file's name in the project root, when known.
pub fn check_not_reserved(path: &Path, pipeline_file: Option<&Path>) -> Result<(), PathProblem> {
    if path.starts_with(STATE_DIR) && !(path.starts_with(CUBIN_DIR) && path != Path::new(CUBIN_DIR))
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
    if path.starts_with(LOCK_FILE) {
        return Err(PathProblem::Reserved(
            "under repro's lock file (a run would turn the lock into a folder)",
        ));
    }
    if path.starts_with(".git") {
        return Err(PathProblem::Reserved("git's repository (`.git`)"));
    }
    if path.components().any(|c| c.as_os_str() == ".git") {
        return Err(PathProblem::Reserved(
            "in a nested git repository (`.git`), which a stage's outputs must not change",
        ));
    }
    if pipeline_file.is_some_and(|p| path.starts_with(p)) {
        return Err(PathProblem::Reserved("the pipeline file itself"));
    }
    Ok(())
}

/// A relative path without `..`, `.` removed, and no control characters.
pub fn check_relative(rel: &str) -> Result<PathBuf, PathProblem> {
    if rel.trim().is_empty() {
        return Err(PathProblem::Empty);
    }
    if rel.chars().any(char::is_control) {
        return Err(PathProblem::Control);
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

/// The first folder on the way to `rel` (clean, relative to `root`) that is a symlink, if
/// any: a delete, move or restore there would act wherever the link points.
pub fn symlink_on_the_way(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    let parent = rel.parent()?;
    for c in parent.components() {
        prefix.push(c);
        match std::fs::symlink_metadata(root.join(&prefix)) {
            Ok(meta) if meta.file_type().is_symlink() => return Some(prefix),
            Ok(_) => {}
            Err(_) => return None, // nothing further exists
        }
    }
    None
}

/// Reads clean relative paths through the symlinks on their way, within the project:
/// with `link -> real`, `link/x` is `real/x`. A link that leads out of the project (or
/// nowhere) is judged by where it points: outside is an error. Folders are resolved once
/// and remembered, so resolving many paths in one folder costs at most one `lstat` each
/// (none for [`Resolver::resolve_parent`]).
#[derive(Debug)]
pub struct Resolver {
    root: PathBuf,
    /// The project root with its own symlinks resolved (absolute link targets are compared
    /// with it and with `root`).
    real_root: Option<PathBuf>,
    /// Folder as written → folder resolved.
    folders: HashMap<PathBuf, Result<PathBuf, PathProblem>>,
}

impl Resolver {
    pub fn new(root: &Path) -> Resolver {
        Resolver {
            root: root.to_path_buf(),
            real_root: root.canonicalize().ok(),
            folders: HashMap::default(),
        }
    }

    /// `rel` with the folders on its way resolved; its last component is kept as written
    /// (an output that is itself a symlink is that link, not what it points to).
    pub fn resolve_parent(&mut self, rel: &Path) -> Result<PathBuf, PathProblem> {
        match (rel.parent(), rel.file_name()) {
            (Some(parent), Some(name)) => Ok(self.resolve_folder(parent)?.join(name)),
            _ => Ok(rel.to_path_buf()),
        }
    }

    /// `rel` resolved through every symlink on its way, its last component included.
    pub fn resolve(&mut self, rel: &Path) -> Result<PathBuf, PathProblem> {
        let real_parent = self.resolve_parent(rel)?;
        self.follow(real_parent, 0)
    }

    fn resolve_folder(&mut self, rel: &Path) -> Result<PathBuf, PathProblem> {
        if rel.as_os_str().is_empty() {
            return Ok(PathBuf::new());
        }
        if let Some(known) = self.folders.get(rel) {
            return known.clone();
        }
        // A folder met again while it is being resolved is a loop.
        self.folders.insert(
            rel.to_path_buf(),
            Err(PathProblem::SymlinkLoop(rel.to_path_buf())),
        );
        let resolved = self.resolve(rel);
        self.folders.insert(rel.to_path_buf(), resolved.clone());
        resolved
    }

    /// `real` (whose folders are already resolved) itself followed if it is a symlink.
    fn follow(&mut self, real: PathBuf, depth: usize) -> Result<PathBuf, PathProblem> {
        let full = self.root.join(&real);
        let is_link = std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(real); // a file, a folder, or nothing yet
        }
        if depth >= MAX_LINKS {
            return Err(PathProblem::SymlinkLoop(real));
        }
        let target =
            std::fs::read_link(&full).map_err(|_| PathProblem::SymlinkOut(real.clone()))?;
        let folder = real.parent().unwrap_or(Path::new(""));
        let joined = self
            .inside(folder, &target)
            .ok_or_else(|| PathProblem::SymlinkOut(real.clone()))?;
        if joined.as_os_str().is_empty() {
            return Ok(joined); // the project root itself
        }
        let real_parent = self.resolve_parent(&joined)?;
        self.follow(real_parent, depth + 1)
    }

    /// A link's `target`, read from `folder` (relative to the root), as a clean path
    /// relative to the root; `None` when it leads out of the project.
    fn inside(&self, folder: &Path, target: &Path) -> Option<PathBuf> {
        let (base, rest) = if target.is_absolute() {
            let rest = [self.real_root.as_deref(), Some(self.root.as_path())]
                .into_iter()
                .flatten()
                .find_map(|r| target.strip_prefix(r).ok())?;
            (PathBuf::new(), rest)
        } else {
            (folder.to_path_buf(), target)
        };
        let mut out = base;
        for c in rest.components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return None;
                    }
                }
                Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        Some(out)
    }
}

/// A file-name-safe form of a stage name (`%XX` for anything but `[A-Za-z0-9._-]`).
pub fn safe_name(stage: &str) -> String {
    let mut out = String::new();
    for b in stage.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && !out.is_empty()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `.repro/cubins/<name>.<arch>.cubin` (a variant, or the reference).
pub fn cubin_path(name: &str, arch: &str) -> PathBuf {
    PathBuf::from(format!(".repro/cubins/{name}.{arch}.cubin"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn rejects_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(check_output(root, "../x"), Err(PathProblem::ParentDir));
        assert_eq!(check_output(root, "a/../../x"), Err(PathProblem::ParentDir));
        assert_eq!(check_output(root, "/etc/x"), Err(PathProblem::Absolute));
        assert_eq!(
            check_output(root, "o\npresent x"),
            Err(PathProblem::Control)
        );
        for reserved in [
            ".repro/logs/x",
            ".repro",
            ".repro/cubins",
            LOCK_FILE,
            "artifacts/repro.lock/x",
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
        assert!(check_output(root, "artifacts/repro.lock.txt").is_ok());
        assert!(check_output(root, ".gitignore").is_ok());
        for pipeline in ["p.yaml", "p.yaml/x"] {
            assert_eq!(
                check_not_reserved(Path::new(pipeline), Some(Path::new("p.yaml"))),
                Err(PathProblem::Reserved("the pipeline file itself"))
            );
        }
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
        symlink(outside.path(), dir.path().join("link")).unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        symlink("real", dir.path().join("inner")).unwrap();
        assert_eq!(
            check_output(dir.path(), "link/x"),
            Err(PathProblem::SymlinkOut("link".into()))
        );
        assert_eq!(check_output(dir.path(), "inner/x"), Ok("real/x".into()));
        // A reserved place reached through a link is still reserved.
        symlink(".git", dir.path().join("g")).unwrap();
        assert!(matches!(
            check_output(dir.path(), "g/x"),
            Err(PathProblem::Reserved(_))
        ));
    }

    #[test]
    fn resolves_links_within_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "f").unwrap();
        symlink("a/b", root.join("ab")).unwrap();
        symlink("..", root.join("a/b/up")).unwrap();
        symlink(root.join("a/b/f"), root.join("abs")).unwrap();
        symlink("ab/f", root.join("file-link")).unwrap();
        symlink("nowhere/yet", root.join("dangling")).unwrap();
        symlink("../../x", root.join("a/out")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        symlink("self/x", root.join("self")).unwrap();
        let mut r = Resolver::new(root);
        let resolve = |r: &mut Resolver, p: &str| r.resolve(Path::new(p));
        assert_eq!(resolve(&mut r, "ab/f"), Ok("a/b/f".into()));
        assert_eq!(resolve(&mut r, "ab/up/b/f"), Ok("a/b/f".into()));
        assert_eq!(resolve(&mut r, "abs"), Ok("a/b/f".into()));
        assert_eq!(resolve(&mut r, "file-link"), Ok("a/b/f".into()));
        assert_eq!(
            r.resolve_parent(Path::new("file-link")),
            Ok("file-link".into())
        );
        assert_eq!(resolve(&mut r, "dangling/z"), Ok("nowhere/yet/z".into()));
        assert_eq!(
            resolve(&mut r, "a/out/z"),
            Err(PathProblem::SymlinkOut("a/out".into()))
        );
        assert!(matches!(
            resolve(&mut r, "loop1/z"),
            Err(PathProblem::SymlinkLoop(_))
        ));
        assert!(matches!(
            resolve(&mut r, "self/z"),
            Err(PathProblem::SymlinkLoop(_))
        ));
        assert_eq!(
            symlink_on_the_way(root, Path::new("ab/f")),
            Some("ab".into())
        );
        assert_eq!(symlink_on_the_way(root, Path::new("a/b/f")), None);
    }
}
