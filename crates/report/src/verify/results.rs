//! The results `repro verify` checks: the lock, every file under the result folders with
//! its sha256, and the manifest — as the working tree has them, or as HEAD does (to know
//! whether going back to the committed results would fix what the working tree breaks).

use super::git::Git;
use crate::{tree, tree::Problem};
use repro_engine::lockfile::LockFile;
use repro_engine::{statcache::StatCache, statcache::EMPTY_FOLDER};
use repro_pipeline::Project;
use repro_pipeline::{paths::LOCK_FILE, paths::MANIFEST_FILE, paths::RESULT_DIRS};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub struct Results {
    pub lock: LockFile,
    /// Every file under the result folders (the lock included) → its sha256.
    pub files: BTreeMap<String, String>,
    /// What among the result folders is not a plain file or folder (a symlink), or cannot
    /// be read: never followed, never in `files`.
    pub problems: Vec<Problem>,
    /// The manifest, parsed; `None` when it is missing or not YAML.
    pub manifest: Option<serde_yaml::Value>,
}

/// Every file under the result folders with its sha256 (an empty folder as
/// [`EMPTY_FOLDER`]), read afresh without following a link, and what could not be.
fn digest_results(root: &Path) -> (BTreeMap<String, String>, Vec<Problem>) {
    // A fresh cache: every file is read, no recorded time is trusted.
    let mut cache = StatCache::default();
    let mut files = BTreeMap::new();
    let mut problems = Vec::new();
    for dir in RESULT_DIRS {
        let listing = tree::list(root, dir);
        for path in listing.files {
            match cache.digest_file(root, Path::new(&path)) {
                Ok(digest) => {
                    files.insert(path, digest);
                }
                Err(e) => problems.push(Problem {
                    what: format!("cannot be read: {e}"),
                    fix: format!("make it readable, or remove it: `rm -- {path}`"),
                    path,
                }),
            }
        }
        for folder in listing.empty_folders {
            files.insert(folder, EMPTY_FOLDER.to_string());
        }
        problems.extend(listing.problems);
    }
    (files, problems)
}

impl Results {
    /// The working tree's results; `None` when there is no lock.
    pub fn working(project: &Project) -> anyhow::Result<Option<Results>> {
        let root = &project.root;
        if !root.join(LOCK_FILE).is_file() {
            return Ok(None);
        }
        let lock = of_stages(project, LockFile::load(root)?);
        let (files, problems) = digest_results(root);
        Ok(Some(Results {
            lock,
            files,
            problems,
            manifest: crate::manifest::read(root),
        }))
    }

    /// HEAD's results; `None` when HEAD has no readable lock.
    pub fn at_head(project: &Project, git: &Git) -> Option<Results> {
        let lock = of_stages(
            project,
            serde_yaml::from_slice(&git.at_head(LOCK_FILE)?).ok()?,
        );
        Some(Results {
            lock,
            files: git.results_at_head(),
            problems: Vec::new(),
            manifest: git
                .at_head(MANIFEST_FILE)
                .and_then(|b| serde_yaml::from_slice(&b).ok()),
        })
    }

    /// Lock outputs that are committed (under the result folders) → the recorded sha256.
    pub fn committed_outputs(&self) -> BTreeMap<&str, &str> {
        self.lock
            .stages
            .values()
            .flat_map(|e| &e.outputs)
            .filter(|(p, _)| is_committed(p))
            .map(|(p, d)| (p.as_str(), d.as_str()))
            .collect()
    }

    /// Files under the result folders that no stage wrote (the lock aside).
    pub fn strays(&self) -> BTreeSet<&str> {
        let known = self.committed_outputs();
        self.files
            .keys()
            .map(String::as_str)
            .filter(|p| *p != LOCK_FILE && !known.contains_key(p))
            .collect()
    }

    /// The git sha the manifest names.
    pub fn manifest_commit(&self) -> Option<String> {
        self.manifest.as_ref()?["git"]["sha"]
            .as_str()
            .map(str::to_string)
    }
}

/// The lock's entries of the stages pipeline.yaml has. A run drops the others when it next
/// writes the lock; until then what they wrote counts as written by no stage.
fn of_stages(project: &Project, mut lock: LockFile) -> LockFile {
    lock.stages.retain(|name, _| project.stage(name).is_some());
    lock
}

pub fn is_committed(path: &str) -> bool {
    RESULT_DIRS.iter().any(|d| Path::new(path).starts_with(d))
}
