//! The walk of the results folders (`artifacts/`, `reports/`). Git stores symlinks, so a
//! pull request can plant one there (`artifacts/a -> .`, `-> ..`, `-> /`), and CI runs
//! `run` and `verify` on it: this walk never follows a link. A link, or what is neither a
//! file nor a folder, is a [`Problem`] that names it and says to remove it; an entry that
//! cannot be read is a problem too, and never hides its siblings.

use std::fs::FileType;
use std::path::Path;

/// What the walk found under one folder: paths relative to the project root, `/`-joined.
#[derive(Debug, Default, PartialEq)]
pub struct Listing {
    /// Regular files.
    pub files: Vec<String>,
    /// Folders with nothing in them (an output folder's digest counts them).
    pub empty_folders: Vec<String>,
    pub problems: Vec<Problem>,
}

/// An entry among the results that is not a plain file or folder, or cannot be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub path: String,
    /// What it is (`is a symlink to `..``).
    pub what: String,
    /// What to do about it, on this machine.
    pub fix: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {}\n  help: {}", self.path, self.what, self.fix)
    }
}

impl Problem {
    fn unreadable(path: &str, err: &std::io::Error) -> Problem {
        Problem {
            path: path.to_string(),
            what: format!("cannot be read: {err}"),
            fix: format!("make it readable, or remove it: `rm -r -- {path}`"),
        }
    }

    /// `path` (of type `kind`) is neither a file nor a folder.
    fn not_a_file(root: &Path, path: &str, kind: FileType) -> Problem {
        if kind.is_symlink() {
            let target = std::fs::read_link(root.join(path))
                .map(|t| t.display().to_string())
                .unwrap_or_else(|_| "?".into());
            return Problem {
                path: path.to_string(),
                what: format!(
                    "is a symlink (to `{target}`): the results hold plain files, and repro never follows a link there"
                ),
                fix: format!("remove the link: `rm -- {path}`"),
            };
        }
        Problem {
            path: path.to_string(),
            what: "is neither a file nor a folder (a FIFO, socket or device)".into(),
            fix: format!("remove it: `rm -- {path}`"),
        }
    }
}

/// Everything under `root/rel` (a folder of the results), without following a link. A
/// missing `rel` holds nothing.
pub fn list(root: &Path, rel: &str) -> Listing {
    let mut out = Listing::default();
    match std::fs::symlink_metadata(root.join(rel)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => out.problems.push(Problem::unreadable(rel, &e)),
        Ok(meta) if meta.is_dir() => walk(root, rel, &mut out),
        Ok(meta) if meta.is_file() => out.files.push(rel.to_string()),
        Ok(meta) => out
            .problems
            .push(Problem::not_a_file(root, rel, meta.file_type())),
    }
    out.files.sort();
    out
}

/// The folder `rel` (not a link), depth first; each entry on its own.
fn walk(root: &Path, rel: &str, out: &mut Listing) {
    let entries = match std::fs::read_dir(root.join(rel)) {
        Ok(entries) => entries,
        Err(e) => return out.problems.push(Problem::unreadable(rel, &e)),
    };
    let mut empty = true;
    for entry in entries {
        empty = false;
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                out.problems.push(Problem::unreadable(rel, &e));
                continue;
            }
        };
        let path = format!("{rel}/{}", entry.file_name().to_string_lossy());
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(root, &path, out),
            Ok(t) if t.is_file() => out.files.push(path),
            Ok(t) => out.problems.push(Problem::not_a_file(root, &path, t)),
            Err(e) => out.problems.push(Problem::unreadable(&path, &e)),
        }
    }
    if empty {
        out.empty_folders.push(rel.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_problems_never_followed_and_siblings_stay() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("artifacts/bench")).unwrap();
        std::fs::create_dir_all(root.join("artifacts/empty")).unwrap();
        std::fs::write(root.join("artifacts/bench/v.json"), "{}").unwrap();
        std::fs::write(root.join("src.rs"), "secret").unwrap();
        for (name, target) in [("a", "."), ("loop", ".."), ("root", "/")] {
            symlink(target, root.join("artifacts").join(name)).unwrap();
        }
        let listing = list(root, "artifacts");
        assert_eq!(listing.files, ["artifacts/bench/v.json"]);
        assert_eq!(listing.empty_folders, ["artifacts/empty"]);
        let mut problems: Vec<_> = listing.problems.iter().map(|p| p.to_string()).collect();
        problems.sort();
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[1].starts_with("`artifacts/loop` is a symlink (to `..`)"));
        assert!(problems[1].ends_with("help: remove the link: `rm -- artifacts/loop`"));
        assert_eq!(list(root, "reports"), Listing::default());
    }
}
