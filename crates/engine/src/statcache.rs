//! Content digests of files with a size + mtime + ctime + inode shortcut, so unchanged
//! files are not rehashed: `.repro/cache/stat` holds one line per file seen. A file whose
//! metadata changed but whose bytes did not (a `touch`) is rehashed once and keeps its
//! digest. The mtime alone is not trusted: `touch -r`, `cp -p`, `rsync -t` and tar set it
//! back after an edit of the same size, but any change to a file moves its ctime, which no
//! user can set.
//!
//! Within one evaluation each path is looked at once ([`StatCache::digest_tree`] remembers
//! its answer until [`StatCache::forget_seen`], which a run calls whenever a stage has
//! written): a file that is a dep of ten stages costs one `stat`, not ten.
//!
//! Its maps are looked up tens of thousands of times in a large pipeline and hash paths
//! nobody chooses to collide, so they use foldhash rather than the standard SipHash.

use crate::early::Snapshot;
use foldhash::{HashMap, HashSet};
use repro_base::fsio::open_regular;
use repro_base::tools::hex;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CACHE_FILE: &str = ".repro/cache/stat";
/// The first line of the cache file; a file without it (an older layout) is not read.
const HEADER: &str = "# repro stat cache 2: digest size mtime_ns ctime_ns inode path";

/// What stands for a folder with nothing in it: a folder's digests are those of the
/// files inside, so an empty one needs its own (its deletion is a change).
pub const EMPTY_FOLDER: &str = "empty-folder";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
    digest: String,
}

impl Entry {
    fn of(meta: &std::fs::Metadata, digest: String) -> Entry {
        Entry {
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
            ino: meta.ino(),
            digest,
        }
    }

    /// Whether `meta` is the file this entry was made from, unchanged.
    fn matches(&self, meta: &std::fs::Metadata) -> bool {
        let now = Entry::of(meta, String::new());
        (self.size, self.mtime_ns, self.ctime_ns, self.ino)
            == (now.size, now.mtime_ns, now.ctime_ns, now.ino)
    }
}

/// Digest cache for one project.
#[derive(Debug, Default)]
pub struct StatCache {
    file: PathBuf,
    /// The entries read from the cache file, shared by a cache and its forks.
    loaded: Arc<HashMap<String, Entry>>,
    /// Entries made since (files digested anew), in place of loaded ones: the cache is
    /// written back when there are any.
    made: HashMap<String, Entry>,
    /// Paths looked up by this process: only these are written back, so files that are
    /// no longer deps or outputs drop out of the cache.
    used: HashSet<String>,
    /// Paths digested since the last [`StatCache::forget_seen`], with their digests in
    /// path order.
    seen: HashMap<PathBuf, Vec<(String, String)>>,
}

