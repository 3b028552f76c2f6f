//! Atomic outputs. Built-in kinds write under `.repro/staging/<stage>/` and their outputs
//! are moved into place only on success. `cmd` stages write in place, so their previous
//! outputs are first moved to `.repro/backup/<stage>/` and put back on failure, timeout or
//! interrupt; a backup left by a killed run is restored on the next start ([`recover`]).
//!
//! The backup list says, per output, whether it existed before the stage (`present`) or
//! not (`absent`), so a restore puts back exactly what was moved aside and deletes only
//! what the stage created: an output that was never moved (a backup that failed half-way,
//! or a run killed while backing up) is left where it is.

use anyhow::{bail, Context};
use repro_base::fsio::{self, remove_any};
use std::path::{Path, PathBuf};

/// The list of outputs inside a backup folder (written before anything is moved).
const BACKUP_LIST: &str = "outs";
/// Prefixes of the lines of [`BACKUP_LIST`].
const PRESENT: &str = "present ";
const ABSENT: &str = "absent ";

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

fn move_to(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        fsio::create_dir_all(parent)?;
    }
    fsio::rename(from, to)
}

/// Move each staged output into place, the live one aside into `old`. Before each move,
/// `moved` records the output and whether a live one existed, so that a commit cut short —
/// an error here, or a kill, found by [`recover`] — is undone by [`put_back`].
fn swap_in(
    root: &Path,
    staged: &Path,
    old: &Path,
    moved: &Path,
    outputs: &[PathBuf],
) -> anyhow::Result<()> {
    use std::io::Write;
    fsio::create_dir_all(old)?;
    let mut list = std::fs::File::create(moved).map_err(|e| fsio::at(moved, e))?;
    for out in outputs {
        confine(root, out, false, &mut Vec::new())?;
        let live = root.join(out);
        let state = if exists(&live) { "present" } else { "absent" };
        writeln!(list, "{state} {}", out.display())?;
        list.sync_data()?;
        if exists(&live) {
            move_to(&live, &old.join(out))?;
        }
        if !exists(&staged.join(out)) {
            continue; // an optional output left unwritten: the old one goes
        }
        move_to(&staged.join(out), &live)
            .with_context(|| format!("cannot move output `{}` into place", out.display()))?;
    }
    Ok(())
}

/// Undo a commit cut short: each output `moved` lists gets its previous version back (or,
/// if it had none, loses the new one). Lines naming a path no stage may write are ignored.
fn put_back(root: &Path, old: &Path, moved: &Path, notes: &mut Vec<String>) -> anyhow::Result<()> {
    let Ok(list) = std::fs::read_to_string(moved) else {
        return Ok(());
    };
    for line in list.lines() {
        let Some((state, path)) = line.split_once(' ') else {
            continue;
        };
        let Ok(out) = repro_pipeline::paths::check_output(root, path) else {
            continue;
        };
        confine(root, &out, true, notes)?;
        let (live, previous) = (root.join(&out), old.join(&out));
        match state {
            "present" if exists(&previous) => {
                remove_any(&live)?;
                move_to(&previous, &live)?;
            }
            // Present, but not yet moved aside: the live one is still the previous one.
            "present" => {}
            _ => remove_any(&live)?,
        }
    }
    remove_any(moved)?;
    remove_any(old)?;
    Ok(())
}

