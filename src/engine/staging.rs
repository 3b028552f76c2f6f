//! Atomic outputs. Built-in kinds write under `.repro/staging/<stage>/` and their outputs
//! are moved into place only on success. `cmd` stages write in place, so their previous
//! outputs are first moved to `.repro/backup/<stage>/` and put back on failure, timeout or
//! interrupt; a backup left by a killed run is restored on the next start ([`recover`]).

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// The list of outputs inside a backup folder (written before anything is moved).
const BACKUP_LIST: &str = "outs";

/// Write `bytes` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
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

fn remove_any(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn move_to(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::rename(from, to)
}

fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Protection of one stage's outputs while it runs.
#[derive(Debug)]
pub enum Guard {
    /// Outputs are written under `dir` and moved in on success.
    Staged { dir: PathBuf },
    /// Outputs are written in place; the previous ones wait in `dir`.
    Backup { dir: PathBuf },
}

/// Prepare `stage` to run: an empty staging folder, or a backup of its current outputs.
/// Parent folders of the outputs are created where the stage will write.
pub fn prepare(
    root: &Path,
    stage: &str,
    outputs: &[PathBuf],
    in_place: bool,
) -> anyhow::Result<Guard> {
    let name = safe_name(stage);
    if in_place {
        let dir = root.join(".repro/backup").join(&name);
        remove_any(&dir)?;
        let list: String = outputs
            .iter()
            .map(|o| format!("{}\n", o.display()))
            .collect();
        write_atomic(&dir.join(BACKUP_LIST), list.as_bytes())?;
        for out in outputs {
            let live = root.join(out);
            if exists(&live) {
                move_to(&live, &dir.join("files").join(out))
                    .with_context(|| format!("cannot back up output `{}`", out.display()))?;
            }
            if let Some(parent) = live.parent() {
                std::fs::create_dir_all(parent)?;
            }
        }
        Ok(Guard::Backup { dir })
    } else {
        let dir = root.join(".repro/staging").join(&name);
        remove_any(&dir)?;
        std::fs::create_dir_all(&dir)?;
        for out in outputs {
            if let Some(parent) = dir.join(out).parent() {
                std::fs::create_dir_all(parent)?;
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
            if !exists(&written.join(out)) && !optional.contains(out) {
                bail!(
                    "the stage succeeded but did not write its declared output `{}`",
                    out.display()
                );
            }
        }
        match self {
            Guard::Backup { dir } => remove_any(dir)?,
            Guard::Staged { dir } => {
                let old = dir.with_extension("old");
                remove_any(&old)?;
                for out in outputs {
                    crate::pipeline::paths::check_no_symlink_out(root, out)
                        .map_err(|p| anyhow::anyhow!("output `{}` {p}", out.display()))?;
                    let live = root.join(out);
                    if exists(&live) {
                        move_to(&live, &old.join(out))?;
                    }
                    if !exists(&dir.join(out)) {
                        continue; // an optional output left unwritten: the old one goes
                    }
                    move_to(&dir.join(out), &live).with_context(|| {
                        format!("cannot move output `{}` into place", out.display())
                    })?;
                }
                remove_any(&old)?;
                remove_any(dir)?;
            }
        }
        Ok(())
    }

    /// The stage failed or was interrupted: leave the outputs as they were before it.
    pub fn rollback(&self, root: &Path, outputs: &[PathBuf]) -> anyhow::Result<()> {
        match self {
            Guard::Staged { dir } => remove_any(dir)?,
            Guard::Backup { dir } => restore_backup(root, dir, outputs)?,
        }
        Ok(())
    }
}

fn restore_backup(root: &Path, dir: &Path, outputs: &[PathBuf]) -> anyhow::Result<()> {
    for out in outputs {
        let live = root.join(out);
        remove_any(&live)
            .with_context(|| format!("cannot remove partial output `{}`", out.display()))?;
        let saved = dir.join("files").join(out);
        if exists(&saved) {
            move_to(&saved, &live)
                .with_context(|| format!("cannot restore output `{}`", out.display()))?;
        }
    }
    remove_any(dir)?;
    Ok(())
}

/// Undo what a killed run left: restore backed-up outputs, drop staging folders. Returns
/// the stages whose outputs were restored (their folder names).
pub fn recover(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut restored = Vec::new();
    let backups = root.join(".repro/backup");
    if let Ok(entries) = std::fs::read_dir(&backups) {
        for entry in entries.flatten() {
            let dir = entry.path();
            match std::fs::read_to_string(dir.join(BACKUP_LIST)) {
                Ok(list) => {
                    let outs: Vec<PathBuf> = list
                        .lines()
                        .filter(|l| !l.is_empty())
                        .map(PathBuf::from)
                        .collect();
                    restore_backup(root, &dir, &outs)?;
                    restored.push(entry.file_name().to_string_lossy().into_owned());
                }
                // The run died before recording its list: nothing was moved yet.
                Err(_) => remove_any(&dir)?,
            }
        }
    }
    remove_any(&root.join(".repro/staging"))?;
    restored.sort();
    Ok(restored)
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
        guard.rollback(root, &outs()).unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "old"
        );
        assert!(!root.join(".repro/backup/s").exists());
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

    #[test]
    fn recovers_a_backup_left_by_a_killed_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("out")).unwrap();
        std::fs::write(root.join("out/a.txt"), "old").unwrap();
        let _guard = prepare(root, "s", &outs(), true).unwrap();
        std::fs::write(root.join("out/a.txt"), "partial").unwrap();
        assert_eq!(recover(root).unwrap(), ["s"]);
        assert_eq!(
            std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
            "old"
        );
    }
}