impl StatCache {
    /// Read the cache of the project at `root` (empty if absent or unreadable).
    pub fn load(root: &Path) -> StatCache {
        let file = root.join(CACHE_FILE);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let entries = text.bytes().filter(|&b| b == b'\n').count();
        let mut loaded = HashMap::with_capacity_and_hasher(entries, Default::default());
        let mut lines = text.lines();
        if lines.next() == Some(HEADER) {
            for line in lines {
                let mut f = line.splitn(6, ' ');
                let (Some(digest), Some(size), Some(mtime), Some(ctime), Some(ino), Some(path)) =
                    (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
                else {
                    continue;
                };
                let (Ok(size), Ok(mtime_ns), Ok(ctime_ns), Ok(ino)) =
                    (size.parse(), mtime.parse(), ctime.parse(), ino.parse())
                else {
                    continue;
                };
                loaded.insert(
                    path.to_string(),
                    Entry {
                        size,
                        mtime_ns,
                        ctime_ns,
                        ino,
                        digest: digest.to_string(),
                    },
                );
            }
        }
        StatCache {
            file,
            loaded: Arc::new(loaded),
            ..StatCache::default()
        }
    }

    /// [`StatCache::load`] before the project lock is held ([`crate::early`]).
    pub fn load_early(root: &Path) -> Option<Snapshot<StatCache>> {
        Snapshot::take(&[root.join(CACHE_FILE)], || Some(StatCache::load(root)))
    }

    /// The `early` load while the file is unchanged, else [`StatCache::load`].
    pub fn load_or_early(root: &Path, early: Option<Snapshot<StatCache>>) -> StatCache {
        early
            .and_then(|early| early.still(&[root.join(CACHE_FILE)]))
            .unwrap_or_else(|| StatCache::load(root))
    }

    /// A copy to digest with on another thread: the same entries (the loaded ones shared,
    /// not copied), nothing looked up yet. [`StatCache::merge`] takes back what it looked up.
    /// It is sized to look up about as many paths as were loaded, as reading ahead does.
    pub fn fork(&self) -> StatCache {
        let paths = self.loaded.len();
        StatCache {
            file: self.file.clone(),
            loaded: Arc::clone(&self.loaded),
            made: self.made.clone(),
            used: HashSet::with_capacity_and_hasher(paths, Default::default()),
            seen: HashMap::with_capacity_and_hasher(paths, Default::default()),
        }
    }

    /// The entry for `key`: one made since loading, else the loaded one.
    fn entry(&self, key: &str) -> Option<&Entry> {
        self.made.get(key).or_else(|| self.loaded.get(key))
    }

    /// Take back what `fork` ([`StatCache::fork`]) looked up: the paths, the entries it
    /// made for files it digested anew, and the digests it remembers. The two are put
    /// together in whichever looked up more (a fork reading ahead looks up nearly
    /// everything), so only the other's lookups are copied; a file both digested anew keeps
    /// either's entry, each made from the file's metadata then.
    pub fn merge(&mut self, mut fork: StatCache) {
        if fork.used.len() > self.used.len() {
            std::mem::swap(self, &mut fork);
        }
        self.made.extend(fork.made);
        self.used.extend(fork.used);
        self.seen.extend(fork.seen);
    }

    /// Write the cache back if anything was hashed or some entry was not used.
    pub fn save(&self) -> std::io::Result<()> {
        if self.made.is_empty() && self.used.len() == self.loaded.len() {
            return Ok(());
        }
        let mut entries: Vec<(&String, &Entry)> = self
            .used
            .iter()
            .filter_map(|k| Some((k, self.entry(k)?)))
            .collect();
        entries.sort_unstable_by_key(|&(k, _)| k);
        let mut text = String::with_capacity(entries.len() * 140);
        text.push_str(HEADER);
        text.push('\n');
        for (k, e) in entries {
            text.push_str(&format!(
                "{} {} {} {} {} {}\n",
                e.digest, e.size, e.mtime_ns, e.ctime_ns, e.ino, k
            ));
        }
        repro_base::fsio::write_atomic(&self.file, text.as_bytes())
    }

    /// sha256 of the file at `root/rel`.
    pub fn digest_file(&mut self, root: &Path, rel: &Path) -> std::io::Result<String> {
        let full = root.join(rel);
        let meta = std::fs::metadata(&full)?;
        self.digest_with_meta(&full, &path_key(rel), &meta)
    }

    /// The digest of the file at `full`, recorded under `key`, whose metadata is `meta`.
    fn digest_with_meta(
        &mut self,
        full: &Path,
        key: &str,
        meta: &std::fs::Metadata,
    ) -> std::io::Result<String> {
        self.used.insert(key.to_string());
        if let Some(e) = self.entry(key) {
            if e.matches(meta) {
                return Ok(e.digest.clone());
            }
        }
        let digest = hash_file(full)?;
        if !key.contains('\n') {
            self.made
                .insert(key.to_string(), Entry::of(meta, digest.clone()));
        }
        Ok(digest)
    }

    /// Digests of `rel`: itself if a file, every entry below it (sorted) if a folder.
    /// Keys are paths relative to the project root. Files are digested by content; what
    /// is not a regular file is never opened (a FIFO would block, `/dev/zero` never ends):
    /// a symlink inside a folder that leads nowhere, to a folder already being walked, or
    /// that lies in a result folder, is digested by its target text, and a FIFO, socket or device by its kind
    /// ([`special_digest`]).
    pub fn digest_tree(
        &mut self,
        root: &Path,
        rel: &Path,
    ) -> std::io::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        self.digest_tree_into(root, rel, &mut out)?;
        Ok(out)
    }