/// Where `path` leads, when it is a symlink whose target is outside the project `root`.
fn link_out_of(root: &Path, path: &Path) -> Option<PathBuf> {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return None;
    }
    let target = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    (!target.starts_with(root)).then_some(target)
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// No delete, move or restore of output `rel` may act through a symlink: a folder on its
/// way that is a link (one a stage put where a folder was, to a place outside the project)
/// would take it wherever the link points. Before a restore, such a link — only the link —
/// is removed, so the previous output goes back where it was, and `notes` says so; before
/// anything else it is an error.
fn confine(
    root: &Path,
    rel: &Path,
    restoring: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    while let Some(link) = repro_pipeline::paths::symlink_on_the_way(root, rel) {
        let target = std::fs::read_link(root.join(&link)).unwrap_or_default();
        if !restoring {
            bail!(
                "output `{}` is reached through the symlink `{}` (to `{}`): repro moves and deletes outputs only where they are, never through a link",
                rel.display(),
                link.display(),
                target.display()
            );
        }
        std::fs::remove_file(root.join(&link))
            .with_context(|| format!("cannot remove the symlink `{}`", link.display()))?;
        notes.push(format!(
            "removed the symlink `{}` (to `{}`) left where a folder was, and restored `{}` there; nothing it points to was touched",
            link.display(),
            target.display(),
            rel.display()
        ));
    }
    Ok(())
}

/// One output in a backup: its path, and whether it existed (and so was moved aside).
#[derive(Debug, Clone, PartialEq)]
pub struct BackedUp {
    pub path: PathBuf,
    pub existed: bool,
}

/// Protection of one stage's outputs while it runs.
#[derive(Debug)]
pub enum Guard {
    /// Outputs are written under `dir` and moved in on success.
    Staged { dir: PathBuf },
    /// Outputs are written in place; the previous ones wait in `dir`.
    Backup {
        dir: PathBuf,
        outputs: Vec<BackedUp>,
    },
}

/// Prepare `stage` to run: an empty staging folder, or a backup of its current outputs.
/// Parent folders of the outputs are created where the stage will write.
pub fn prepare(
    root: &Path,
    stage: &str,
    outputs: &[PathBuf],
    in_place: bool,
) -> anyhow::Result<Guard> {
    let name = repro_pipeline::paths::safe_name(stage);
    if in_place {
        let dir = root.join(".repro/backup").join(&name);
        remove_any(&dir)?;
        if outputs.is_empty() {
            // Nothing to protect, and no folder made and removed for nothing: a file system
            // slows down as it allocates around many files just deleted.
            return Ok(Guard::Backup {
                dir,
                outputs: Vec::new(),
            });
        }
        let entries: Vec<BackedUp> = outputs
            .iter()
            .map(|o| BackedUp {
                path: o.clone(),
                existed: exists(&root.join(o)),
            })
            .collect();
        let list: String = entries
            .iter()
            .map(|e| {
                let tag = if e.existed { PRESENT } else { ABSENT };
                format!("{tag}{}\n", e.path.display())
            })
            .collect();
        // Written in place: the folder was just emptied, and a list cut short by a kill
        // names only outputs not yet moved (every move comes after the list).
        fsio::create_dir_all(&dir)?;
        fsio::write(&dir.join(BACKUP_LIST), list.as_bytes())?;
        for (k, entry) in entries.iter().enumerate() {
            let live = root.join(&entry.path);
            let moved = confine(root, &entry.path, false, &mut Vec::new())
                .map_err(|e| std::io::Error::other(format!("{e:#}")))
                .and_then(|()| {
                    if entry.existed {
                        move_to(&live, &dir.join("files").join(&entry.path))
                    } else {
                        Ok(())
                    }
                });
            let parent = live.parent().map_or(Ok(()), fsio::create_dir_all);
            if let Err(e) = moved.and(parent) {
                // Put back what was already moved; nothing else was touched.
                restore_backup(root, &dir, &entries[..=k], false, &mut Vec::new()).with_context(|| {
                    format!(
                        "cannot back up output `{}` ({e}), nor put back the outputs moved before it; the next run restores them from {}",
                        entry.path.display(),
                        dir.display()
                    )
                })?;
                return Err(e).with_context(|| {
                    format!(
                        "cannot back up output `{}`; the outputs were left as they were",
                        entry.path.display()
                    )
                });
            }
        }
        Ok(Guard::Backup {
            dir,
            outputs: entries,
        })
    } else {
        let dir = root.join(".repro/staging").join(&name);
        remove_any(&dir)?;
        fsio::create_dir_all(&dir)?;
        for out in outputs {
            if let Some(parent) = dir.join(out).parent() {
                fsio::create_dir_all(parent)?;
            }
        }
        Ok(Guard::Staged { dir })
    }
}

