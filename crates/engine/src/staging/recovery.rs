//! What a killed run left, undone at the next start.

use super::backup::{restore_backup, ABSENT, BACKUP_LIST, PRESENT};
use super::swap::put_back;
use super::BackedUp;
use repro_base::fsio::remove_any;
use std::path::Path;

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
/// its run id, from the project lock it held; see [`repro_executor::orphans`]), so none
/// writes into an output after this; then restore backed-up outputs and drop staging
/// folders. `pipeline_file` (its name in `root`) is never restored or removed.
pub fn recover(
    root: &Path,
    pipeline_file: Option<&Path>,
    dead_run: Option<&str>,
) -> anyhow::Result<Recovery> {
    let mut recovery = Recovery::default();
    if let Some(run) = dead_run.filter(|r| !r.is_empty()) {
        recovery.killed = repro_executor::orphans::kill_run(run)?;
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
