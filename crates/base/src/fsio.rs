//! The file operations the engine does on the project (folders made, files moved, removed
//! and written), each with an error that names its path and, where the kind of failure
//! has one, the fix. The standard library's errors name no path: "Permission denied (os
//! error 13)" after a `sudo repro run`, "File exists (os error 17)" when `.repro` is a
//! file, and nothing says where.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `e` with `path` in its message and, for a failure with an obvious fix, that fix. The
/// kind stays, so callers still tell `NotFound` from the rest.
pub fn at(path: &Path, e: io::Error) -> io::Error {
    let help = hint(path, &e)
        .map(|h| format!("\n  help: {h}"))
        .unwrap_or_default();
    io::Error::new(e.kind(), format!("{}: {e}{help}", path.display()))
}

/// The fix for an error at `path`, when the failure says what it is.
fn hint(path: &Path, e: &io::Error) -> Option<String> {
    match e.raw_os_error()? {
        libc::EACCES | libc::EPERM => Some(format!(
            "this user may not change `{0}`: it belongs to another user (a `sudo repro run`?) or is read-only (`ls -ld {0}`, `lsattr -d {0}` say which); give it back with `sudo chown -R \"$(id -un)\" {0}`, or make it writable with `chmod u+w {0}`",
            path.display()
        )),
        libc::EXDEV => Some(format!(
            "`{}` is on another file system than the project's `.repro/` (a mount inside the project), and repro moves outputs aside by renaming them: keep outputs on the project's file system",
            path.display()
        )),
        libc::EROFS => Some(format!(
            "`{}` is on a read-only file system: remount it writable, or run the project from a writable copy",
            path.display()
        )),
        libc::ENOTDIR | libc::EEXIST => file_in_the_way(path).map(|file| {
            format!(
                "`{}` is a file where a folder is needed: move it away (`mv {0} {0}.bak`) and run again",
                file.display()
            )
        }),
        _ => None,
    }
}

/// The first of `path` and its parents that exists and is not a folder.
fn file_in_the_way(path: &Path) -> Option<PathBuf> {
    let mut ancestors: Vec<&Path> = path.ancestors().collect();
    ancestors.reverse();
    ancestors
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_dir()))
        .map(Path::to_path_buf)
}

/// `std::fs::create_dir_all`, the error naming the folder.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    std::fs::create_dir_all(path).map_err(|e| at(path, e))
}

/// `std::fs::rename`, the error naming both paths, and the fix for the one it concerns: a
/// file in the way of `to`, or else the folder `from` leaves, whose permissions a move
/// needs.
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        let permission = matches!(
            e.raw_os_error(),
            Some(libc::EACCES | libc::EPERM | libc::EROFS)
        );
        let blamed = match (file_in_the_way(to), from.parent()) {
            (Some(_), _) => to,
            (None, Some(folder)) if permission => folder,
            _ => from,
        };
        let named = at(blamed, e);
        io::Error::new(
            named.kind(),
            format!("moving `{}` to `{}`: {named}", from.display(), to.display()),
        )
    })
}

/// `std::fs::write`, the error naming the file.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    std::fs::write(path, bytes).map_err(|e| at(path, e))
}

/// Remove a file, a folder or a symlink (never what it points to); nothing there is fine.
/// The error names the path.
pub fn remove_any(path: &Path) -> io::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    removed.map_err(|e| at(path, e))
}

/// Write `bytes` to `path` through a temporary file and a rename. The temporary file is
/// created afresh (never through a link planted in its place) and removed again when the
/// write fails (a full disk); the error names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        create_dir_all(parent)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    remove_any(&tmp)?;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|e| at(path, e))
}

/// A file's identity as text: size, mtime, ctime and inode, which any change moves. Caches
/// name what they were made from with it.
pub fn identity(meta: &std::fs::Metadata) -> String {
    format!(
        "{} {}.{} {}.{} {}",
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.ino()
    )
}

/// This binary's identity (size, modification time, inode; `None` where it cannot be read):
/// caches that only the `repro` that wrote them may read back (their data in its own types'
/// layout) name it. A rebuild is another binary.
pub fn binary_identity() -> Option<String> {
    let meta = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    Some(format!(
        "{} {}.{} {}",
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino()
    ))
}

/// `path` opened for reading, if it is a regular file. It is opened non-blocking and checked
/// before any read: a FIFO would block forever, `/dev/zero` never ends.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file (a FIFO, a device or a socket)",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Append one line to a stage's log. A log that cannot be written loses only the line,
/// never the work it describes.
pub fn append_line(log: &Path, line: &str) {
    use std::io::Write as _;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
    {
        let _ = writeln!(f, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(path: &Path, errno: i32) -> String {
        at(path, io::Error::from_raw_os_error(errno)).to_string()
    }

    #[test]
    fn a_permission_error_names_its_path_and_how_to_get_it_back() {
        let m = message(Path::new("/p/.repro/state"), libc::EACCES);
        assert!(m.starts_with("/p/.repro/state: Permission denied"), "{m}");
        assert!(m.contains("sudo chown -R"), "{m}");
        assert_eq!(
            at(Path::new("x"), io::Error::from_raw_os_error(libc::EACCES)).kind(),
            io::ErrorKind::PermissionDenied
        );
    }

    #[test]
    fn a_read_only_file_system_is_named() {
        let m = message(Path::new("/p/out"), libc::EROFS);
        assert!(m.contains("`/p/out` is on a read-only file system"), "{m}");
    }

    #[test]
    fn a_file_where_a_folder_is_needed_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".repro");
        std::fs::write(&file, "").unwrap();
        let err = create_dir_all(&file.join("state")).unwrap_err().to_string();
        assert!(
            err.contains(&format!(
                "`{}` is a file where a folder is needed",
                file.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn remove_and_rename_name_their_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        remove_any(&a).unwrap();
        let err = rename(&a, &b).unwrap_err().to_string();
        assert!(err.contains(&format!("`{}`", a.display())), "{err}");
        assert!(err.contains(&format!("`{}`", b.display())), "{err}");
    }
}