impl Guard {
    /// Where the stage writes its outputs (`RunCtx.staging`).
    pub fn write_root<'a>(&'a self, root: &'a Path) -> &'a Path {
        match self {
            Guard::Staged { dir } => dir,
            Guard::Backup { .. } => root,
        }
    }

    /// The stage succeeded: put its outputs in place. Fails (leaving the previous outputs
    /// to [`Guard::rollback`]) if a declared output was not written.
    pub fn commit(
        &self,
        root: &Path,
        outputs: &[PathBuf],
        optional: &[PathBuf],
    ) -> anyhow::Result<()> {
        let written = self.write_root(root);
        for out in outputs {
            let path = written.join(out);
            if !exists(&path) && !optional.contains(out) {
                bail!(
                    "the stage succeeded but did not write its declared output `{}`",
                    out.display()
                );
            }
            if exists(&path) && std::fs::metadata(&path).is_err() {
                let target = std::fs::read_link(&path).unwrap_or_default();
                bail!(
                    "the stage's output `{}` is a symlink to `{}`, which does not exist\n  help: write the output itself, or link to a file that is there when the stage ends",
                    out.display(),
                    target.display()
                );
            }
            if let Some(target) = link_out_of(root, &path) {
                bail!(
                    "the stage's output `{}` is a symlink leading outside the project (to `{}`): the lock would record a file repro does not own\n  help: copy the file into the project instead of linking to it",
                    out.display(),
                    target.display()
                );
            }
        }
        match self {
            Guard::Backup { dir, .. } => remove_any(dir)?,
            Guard::Staged { dir } => {
                let old = dir.with_extension("old");
                let moved = dir.with_extension("moved");
                remove_any(&old)?;
                remove_any(&moved)?;
                let swapped = swap_in(root, dir, &old, &moved, outputs);
                if let Err(e) = swapped {
                    put_back(root, &old, &moved, &mut Vec::new())?;
                    return Err(e);
                }
                remove_any(&moved)?;
                remove_any(&old)?;
                remove_any(dir)?;
            }
        }
        Ok(())
    }

    /// The stage failed or was interrupted: leave the outputs as they were before it.
    /// Returns what had to be done to get there (a symlink the stage left in the way).
    pub fn rollback(&self, root: &Path) -> anyhow::Result<Vec<String>> {
        let mut notes = Vec::new();
        match self {
            Guard::Staged { dir } => remove_any(dir)?,
            Guard::Backup { dir, outputs } => {
                let lost = lost_from_backup(dir, outputs);
                restore_backup(root, dir, outputs, true, &mut notes)?;
                if !lost.is_empty() {
                    bail!(lost_backup_message(dir, &lost));
                }
            }
        }
        Ok(notes)
    }
}

/// The outputs moved into the backup `dir` that are no longer there: the stage removed
/// them (a `rm -rf .repro`, a `git clean -xfd`). Every output that existed was moved
/// before the stage started, so none of these is still in place.
fn lost_from_backup(dir: &Path, outputs: &[BackedUp]) -> Vec<PathBuf> {
    outputs
        .iter()
        .filter(|e| e.existed && !exists(&dir.join("files").join(&e.path)))
        .map(|e| e.path.clone())
        .collect()
}

/// What was lost with a backup the stage removed, and how to get it back.
fn lost_backup_message(dir: &Path, lost: &[PathBuf]) -> String {
    let names: Vec<String> = lost.iter().map(|p| p.display().to_string()).collect();
    format!(
        "the stage removed the backup of its previous outputs ({}), so these could not be put back: {}; what stands there now (if anything) is the failed run's\n  help: get the committed versions back with `git checkout -- {}`, or rerun the stage",
        dir.display(),
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        names.join(" ")
    )
}

