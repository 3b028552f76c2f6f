//! The manifest's context: the environment, the pipeline's fingerprint, each stage's status
//! and time, the seeds, and every file under `artifacts/` and `reports/` with its sha256
//! and size. The manifest itself and the lock are not listed: the lock is written by the
//! engine after this stage and records the manifest's own hash, so listing either would be
//! circular.

use super::state::RunState;
use anyhow::Context;
use repro_gpu::env::Environment;
use repro_pipeline::Pipeline;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

pub use repro_pipeline::paths::MANIFEST_FILE as MANIFEST;
/// Folders whose files the manifest lists.
pub const LISTED_DIRS: [&str; 2] = ["artifacts", "reports"];
/// Files the manifest does not list (see the module doc).
pub const UNLISTED: [&str; 2] = [MANIFEST, super::state::LOCK];

/// The manifest under `root`, parsed; `None` when it is missing or not YAML.
pub fn read(root: &Path) -> Option<serde_yaml::Value> {
    let text = std::fs::read_to_string(root.join(MANIFEST)).ok()?;
    serde_yaml::from_str(&text).ok()
}

/// The index of the stage that writes the manifest (a summarize stage, as a rule).
pub fn writer(project: &repro_pipeline::Project) -> Option<usize> {
    project
        .stages
        .iter()
        .position(|s| s.outputs.iter().any(|o| o.as_path() == Path::new(MANIFEST)))
}

/// What writes the manifest again, at the commit checked out: its stage, forced (with
/// `--with-deps`, which lets a needed stage this machine cannot run be kept first).
pub fn rewrite(project: &repro_pipeline::Project) -> Option<String> {
    let name = &project.stages[writer(project)?].name;
    Some(format!("`repro stage {name} --force --with-deps`"))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArtifactEntry {
    pub path: String,
    pub sha256: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageEntry {
    pub name: String,
    pub kind: String,
    /// As the engine recorded it; `not run` when it has no record.
    pub status: String,
    /// Seconds with three decimals, `None` when not recorded.
    pub elapsed_s: Option<String>,
    pub reason: Option<String>,
    pub fingerprint: Option<String>,
}

/// One workload in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadEntry {
    pub name: String,
    pub primary: String,
    pub seeds: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestContext {
    pub env: Environment,
    pub pipeline_fingerprint: Option<String>,
    /// The first workload's seeds and primary shape (the only one's, in most pipelines).
    pub seeds: Vec<u64>,
    pub primary_shape: Option<String>,
    /// Every workload's primary shape and seeds.
    pub workloads: Vec<WorkloadEntry>,
    pub stages: Vec<StageEntry>,
    pub artifacts: Vec<ArtifactEntry>,
    /// Results kept from another build of their variant (the report's list).
    pub not_measured: Vec<super::measured::NotMeasured>,
}

/// Build the manifest context. `summarize` is the name of the stage writing it, left out
/// of `stages`: it is still running, and the lock records it once it passes.
pub fn context(
    pipeline: &Pipeline,
    state: &RunState,
    env: &Environment,
    summarize: &str,
    (artifacts, not_measured): (Vec<ArtifactEntry>, Vec<super::measured::NotMeasured>),
) -> ManifestContext {
    let stages = pipeline
        .stages
        .iter()
        .filter(|(name, _)| name.as_str() != summarize)
        .map(|(name, spec)| {
            let st = state.stages.get(name);
            let status = st
                .and_then(|s| s.status)
                .map_or_else(|| "not run".into(), |o| o.label().to_string());
            StageEntry {
                name: name.clone(),
                kind: spec.uses.clone(),
                status,
                elapsed_s: st.and_then(|s| s.elapsed_s).map(|t| format!("{t:.3}")),
                reason: st.and_then(|s| s.reason.clone()),
                fingerprint: st.and_then(|s| s.fingerprint.clone()),
            }
        })
        .collect();
    let workloads: Vec<WorkloadEntry> = repro_pipeline::workload::Workloads::of(pipeline)
        .iter()
        .map(|(name, d)| WorkloadEntry {
            name: name.to_string(),
            primary: d.primary.clone(),
            seeds: d.seeds.clone(),
        })
        .collect();
    ManifestContext {
        env: env.clone(),
        pipeline_fingerprint: state.pipeline_fingerprint(),
        seeds: workloads
            .first()
            .map(|w| w.seeds.clone())
            .unwrap_or_default(),
        primary_shape: workloads.first().map(|w| w.primary.clone()),
        workloads,
        stages,
        artifacts,
        not_measured,
    }
}

/// Every file under [`LISTED_DIRS`] of `root`, overlaid with those under `overlay` (the
/// stage's staging folder, whose files replace the root's on success), sorted by path.
pub fn list_artifacts(root: &Path, overlay: Option<&Path>) -> anyhow::Result<Vec<ArtifactEntry>> {
    let mut files: BTreeMap<String, ArtifactEntry> = BTreeMap::new();
    for base in std::iter::once(root).chain(overlay) {
        for dir in LISTED_DIRS {
            walk(base, dir, &mut files)?;
        }
    }
    for path in UNLISTED {
        files.remove(path);
    }
    Ok(files.into_values().collect())
}

/// The files under `base/dir`, hashed into `out`. A symlink or another entry that is not a
/// file is an error naming it: the walk never follows one ([`super::tree`]).
fn walk(base: &Path, dir: &str, out: &mut BTreeMap<String, ArtifactEntry>) -> anyhow::Result<()> {
    let listing = super::tree::list(base, dir);
    if let Some(problem) = listing.problems.first() {
        anyhow::bail!("{problem}");
    }
    for rel in listing.files {
        let path = base.join(&rel);
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        out.insert(
            rel.clone(),
            ArtifactEntry {
                path: rel,
                sha256: repro_base::tools::hex(&Sha256::digest(&bytes)),
                size: bytes.len() as u64,
            },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_among_the_results_is_an_error_naming_it() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("artifacts")).unwrap();
        std::fs::write(root.path().join("artifacts/x.json"), "{}").unwrap();
        std::os::unix::fs::symlink(".", root.path().join("artifacts/a")).unwrap();
        let err = list_artifacts(root.path(), None).unwrap_err().to_string();
        assert!(
            err.starts_with("`artifacts/a` is a symlink (to `.`)"),
            "{err}"
        );
        assert!(
            err.contains("remove the link: `rm -- artifacts/a`"),
            "{err}"
        );
    }

    #[test]
    fn lists_sorted_with_overlay_winning_and_without_manifest_or_lock() {
        let root = tempfile::tempdir().unwrap();
        let staging = tempfile::tempdir().unwrap();
        for (base, path, text) in [
            (root.path(), "artifacts/bench/b.json", "old"),
            (root.path(), "artifacts/build/a.json", "a"),
            (root.path(), "artifacts/repro.lock", "lock"),
            (root.path(), "artifacts/manifest.yaml", "m"),
            (staging.path(), "artifacts/bench/b.json", "new"),
            (staging.path(), "reports/summary.md", "# r"),
        ] {
            let p = base.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let list = list_artifacts(root.path(), Some(staging.path())).unwrap();
        let paths: Vec<&str> = list.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "artifacts/bench/b.json",
                "artifacts/build/a.json",
                "reports/summary.md"
            ]
        );
        assert_eq!(list[0].size, 3);
        assert_eq!(
            list[0].sha256,
            repro_base::tools::hex(&Sha256::digest(b"new"))
        );
    }
}