    /// The digests of [`StatCache::digest_tree`] added to `out`, which an error leaves as
    /// it was.
    pub fn digest_tree_into(
        &mut self,
        root: &Path,
        rel: &Path,
        out: &mut BTreeMap<String, String>,
    ) -> std::io::Result<()> {
        let copy = |(k, v): &(String, String)| (k.clone(), v.clone());
        if let Some(known) = self.seen.get(rel) {
            out.extend(known.iter().map(copy));
            return Ok(());
        }
        let full = root.join(rel);
        // The path named by the user is followed if it is a link; missing is an error.
        let meta = std::fs::metadata(&full)?;
        let mut tree = Vec::new();
        self.walk(root, rel, &full, meta, &mut Vec::new(), &mut tree)?;
        tree.sort_unstable();
        out.extend(tree.iter().map(copy));
        self.seen.insert(rel.to_path_buf(), tree);
        Ok(())
    }

    /// Something may have been written since the paths seen were digested: look at them
    /// again next time.
    pub fn forget_seen(&mut self) {
        self.seen.clear();
    }

    /// Add the digests of `rel` (at `full`, whose metadata is `meta`) to `out`, unsorted.
    fn walk(
        &mut self,
        root: &Path,
        rel: &Path,
        full: &Path,
        meta: std::fs::Metadata,
        walking: &mut Vec<PathBuf>,
        out: &mut Vec<(String, String)>,
    ) -> std::io::Result<()> {
        if meta.is_dir() {
            let real = std::fs::canonicalize(full)?;
            walking.push(real);
            let mut empty = true;
            for entry in std::fs::read_dir(full)? {
                let entry = entry?;
                if is_nested_repository(&entry.file_name()) {
                    continue;
                }
                empty = false;
                let child = rel.join(entry.file_name());
                let child_full = root.join(&child);
                let link = std::fs::symlink_metadata(&child_full)?;
                let meta = if link.file_type().is_symlink() {
                    // Under the result folders a link is never followed (a pull request
                    // can plant `artifacts/a -> /`): it is digested by its target text.
                    let target = std::fs::metadata(&child_full)
                        .ok()
                        .filter(|_| !under_results(&child));
                    let is_loop = target.as_ref().is_some_and(|t| {
                        t.is_dir()
                            && std::fs::canonicalize(&child_full)
                                .is_ok_and(|real| walking.contains(&real))
                    });
                    match target {
                        Some(t) if !is_loop => t,
                        _ => {
                            let text = std::fs::read_link(&child_full)?;
                            out.push((path_key(&child), link_digest(&text)));
                            continue;
                        }
                    }
                } else {
                    link
                };
                self.walk(root, &child, &child_full, meta, walking, out)?;
            }
            if empty {
                out.push((path_key(rel), EMPTY_FOLDER.to_string()));
            }
            walking.pop();
        } else if meta.is_file() {
            let key = path_key(rel);
            let digest = self.digest_with_meta(full, &key, &meta)?;
            out.push((key, digest));
        } else {
            out.push((path_key(rel), special_digest(&meta)));
        }
        Ok(())
    }
}

/// A `.git` or `.repro` folder inside a folder being digested: a repository or project of
/// its own, which changes with every `git tag` or run there, so it is never part of a
/// digest.
fn is_nested_repository(name: &std::ffi::OsStr) -> bool {
    name == ".git" || name == ".repro"
}

