//! `artifacts/repro.lock`: per stage its fingerprint, the parts of that fingerprint (so
//! `status` can explain staleness after a checkout) and the digest of every output file.
//! Sorted, canonical YAML without timestamps: the same inputs give the same bytes.
//!
//! A run records each stage the moment it succeeds, but rewriting the whole lock each time
//! would make a run of N stages write O(N²) bytes. So each success is appended to a
//! journal (`.repro/state/lock.journal`, one JSON line per stage), and the lock is written
//! once, when the run ends ([`LockFile::save`] then drops the journal). A run killed before
//! that leaves the journal: every reader of the lock ([`LockFile::load`]) applies it, and
//! the next run writes it into the lock.

mod recorded;

pub use recorded::RecordedInputs;

use super::early::Snapshot;
use anyhow::Context;
use repro_pipeline::paths::LOCK_FILE;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

const HEADER: &str =
    "# Written by repro: stage fingerprints and output digests. Do not edit; commit it.\n";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockFile {
    pub version: u32,
    #[serde(default)]
    pub stages: BTreeMap<String, LockEntry>,
}

impl Default for LockFile {
    fn default() -> Self {
        LockFile {
            version: VERSION,
            stages: BTreeMap::new(),
        }
    }
}

/// What the last successful run of one stage recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockEntry {
    pub fingerprint: String,
    /// Set when the stage ran but a gate failed (the summary of which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_failed: Option<String>,
    /// Set when the stage could not do its work for a reason the user can fix (a missing
    /// optional tool): the reason. Kinds put that tool's presence in their inputs, so
    /// installing it makes the stage stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub inputs: RecordedInputs,
    /// Output file (relative path) → sha256.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
}

impl LockEntry {
    /// `measured on <machine>`, or `skipped on <machine>` for a recorded skip: where the
    /// results this entry records came from.
    pub fn origin_on(&self, machine: &str) -> String {
        match self.skipped {
            Some(_) => format!("skipped on {machine}"),
            None => format!("measured on {machine}"),
        }
    }
}

/// Where the stages recorded since the lock was last written wait (see the module doc).
const JOURNAL: &str = ".repro/state/lock.journal";

/// One line of the journal.
#[derive(Serialize, Deserialize)]
struct Journaled {
    stage: String,
    entry: LockEntry,
}

impl LockFile {
    /// The project's lock, with the stages a run recorded since it was written; empty when
    /// there is none yet.
    pub fn load(root: &Path) -> anyhow::Result<LockFile> {
        Ok(LockFile::read(root)?.finish(root))
    }

