//! Atomic outputs. Built-in kinds write under `.repro/staging/<stage>/` and their outputs
//! are moved into place only on success. `cmd` stages write in place, so their previous
//! outputs are first moved to `.repro/backup/<stage>/` and put back on failure, timeout or
//! interrupt; a backup left by a killed run is restored on the next start ([`recover`]).
//!
//! The backup list says, per output, whether it existed before the stage (`present`) or
//! not (`absent`), so a restore puts back exactly what was moved aside and deletes only
//! what the stage created: an output that was never moved (a backup that failed half-way,
//! or a run killed while backing up) is left where it is.

mod backup;
mod confine;
mod files;
mod recovery;
mod swap;

pub use files::{append_line, truncate_or_create};
pub use recovery::{recover, Recovery};

use anyhow::{bail, Context};
use backup::{lost_backup_message, lost_from_backup, restore_backup, ABSENT, BACKUP_LIST, PRESENT};
use confine::{confine, exists, link_out_of, move_to};
use repro_base::fsio::{self, remove_any};
use std::path::{Path, PathBuf};
use swap::{put_back, swap_in};

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

#[cfg(test)]
mod tests;