/// The text a path is recorded under (in the lock, the stat cache, `status`). A UTF-8 path
/// is itself; in one that is not, each byte that is not part of a UTF-8 character is
/// written `\xHH` and each `\` as `\\`, so `caf\xE9` and `caf\xE8` stay two files (a
/// lossy conversion made both `caf\u{FFFD}`, and an edit of one went unseen).
pub fn path_key(rel: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = rel.as_os_str().as_bytes();
    if let Ok(text) = std::str::from_utf8(bytes) {
        return text.to_string();
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        out.push_str(&chunk.valid().replace('\\', "\\\\"));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Whether `rel` is in one of the result folders (`artifacts/`, `reports/`).
fn under_results(rel: &Path) -> bool {
    repro_pipeline::paths::RESULT_DIRS
        .iter()
        .any(|d| rel.starts_with(d))
}

/// What stands for a symlink that is not followed: its target text.
fn link_digest(target: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!(
        "symlink:{}",
        &hex(&Sha256::digest(target.as_os_str().as_bytes()))[..16]
    )
}

/// What stands for a file that is neither regular nor a folder: its kind (and a device's
/// number), read from metadata only.
pub fn special_digest(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let dev = meta.rdev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if t.is_fifo() {
        "fifo".into()
    } else if t.is_socket() {
        "socket".into()
    } else if t.is_char_device() {
        format!("char-device:{major}:{minor}")
    } else if t.is_block_device() {
        format!("block-device:{major}:{minor}")
    } else {
        "special".into()
    }
}

/// sha256 of a regular file's bytes, hex. Anything else is refused without blocking: the
/// file is opened non-blocking (a FIFO with no writer would hang a plain open) and checked
/// before a byte is read.
pub fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = open_regular(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_digest_until_metadata_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a"), "one").unwrap();
        let mut cache = StatCache::load(root);
        let first = cache.digest_file(root, Path::new("a")).unwrap();
        cache.save().unwrap();
        // Poison the cached digest: a cache hit returns it unchanged, proving no rehash.
        let text = std::fs::read_to_string(root.join(CACHE_FILE)).unwrap();
        std::fs::write(root.join(CACHE_FILE), text.replace(&first, "cafe")).unwrap();
        let mut cache = StatCache::load(root);
        assert_eq!(cache.digest_file(root, Path::new("a")).unwrap(), "cafe");
        std::fs::write(root.join("a"), "two!").unwrap();
        let second = cache.digest_file(root, Path::new("a")).unwrap();
        assert_ne!(second, "cafe");
        assert_eq!(second, hash_file(&root.join("a")).unwrap());
    }

    #[test]
    fn an_edit_of_the_same_size_with_its_mtime_set_back_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let path = root.join("a");
        std::fs::write(&path, "one").unwrap();
        let mut cache = StatCache::load(root);
        let first = cache.digest_file(root, Path::new("a")).unwrap();
        cache.save().unwrap();
        // In place (same inode), same size, then `touch -r`: only the ctime tells.
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        std::fs::write(&path, "two").unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), ino);
        let mut cache = StatCache::load(root);
        let second = cache.digest_file(root, Path::new("a")).unwrap();
        assert_ne!(first, second);
        assert_eq!(second, hash_file(&path).unwrap());
    }

    #[test]
    fn an_empty_folder_has_a_digest_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d/empty")).unwrap();
        std::fs::write(root.join("d/f"), "f").unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree["d/empty"], EMPTY_FOLDER);
        assert_eq!(tree.len(), 2);
    }

    #[test]
    fn a_fork_digests_with_the_same_entries_and_hands_back_what_it_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in ["a", "b", "c"] {
            std::fs::write(root.join(f), f).unwrap();
        }
        let mut cache = StatCache::load(root);
        let b = cache.digest_file(root, Path::new("b")).unwrap();
        cache.save().unwrap();
        // Poisoned in the file: a fork that returns it used the entries, not the bytes.
        let text = std::fs::read_to_string(root.join(CACHE_FILE)).unwrap();
        std::fs::write(root.join(CACHE_FILE), text.replace(&b, "cafe")).unwrap();
        let mut cache = StatCache::load(root);
        let mut fork = cache.fork();
        assert_eq!(fork.digest_file(root, Path::new("b")).unwrap(), "cafe");
        let c = fork.digest_tree(root, Path::new("c")).unwrap();
        cache.digest_file(root, Path::new("a")).unwrap();
        cache.merge(fork);
        cache.save().unwrap();
        let text = std::fs::read_to_string(root.join(CACHE_FILE)).unwrap();
        let paths: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.rsplit(' ').next().unwrap())
            .collect();
        assert_eq!(paths, ["a", "b", "c"]);
        assert!(text.contains(&format!("{} ", c["c"])));
        // What the fork digested is remembered: a change now is seen after `forget_seen`.
        std::fs::write(root.join("c"), "changed").unwrap();
        assert_eq!(cache.digest_tree(root, Path::new("c")).unwrap(), c);
    }

    #[test]
    fn forgets_files_no_longer_looked_up() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("a"), "a").unwrap();
        std::fs::write(root.join("b"), "b").unwrap();
        let mut cache = StatCache::load(root);
        cache.digest_file(root, Path::new("a")).unwrap();
        cache.digest_file(root, Path::new("b")).unwrap();
        cache.save().unwrap();
        let mut cache = StatCache::load(root);
        cache.digest_file(root, Path::new("a")).unwrap();
        cache.save().unwrap();
        let text = std::fs::read_to_string(root.join(CACHE_FILE)).unwrap();
        assert_eq!(text.lines().collect::<Vec<_>>()[0], HEADER);
        assert_eq!(text.lines().count(), 2);
        assert!(text.ends_with(" a\n"));
    }

    #[test]
    fn a_dangling_link_in_a_folder_is_digested_by_its_target_not_missing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/a"), "a").unwrap();
        std::os::unix::fs::symlink("user@host.1234", root.join("d/.#x")).unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["d/.#x", "d/a"]);
        assert!(tree["d/.#x"].starts_with("symlink:"));
        std::fs::remove_file(root.join("d/.#x")).unwrap();
        std::os::unix::fs::symlink("user@host.999", root.join("d/.#x")).unwrap();
        cache.forget_seen();
        let again = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_ne!(tree["d/.#x"], again["d/.#x"], "a new target is a change");
    }

    #[test]
    fn a_link_loop_in_a_folder_ends() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/e/f"), "f").unwrap();
        std::os::unix::fs::symlink("..", root.join("d/e/up")).unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["d/e/f", "d/e/up"]);
    }

    #[test]
    fn names_that_are_not_utf8_are_recorded_distinctly_and_utf8_names_as_they_are() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d")).unwrap();
        let name = |b: &[u8]| root.join("d").join(std::ffi::OsStr::from_bytes(b));
        std::fs::write(name(b"caf\xe9"), "1").unwrap();
        std::fs::write(name(b"caf\xe8"), "2").unwrap();
        std::fs::write(name(b"a\\b\xff"), "3").unwrap();
        std::fs::write(name("café".as_bytes()), "4").unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(
            tree.keys().collect::<Vec<_>>(),
            ["d/a\\\\b\\xFF", "d/caf\\xE8", "d/caf\\xE9", "d/café"]
        );
        std::fs::write(name(b"caf\xe9"), "changed").unwrap();
        cache.forget_seen();
        let again = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_ne!(tree["d/caf\\xE9"], again["d/caf\\xE9"]);
        assert_eq!(tree["d/caf\\xE8"], again["d/caf\\xE8"]);
    }

    #[test]
    fn git_and_repro_folders_inside_a_folder_are_not_digested() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["d/.git/refs/tags", "d/.repro/cache", "e/.git"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("d/.git/refs/tags/v1"), "tag").unwrap();
        std::fs::write(root.join("d/.repro/cache/stat"), "x").unwrap();
        std::fs::write(root.join("d/a"), "a").unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["d/a"]);
        let only_git = cache.digest_tree(root, Path::new("e")).unwrap();
        assert_eq!(only_git["e"], EMPTY_FOLDER);
    }

    #[test]
    fn special_files_are_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d")).unwrap();
        let fifo = std::ffi::CString::new(root.join("d/fifo").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::os::unix::fs::symlink("/dev/zero", root.join("d/zero")).unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree["d/fifo"], "fifo");
        assert!(tree["d/zero"].starts_with("char-device:1:5"), "{tree:?}");
        assert!(hash_file(&root.join("d/fifo")).is_err());
    }

    #[test]
    fn digests_folders_file_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/x"), "x").unwrap();
        std::fs::write(root.join("d/e/y"), "y").unwrap();
        let mut cache = StatCache::load(root);
        let tree = cache.digest_tree(root, Path::new("d")).unwrap();
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["d/e/y", "d/x"]);
    }
}
