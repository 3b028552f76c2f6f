//! Staged outputs moved into place, and a move cut short undone.

use super::confine::{confine, exists, move_to};
use anyhow::Context;
use repro_base::{fsio, fsio::remove_any};
use std::path::{Path, PathBuf};

/// Move each staged output into place, the live one aside into `old`. Before each move,
/// `moved` records the output and whether a live one existed, so that a commit cut short —
/// an error here, or a kill, found by [`recover`](super::recover) — is undone by [`put_back`].
pub(super) fn swap_in(
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
pub(super) fn put_back(
    root: &Path,
    old: &Path,
    moved: &Path,
    notes: &mut Vec<String>,
) -> anyhow::Result<()> {
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