/// Put back the outputs of `entries` that were moved into `dir`. With `stage_ran`, what
/// stands where an output did not exist before was written by the stage and is removed;
/// an output that existed but was never moved aside is left alone either way.
fn restore_backup(
    root: &Path,
    dir: &Path,
    entries: &[BackedUp],
    stage_ran: bool,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
    for entry in entries {
        confine(root, &entry.path, true, notes)?;
        let live = root.join(&entry.path);
        let saved = dir.join("files").join(&entry.path);
        if entry.existed && !exists(&saved) {
            continue; // never moved aside: the live one is the original
        }
        if entry.existed || stage_ran {
            remove_any(&live).with_context(|| {
                format!("cannot remove partial output `{}`", entry.path.display())
            })?;
        }
        if entry.existed {
            move_to(&saved, &live)
                .with_context(|| format!("cannot restore output `{}`", entry.path.display()))?;
        }
    }
    remove_any(dir)?;
    Ok(())
}

/// What [`recover`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Recovery {
    /// Processes a killed run left running, killed before anything was restored.
    pub killed: Vec<u32>,
    /// Stages (their folder names) whose outputs were restored.
    pub restored: Vec<String>,
    /// Lines of backup lists that were not followed (a path outside the project, a
    /// reserved one, or not a line repro writes), with why; symlinks removed to restore.
    pub refused: Vec<String>,
}

/// Read one backup list. Only paths that could be a stage's output are kept: the list is
/// a file anyone can edit, and a restore deletes what it names.
fn read_backup_list(
    root: &Path,
    pipeline_file: Option<&Path>,
    dir: &Path,
    text: &str,
    refused: &mut Vec<String>,
) -> Vec<BackedUp> {
    let mut entries = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (existed, path) = match (line.strip_prefix(PRESENT), line.strip_prefix(ABSENT)) {
            (Some(p), _) => (true, p),
            (_, Some(p)) => (false, p),
            _ => {
                refused.push(format!(
                    "{}: ignored the line `{line}` (not `present PATH` or `absent PATH`)",
                    dir.join(BACKUP_LIST).display()
                ));
                continue;
            }
        };
        let checked = repro_pipeline::paths::check_output(root, path).and_then(|clean| {
            repro_pipeline::paths::check_not_reserved(&clean, pipeline_file).map(|()| clean)
        });
        match checked {
            Ok(clean) => entries.push(BackedUp {
                path: clean,
                existed,
            }),
            Err(problem) => refused.push(format!(
                "{}: did not restore `{path}`, which {problem}",
                dir.join(BACKUP_LIST).display()
            )),
        }
    }
    entries
}

