//! Moves and deletes of outputs that never act through a symlink.

use anyhow::{bail, Context};
use repro_base::fsio;
use std::path::{Path, PathBuf};

pub(super) fn move_to(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        fsio::create_dir_all(parent)?;
    }
    fsio::rename(from, to)
}

/// Where `path` leads, when it is a symlink whose target is outside the project `root`.
pub(super) fn link_out_of(root: &Path, path: &Path) -> Option<PathBuf> {
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return None;
    }
    let target = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    (!target.starts_with(root)).then_some(target)
}

pub(super) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// No delete, move or restore of output `rel` may act through a symlink: a folder on its
/// way that is a link (one a stage put where a folder was, to a place outside the project)
/// would take it wherever the link points. Before a restore, such a link — only the link —
/// is removed, so the previous output goes back where it was, and `notes` says so; before
/// anything else it is an error.
pub(super) fn confine(
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
