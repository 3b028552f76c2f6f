//! Where a kept stage's results were measured: the machine, the date and the commit.

use crate::lockfile::LockFile;
use repro_pipeline::Project;

/// The manifest as HEAD has it — the one written with the committed results, which a
/// summary re-rendered here has since replaced in the working tree — or, outside git, the
/// working tree's.
fn committed_manifest(root: &std::path::Path) -> Option<String> {
    let file = repro_pipeline::paths::MANIFEST_FILE;
    let at_head = || -> Option<String> {
        let repo = git2::Repository::discover(root).ok()?;
        let workdir = repo.workdir()?.canonicalize().ok()?;
        let rel = root
            .canonicalize()
            .ok()?
            .strip_prefix(&workdir)
            .ok()?
            .join(file);
        let tree = repo.head().ok()?.peel_to_tree().ok()?;
        let blob = tree
            .get_path(&rel)
            .ok()?
            .to_object(&repo)
            .ok()?
            .peel_to_blob()
            .ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    };
    at_head().or_else(|| std::fs::read_to_string(root.join(file)).ok())
}

/// `kept: measured on <GPU> on <date> at <commit>` (`skipped on`, for a recorded skip):
/// where a kept stage's results came from, from its lock entry and the manifest of the run
/// that made them.
pub fn kept_from(project: &Project, i: usize) -> String {
    let lock = LockFile::load(&project.root).unwrap_or_default();
    let entry = lock.stages.get(&project.stages[i].name);
    let machine = entry
        .and_then(|e| e.inputs.hardware.clone())
        .unwrap_or_else(|| "another machine".into());
    let origin = match entry {
        Some(e) => e.origin_on(&machine),
        None => format!("measured on {machine}"),
    };
    let manifest: Option<serde_yaml::Value> =
        committed_manifest(&project.root).and_then(|t| serde_yaml::from_str(&t).ok());
    let when = manifest.as_ref().and_then(|m| {
        m["created_utc"]
            .as_str()
            .map(|d| d.get(..10).unwrap_or(d).to_string())
    });
    let commit = manifest.as_ref().and_then(|m| {
        m["git"]["sha"]
            .as_str()
            .map(|c| c.get(..10).unwrap_or(c).to_string())
    });
    let mut text = format!("kept: {origin}");
    if let Some(d) = when {
        text.push_str(&format!(" on {d}"));
    }
    if let Some(c) = commit {
        text.push_str(&format!(" at {c}"));
    }
    text
}