/// Undo what a killed run left: first kill the processes it left running (`dead_run` is
/// its run id, from the project lock it held; see [`repro_exec::orphans`]), so none
/// writes into an output after this; then restore backed-up outputs and drop staging
/// folders. `pipeline_file` (its name in `root`) is never restored or removed.
pub fn recover(
    root: &Path,
    pipeline_file: Option<&Path>,
    dead_run: Option<&str>,
) -> anyhow::Result<Recovery> {
    let mut recovery = Recovery::default();
    if let Some(run) = dead_run.filter(|r| !r.is_empty()) {
        recovery.killed = repro_exec::orphans::kill_run(run)?;
    }
    let backups = root.join(".repro/backup");
    if let Ok(entries) = std::fs::read_dir(&backups) {
        for entry in entries.flatten() {
            let dir = entry.path();
            match std::fs::read_to_string(dir.join(BACKUP_LIST)) {
                Ok(list) => {
                    let outs =
                        read_backup_list(root, pipeline_file, &dir, &list, &mut recovery.refused);
                    restore_backup(root, &dir, &outs, true, &mut recovery.refused)?;
                    recovery
                        .restored
                        .push(entry.file_name().to_string_lossy().into_owned());
                }
                // The run died before recording its list: nothing was moved yet.
                Err(_) => remove_any(&dir)?,
            }
        }
    }
    // Commits of staged outputs cut short: the lock still names the previous outputs.
    let staging = root.join(".repro/staging");
    if let Ok(entries) = std::fs::read_dir(&staging) {
        for entry in entries.flatten() {
            let moved = entry.path();
            if moved.extension() == Some("moved".as_ref()) {
                put_back(
                    root,
                    &moved.with_extension("old"),
                    &moved,
                    &mut recovery.refused,
                )?;
                let stage = moved.file_stem().unwrap_or_default();
                recovery.restored.push(stage.to_string_lossy().into_owned());
            }
        }
    }
    remove_any(&staging)?;
    recovery.restored.sort();
    Ok(recovery)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outs() -> Vec<PathBuf> {
        vec![PathBuf::from("out/a.txt")]
    }

    #[test]
    fn backup_restores_previous_outputs_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old").unwrap();
        let guard = prepare(root, "s", &outs(), true).unwrap();
        assert!(!root.join("out/a.txt").exists());
        std::fs::write(root.join("out/a.txt"), "half").unwrap();
        guard.rollback(root).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "old"
        );
        assert!(!root.join(".repro/backup/s").exists());
    }

    #[test]
    fn a_commit_of_staged_outputs_cut_short_is_undone_by_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old a").unwrap();
        std::fs::write(root.join("out/b.txt"), "old b").unwrap();
        // A kill after a.txt was swapped and while b.txt was aside: what the list and the
        // folders hold at that moment (c.txt had no previous version and came in new).
        let staging = root.join(".repro/staging");
        std::fs::create_dir_all(staging.join("s.old/out")).unwrap();
        std::fs::rename(root.join("out/a.txt"), staging.join("s.old/out/a.txt")).unwrap();
        std::fs::write(root.join("out/a.txt"), "new a").unwrap();
        std::fs::rename(root.join("out/b.txt"), staging.join("s.old/out/b.txt")).unwrap();
        std::fs::write(root.join("out/c.txt"), "new c").unwrap();
        std::fs::write(
            staging.join("s.moved"),
            "present out/a.txt\nabsent out/c.txt\npresent out/b.txt\npresent ../escape\n",
        )
        .unwrap();
        let recovery = recover(root, None, None).unwrap();
        assert_eq!(recovery.restored, ["s"]);
        let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
        assert_eq!(read("out/a.txt").as_deref(), Some("old a"));
        assert_eq!(read("out/b.txt").as_deref(), Some("old b"));
        assert_eq!(read("out/c.txt"), None, "it had no previous version");
        assert!(!staging.exists());
    }

    #[test]
    fn staged_outputs_move_in_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old").unwrap();
        let guard = prepare(root, "s", &outs(), false).unwrap();
        std::fs::write(guard.write_root(root).join("out/a.txt"), "new").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "old"
        );
        guard.commit(root, &outs(), &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "new"
        );
    }

    #[test]
    fn commit_refuses_a_missing_output() {
        let dir = tempfile::tempdir().unwrap();
        let guard = prepare(dir.path(), "s", &outs(), false).unwrap();
        assert!(guard.commit(dir.path(), &outs(), &[]).is_err());
    }

    #[test]
    fn an_optional_output_left_unwritten_removes_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old").unwrap();
        let guard = prepare(root, "s", &outs(), false).unwrap();
        guard.commit(root, &outs(), &outs()).unwrap();
        assert!(!root.join("out/a.txt").exists());
    }

    /// An output whose backup path is too long for the OS (`ENAMETOOLONG`), while the
    /// output itself is not: its backup fails whoever runs the test (root included).
    fn unbackupable(root: &Path) -> PathBuf {
        // The live path is 4085 bytes, its backup (under `.repro/backup/s/files/`) more
        // than PATH_MAX (4096).
        let len = 4085 - root.as_os_str().len() - 1;
        let mut rel = PathBuf::new();
        while len - rel.as_os_str().len() > 250 {
            rel.push("d".repeat(190));
        }
        rel.push("o".repeat(len - rel.as_os_str().len() - 1));
        std::fs::create_dir_all(root.join(&rel).parent().unwrap()).unwrap();
        std::fs::write(root.join(&rel), "o2").unwrap();
        rel
    }

    #[test]
    fn a_failed_backup_puts_back_what_it_moved_and_deletes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("d1")).unwrap();
        std::fs::write(root.join("d1/o1"), "o1").unwrap();
        let outputs = vec![PathBuf::from("d1/o1"), unbackupable(root)];
        let err = prepare(root, "s", &outputs, true).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot back up output"),
            "{err:#}"
        );
        assert_eq!(std::fs::read_to_string(root.join("d1/o1")).unwrap(), "o1");
        assert_eq!(
            std::fs::read_to_string(root.join(&outputs[1])).unwrap(),
            "o2"
        );
        assert!(!root.join(".repro/backup/s").exists());
        // Nothing for the next run to "restore" either.
        assert_eq!(
            recover(root, Some(Path::new("pipeline.yaml")), None).unwrap(),
            Recovery::default()
        );
        assert_eq!(
            std::fs::read_to_string(root.join(&outputs[1])).unwrap(),
            "o2"
        );
    }

    #[test]
    fn a_run_killed_while_backing_up_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for o in ["a", "b"] {
            std::fs::write(root.join(o), o).unwrap();
        }
        // As a run killed after moving `a` aside but before moving `b` leaves it; `c` did
        // not exist and the stage never ran.
        let backup = root.join(".repro/backup/s");
        std::fs::create_dir_all(backup.join("files")).unwrap();
        std::fs::write(backup.join("outs"), "present a\npresent b\nabsent c\n").unwrap();
        std::fs::rename(root.join("a"), backup.join("files/a")).unwrap();
        let recovery = recover(root, Some(Path::new("pipeline.yaml")), None).unwrap();
        assert_eq!(recovery.restored, ["s"]);
        assert_eq!(std::fs::read_to_string(root.join("a")).unwrap(), "a");
        assert_eq!(std::fs::read_to_string(root.join("b")).unwrap(), "b");
        assert!(!backup.exists());
    }

    #[test]
    fn recovery_refuses_paths_outside_the_project() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x"), "keep").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let backup = root.join(".repro/backup/s");
        std::fs::create_dir_all(&backup).unwrap();
        let abs = outside.path().join("x");
        std::fs::write(
            backup.join("outs"),
            format!(
                "absent {}\npresent ../x\nabsent .git\nabsent pipeline.yaml\n{}\n",
                abs.display(),
                abs.display()
            ),
        )
        .unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("pipeline.yaml"), "version: 1").unwrap();
        let recovery = recover(root, Some(Path::new("pipeline.yaml")), None).unwrap();
        assert_eq!(recovery.refused.len(), 5, "{recovery:?}");
        assert_eq!(std::fs::read_to_string(&abs).unwrap(), "keep");
        assert!(root.join(".git").exists() && root.join("pipeline.yaml").exists());
    }

    #[test]
    fn recovers_a_backup_left_by_a_killed_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old").unwrap();
        let _guard = prepare(root, "s", &outs(), true).unwrap();
        std::fs::write(root.join("out/a.txt"), "partial").unwrap();
        assert_eq!(
            recover(root, Some(Path::new("pipeline.yaml")), None)
                .unwrap()
                .restored,
            ["s"]
        );
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "old"
        );
    }
}
