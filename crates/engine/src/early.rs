//! Project state read before the project lock is held (while the pipeline loads), for use
//! once it is. Only a run holding the project lock writes the lock, its journal and the run
//! records, and any write moves a file's size, times or inode: the identity of the files
//! taken before and after the read, and again when the value is wanted, says whether what
//! was read is what the files hold.

use repro_pipeline::paths::LOCK_FILE;
use std::path::{Path, PathBuf};

/// Whether the project at `root` keeps enough state for reading it on a second thread to
/// pay: starting a thread (its allocator heap included) costs a fraction of a millisecond,
/// reading the lock of 2,000 stages several milliseconds.
pub fn worth_a_thread(root: &Path) -> bool {
    const LARGE_LOCK: u64 = 256 * 1024;
    std::fs::metadata(root.join(LOCK_FILE)).is_ok_and(|m| m.len() >= LARGE_LOCK)
}

/// A value read from some files, and what identified those files then.
pub struct Snapshot<T> {
    value: T,
    files: Vec<Option<String>>,
}

impl<T> Snapshot<T> {
    /// `read()` of the files at `paths`; `None` when it gives nothing or they changed while
    /// it ran.
    pub fn take(paths: &[PathBuf], read: impl FnOnce() -> Option<T>) -> Option<Snapshot<T>> {
        let files = identities(paths);
        let value = read()?;
        (identities(paths) == files).then_some(Snapshot { value, files })
    }

    /// The value, if the files at `paths` are still those it was read from.
    pub fn still(self, paths: &[PathBuf]) -> Option<T> {
        (identities(paths) == self.files).then_some(self.value)
    }
}

/// What identifies each file now (`None`: there is none).
fn identities(paths: &[PathBuf]) -> Vec<Option<String>> {
    paths.iter().map(|p| identity(p)).collect()
}

fn identity(path: &Path) -> Option<String> {
    std::fs::metadata(path)
        .ok()
        .map(|m| repro_base::fsio::identity(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_kept_only_while_its_files_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let paths = [dir.path().join("a"), dir.path().join("b")];
        std::fs::write(&paths[0], "1").unwrap();
        let read = || Snapshot::take(&paths, || Some(std::fs::read_to_string(&paths[0]).ok()));
        assert_eq!(read().unwrap().still(&paths), Some(Some("1".into())));
        let early = read().unwrap();
        std::fs::write(&paths[1], "new").unwrap();
        assert!(early.still(&paths).is_none(), "a file that appeared");
        let early = read().unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&paths[0])
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"2"))
            .unwrap();
        assert!(early.still(&paths).is_none(), "a file appended to");
        assert!(Snapshot::<()>::take(&paths, || None).is_none());
    }
}
