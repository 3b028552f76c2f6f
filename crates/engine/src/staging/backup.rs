//! The backup of a `cmd` stage's outputs: its list, and putting the outputs back.

use super::confine::{confine, exists, move_to};
use super::BackedUp;
use anyhow::Context;
use repro_base::fsio::remove_any;
use std::path::{Path, PathBuf};

/// The list of outputs inside a backup folder (written before anything is moved).
pub(super) const BACKUP_LIST: &str = "outs";
/// Prefixes of the lines of [`BACKUP_LIST`].
pub(super) const PRESENT: &str = "present ";
pub(super) const ABSENT: &str = "absent ";

/// The outputs moved into the backup `dir` that are no longer there: the stage removed
/// them (a `rm -rf .repro`, a `git clean -xfd`). Every output that existed was moved
/// before the stage started, so none of these is still in place.
pub(super) fn lost_from_backup(dir: &Path, outputs: &[BackedUp]) -> Vec<PathBuf> {
    outputs
        .iter()
        .filter(|e| e.existed && !exists(&dir.join("files").join(&e.path)))
        .map(|e| e.path.clone())
        .collect()
}

/// What was lost with a backup the stage removed, and how to get it back.
pub(super) fn lost_backup_message(dir: &Path, lost: &[PathBuf]) -> String {
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
pub(super) fn restore_backup(
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
