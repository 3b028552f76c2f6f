//! Writes of one file that a kill cannot leave half-done or aimed through a symlink.

use repro_base::fsio;
use std::path::Path;

/// Append `line` and a newline to `path` (created with its folder if missing) in one
/// write to a file opened for appending: a kill leaves the line whole or cut short, never
/// mixed with another. The error names `path`.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        fsio::create_dir_all(dir)?;
    }
    // Never through a symlink planted in its place.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
        .map_err(|e| fsio::at(path, e))
}

/// Make `path` an empty regular file: the file there truncated (keeping its inode, as a
/// file system allocates new ones slowly after many deletes), or a new one; a symlink
/// planted there is removed, never written through. The error names `path`.
pub fn truncate_or_create(path: &Path) -> std::io::Result<()> {
    truncate_or_create_here(path).map_err(|e| fsio::at(path, e))
}

fn truncate_or_create_here(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            // Not through a link; and a FIFO there fails instead of blocking.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
    };
    let file = match open() {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            std::fs::remove_file(path)?;
            open()?
        }
        other => other?,
    };
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(())
}