    /// [`LockFile::load`] without writing anything: a lock read from its YAML leaves its
    /// JSON mirror to [`ReadLock::finish`].
    pub fn read(root: &Path) -> anyhow::Result<ReadLock> {
        let path = root.join(LOCK_FILE);
        let mut mirror = None;
        let mut lock = match std::fs::metadata(&path) {
            Ok(meta) => match mirror::read(root, &meta) {
                Some(lock) => lock,
                None => {
                    let text = std::fs::read_to_string(&path)
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    let lock = parse(&path, &text)?;
                    mirror = mirror::text(&meta, &lock);
                    lock
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LockFile::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        // A line cut short by a kill is not a record: it and anything after it are dropped.
        if let Ok(journal) = std::fs::read_to_string(root.join(JOURNAL)) {
            for line in journal.lines() {
                let Ok(j) = serde_json::from_str::<Journaled>(line) else {
                    break;
                };
                lock.stages.insert(j.stage, j.entry);
            }
        }
        Ok(ReadLock { lock, mirror })
    }

    /// Whether stages were recorded that the lock file does not hold yet.
    pub fn has_journal(root: &Path) -> bool {
        root.join(JOURNAL).exists()
    }

    /// Record `stage`'s successful run: in this lock, and at once in the journal, where it
    /// survives a kill. The lock file itself is written by [`LockFile::save`].
    pub fn record(&mut self, root: &Path, stage: &str, entry: LockEntry) -> anyhow::Result<()> {
        let journaled = Journaled {
            stage: stage.to_string(),
            entry,
        };
        let line = serde_json::to_string(&journaled).expect("a lock entry serializes");
        super::staging::append_line(&root.join(JOURNAL), &line)
            .with_context(|| format!("cannot record stage `{stage}` in the lock's journal"))?;
        self.stages.insert(journaled.stage, journaled.entry);
        Ok(())
    }

    /// The canonical text of the lock.
    pub fn render(&self) -> String {
        HEADER.to_string() + &serde_yaml::to_string(self).expect("lock serializes")
    }

    /// Write the lock atomically (a crash leaves the old or the new file, never half), then
    /// drop the journal it now holds.
    pub fn save(&self, root: &Path) -> anyhow::Result<()> {
        let path = root.join(LOCK_FILE);
        repro_base::fsio::write_atomic(&path, self.render().as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        if let Some(text) = std::fs::metadata(&path)
            .ok()
            .and_then(|meta| mirror::text(&meta, self))
        {
            mirror::write(root, &text);
        }
        match std::fs::remove_file(root.join(JOURNAL)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove {}", root.join(JOURNAL).display()))
            }
            _ => Ok(()),
        }
    }
}

/// A lock [`LockFile::read`] read, and the JSON mirror it is still to write (the lock
/// file's own records, without the journal's).
pub struct ReadLock {
    lock: LockFile,
    mirror: Option<String>,
}

impl ReadLock {
    /// The lock, its mirror written first where it was missing or out of date.
    pub fn finish(self, root: &Path) -> LockFile {
        if let Some(text) = &self.mirror {
            mirror::write(root, text);
        }
        self.lock
    }
}

impl LockFile {
    /// The lock read before the project lock is held ([`crate::early`]); `None` when it
    /// cannot be read or changed while it was.
    pub fn read_early(root: &Path) -> Option<Snapshot<ReadLock>> {
        Snapshot::take(&files(root), || LockFile::read(root).ok())
    }

    /// [`LockFile::load`], taking the `early` read while its files are unchanged.
    pub fn load_or_early(
        root: &Path,
        early: Option<Snapshot<ReadLock>>,
    ) -> anyhow::Result<LockFile> {
        match early.and_then(|early| early.still(&files(root))) {
            Some(read) => Ok(read.finish(root)),
            None => LockFile::load(root),
        }
    }
}

/// The files the lock is read from: the lock and its journal.
fn files(root: &Path) -> [std::path::PathBuf; 2] {
    [root.join(LOCK_FILE), root.join(JOURNAL)]
}

/// The lock version this repro writes and reads.
const VERSION: u32 = 1;

/// What to do about a lock that cannot be read.
fn lock_help() -> String {
    format!("help: restore it with `git checkout {LOCK_FILE}`, or delete it so every stage reruns")
}

/// Read the lock's text, checked: a key written twice (YAML keeps the last one silently,
/// and a stage's record would vanish), a wrong type and an unknown version are each an
/// error at `file:line:column`.
fn parse(path: &Path, text: &str) -> anyhow::Result<LockFile> {
    let at = |line: usize, col: usize| format!("{}:{line}:{col}", path.display());
    if let Some(dup) = repro_pipeline::spans::SpanIndex::scan(text)
        .duplicates
        .first()
    {
        anyhow::bail!(
            "{}: `{}` is written twice in the lock (first at line {}, column {}), so one of its records would be lost\n  {}",
            at(dup.second.line, dup.second.col),
            dup.path.join("."),
            dup.first.line,
            dup.first.col,
            lock_help()
        );
    }
    let lock: LockFile = serde_yaml::from_str(text).map_err(|e| {
        let (line, col) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        anyhow::anyhow!(
            "{}: not a repro lock file: {e}\n  {}",
            at(line, col),
            lock_help()
        )
    })?;
    if lock.version != VERSION {
        let pos = repro_pipeline::spans::SpanIndex::build(text).locate(&["version"]);
        let (what, help) = if lock.version > VERSION {
            ("was written by a newer repro", "help: update repro to read it (a lock written again by this one would lose what the newer one recorded)".to_string())
        } else {
            ("has a version no repro writes", lock_help())
        };
        anyhow::bail!(
            "{}: the lock {what} (version {}; this repro reads version {VERSION})\n  {help}",
            at(pos.line, pos.col),
            lock.version
        );
    }
    Ok(lock)
}

/// A copy of the parsed lock in JSON (`.repro/cache/lock.json`), which reads several times
/// faster than the YAML; it names the lock file it was made from by size, times and
/// inode, and is used only while the lock is that file, unchanged (any edit, checkout or
/// copy moves its ctime), only by the binary that wrote it, and only while its JSON is what
/// that binary wrote (a checksum of it is in the first line). Each entry's inputs are left
/// as their JSON text until read ([`RecordedInputs`]), which therefore parse.
mod mirror {
    use super::{LockEntry, LockFile, RecordedInputs};
    use repro_base::fsio::{binary_identity, identity};
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::sync::Arc;

    const FILE: &str = ".repro/cache/lock.json";

    /// The mirror's first line: what it was made from, by which binary, and a checksum of
    /// the JSON that follows it.
    fn header(lock: &std::fs::Metadata, json: &str) -> Option<String> {
        Some(format!(
            "{} {} {:016x}",
            identity(lock),
            binary_identity()?,
            checksum(json)
        ))
    }

    /// Catches any edit of the mirror's JSON (not a forgery): a few hundred microseconds
    /// for the 3.6 MB of a 2,000-stage lock, where a SHA-256 would take milliseconds.
    fn checksum(json: &str) -> u64 {
        use std::hash::BuildHasher;
        foldhash::fast::FixedState::with_seed(0).hash_one(json.as_bytes())
    }

    /// The mirror's lock, its entries' inputs still JSON (in the mirror's text).
    #[derive(Deserialize)]
    struct Mirror<'a> {
        version: u32,
        #[serde(borrow)]
        stages: BTreeMap<String, Entry<'a>>,
    }

    /// A [`LockEntry`] with its inputs as JSON.
    #[derive(Deserialize)]
    struct Entry<'a> {
        fingerprint: String,
        #[serde(default)]
        gate_failed: Option<String>,
        #[serde(default)]
        skipped: Option<String>,
        #[serde(borrow)]
        inputs: &'a RawValue,
        #[serde(default)]
        outputs: BTreeMap<String, String>,
    }

    pub(super) fn read(root: &Path, lock: &std::fs::Metadata) -> Option<LockFile> {
        let text = std::fs::read_to_string(root.join(FILE)).ok()?;
        let json = text.find('\n')? + 1;
        if text[..json - 1] != header(lock, &text[json..])? {
            return None;
        }
        let text = Arc::new(text);
        let mirror: Mirror = serde_json::from_str(&text[json..]).ok()?;
        // Each entry keeps where its inputs are in the text, which it shares.
        let start = text.as_ptr() as usize;
        let stages = mirror
            .stages
            .into_iter()
            .map(|(name, e)| {
                let inputs = e.inputs.get();
                let at = inputs.as_ptr() as usize - start;
                let inputs = RecordedInputs::lazy(Arc::clone(&text), at..at + inputs.len());
                let entry = LockEntry {
                    fingerprint: e.fingerprint,
                    gate_failed: e.gate_failed,
                    skipped: e.skipped,
                    inputs,
                    outputs: e.outputs,
                };
                (name, entry)
            })
            .collect();
        Some(LockFile {
            version: mirror.version,
            stages,
        })
    }

    /// The mirror of `lock`, read from the lock file whose metadata is `lock_meta`; `None`
    /// where this binary's identity cannot be read (then there is no mirror).
    pub(super) fn text(lock_meta: &std::fs::Metadata, lock: &LockFile) -> Option<String> {
        let json = serde_json::to_string(lock).expect("the lock serializes");
        Some(format!("{}\n{json}", header(lock_meta, &json)?))
    }

    /// Best effort: without a mirror the lock is read from its YAML.
    pub(super) fn write(root: &Path, text: &str) {
        let _ = repro_base::fsio::write_atomic(&root.join(FILE), text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::Inputs;

    #[test]
    fn round_trips_and_renders_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut lock = LockFile::default();
        for name in ["zeta", "alpha"] {
            lock.stages.insert(
                name.into(),
                LockEntry {
                    fingerprint: "ab".into(),
                    gate_failed: None,
                    skipped: None,
                    inputs: Inputs {
                        kind: "cmd".into(),
                        command: "c".into(),
                        ..Default::default()
                    }
                    .into(),
                    outputs: [
                        ("out/b".to_string(), "2".to_string()),
                        ("out/a".to_string(), "1".to_string()),
                    ]
                    .into(),
                },
            );
        }
        lock.save(dir.path()).unwrap();
        let back = LockFile::load(dir.path()).unwrap();
        assert_eq!(back, lock);
        let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(text, back.render());
        assert!(text.find("alpha").unwrap() < text.find("zeta").unwrap());
    }

    fn refusal(text: &str) -> String {
        format!(
            "{:#}",
            parse(Path::new("artifacts/repro.lock"), text).unwrap_err()
        )
    }

    #[test]
    fn a_lock_of_another_version_a_key_twice_or_a_wrong_type_is_refused_at_its_line() {
        let entry = "  a:\n    fingerprint: f\n    inputs: {kind: cmd, command: c}\n";
        let m = refusal(&format!("version: 99\nstages:\n{entry}"));
        assert!(
            m.starts_with("artifacts/repro.lock:1:1: the lock was written by a newer repro (version 99; this repro reads version 1)"),
            "{m}"
        );
        let m = refusal(&format!("version: 1\nstages:\n{entry}{entry}"));
        assert!(
            m.starts_with("artifacts/repro.lock:6:3: `stages.a` is written twice in the lock (first at line 3, column 3)"),
            "{m}"
        );
        let m = refusal("version: 1\nstages:\n  a:\n    fingerprint: [f]\n");
        assert!(m.starts_with("artifacts/repro.lock:4:"), "{m}");
        assert!(
            m.contains("not a repro lock file") && m.contains("git checkout"),
            "{m}"
        );
        assert!(parse(Path::new("l"), &format!("version: 1\nstages:\n{entry}")).is_ok());
    }

    #[test]
    fn the_json_mirror_is_used_only_for_the_lock_it_was_made_from() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut lock = LockFile::default();
        lock.stages.insert(
            "a".into(),
            LockEntry {
                fingerprint: "f1".into(),
                gate_failed: None,
                skipped: None,
                inputs: RecordedInputs::default(),
                outputs: BTreeMap::new(),
            },
        );
        lock.save(root).unwrap();
        assert!(root.join(".repro/cache/lock.json").exists());
        assert_eq!(LockFile::load(root).unwrap(), lock);
        // An edit of the same size with the modification time set back: not the same file.
        let path = root.join(LOCK_FILE);
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        let text = std::fs::read_to_string(&path).unwrap().replace("f1", "f2");
        std::fs::write(&path, text).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(before)
            .unwrap();
        assert_eq!(LockFile::load(root).unwrap().stages["a"].fingerprint, "f2");
    }

    #[test]
    fn an_edited_mirror_is_not_read_even_with_its_first_line_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let lock = saved(root, "f1");
        let mirror = root.join(".repro/cache/lock.json");
        let text = std::fs::read_to_string(&mirror).unwrap();
        assert!(text.contains(r#""inputs":{"#), "{text}");
        // Inputs that are JSON but not inputs: read lazily, they would not parse.
        let edited = text.replacen(r#""inputs":{"#, r#""inputs":{"kind":7,"#, 1);
        std::fs::write(&mirror, edited).unwrap();
        let loaded = LockFile::load(root).unwrap();
        assert_eq!(loaded, lock);
        assert_eq!(loaded.stages["a"].inputs.kind, lock.stages["a"].inputs.kind);
    }

    /// A lock of stage `a` with [`entry`] `fp`, saved under `root`.
    fn saved(root: &Path, fp: &str) -> LockFile {
        let mut lock = LockFile::default();
        lock.stages.insert("a".into(), entry(fp));
        lock.save(root).unwrap();
        lock
    }

    /// A passing run's record with fingerprint `fp` and nothing else.
    fn entry(fp: &str) -> LockEntry {
        LockEntry {
            fingerprint: fp.into(),
            gate_failed: None,
            skipped: None,
            inputs: RecordedInputs::default(),
            outputs: BTreeMap::new(),
        }
    }

    #[test]
    fn a_lock_read_early_is_used_only_while_its_files_are_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut lock = saved(root, "a0");
        let early = Some(LockFile::read_early(root).unwrap());
        assert_eq!(LockFile::load_or_early(root, early).unwrap(), lock);
        // A run recorded a stage after the early read: its journal is read.
        let early = Some(LockFile::read_early(root).unwrap());
        lock.record(root, "b", entry("b1")).unwrap();
        let loaded = LockFile::load_or_early(root, early).unwrap();
        assert_eq!(loaded.stages["b"].fingerprint, "b1");
        // And the lock written again.
        let early = Some(LockFile::read_early(root).unwrap());
        lock.stages.insert("a".into(), entry("a1"));
        lock.save(root).unwrap();
        assert_eq!(LockFile::load_or_early(root, early).unwrap(), lock);
    }

    #[test]
    fn a_journal_left_by_a_killed_run_is_read_and_its_torn_line_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut lock = LockFile::default();
        lock.stages.insert("a".into(), entry("a0"));
        lock.save(root).unwrap();
        let mut running = LockFile::load(root).unwrap();
        running.record(root, "a", entry("a1")).unwrap();
        running.record(root, "b", entry("b1")).unwrap();
        // Killed here: the lock file still holds the run before, the journal the rest.
        let on_disk = std::fs::read_to_string(root.join(LOCK_FILE)).unwrap();
        assert!(on_disk.contains("a0") && !on_disk.contains("b1"));
        let journal = root.join(JOURNAL);
        let mut text = std::fs::read_to_string(&journal).unwrap();
        text.push_str("{\"stage\":\"c\",\"entry\":{\"fingerpr");
        std::fs::write(&journal, text).unwrap();
        let read = LockFile::load(root).unwrap();
        assert_eq!(read, running);
        assert!(LockFile::has_journal(root));
        read.save(root).unwrap();
        assert!(!LockFile::has_journal(root));
        assert_eq!(LockFile::load(root).unwrap(), running);
    }
}
