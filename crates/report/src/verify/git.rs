//! What `repro verify` reads of the project's git repository: files as HEAD or another
//! commit has them, and whether the working tree differs from HEAD. Paths are relative to
//! the project root, which may sit below the repository's top.

use git2::{Repository, Status, StatusOptions};
use repro_engine::fingerprint::MISSING;
use repro_pipeline::paths::RESULT_DIRS;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// A commit this clone does not have, and cannot tell apart from one that does not exist:
/// its history is cut short (`git clone --depth 1`, CI's default checkout).
#[derive(Debug, thiserror::Error)]
#[error("this shallow clone's history does not reach that commit")]
pub struct BeyondShallow;

pub struct Git {
    repo: Repository,
    /// The project root relative to the repository's work tree, `a/b/` or empty.
    prefix: String,
}

impl Git {
    /// The repository holding `root`; `None` outside git.
    pub fn open(root: &Path) -> Option<Git> {
        let repo = Repository::discover(root).ok()?;
        let prefix = crate::diff::repo_prefix(&repo, root).ok()?;
        let prefix = if prefix.is_empty() {
            prefix
        } else {
            format!("{prefix}/")
        };
        Some(Git { repo, prefix })
    }

    fn in_repo(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    /// The commit named by `sha`, which must be HEAD or one of its ancestors; a commit a
    /// shallow clone lacks is [`BeyondShallow`].
    pub fn commit_in_history(&self, sha: &str) -> anyhow::Result<git2::Commit<'_>> {
        let oid = git2::Oid::from_str(sha)?;
        let commit = match self.repo.find_commit(oid) {
            Ok(commit) => commit,
            Err(_) if self.repo.is_shallow() => return Err(BeyondShallow.into()),
            Err(_) => anyhow::bail!("no such commit in this repository"),
        };
        let head = self.repo.head()?.peel_to_commit()?.id();
        if head != oid && !self.repo.graph_descendant_of(head, oid)? {
            anyhow::bail!("that commit is not in the history of HEAD");
        }
        Ok(commit)
    }

    /// The bytes of `rel` in `tree`, `None` when it has no such file.
    pub fn file_in(&self, tree: &git2::Tree, rel: &str) -> Option<Vec<u8>> {
        let entry = tree.get_path(Path::new(&self.in_repo(rel))).ok()?;
        let blob = self.repo.find_blob(entry.id()).ok()?;
        Some(blob.content().to_vec())
    }

    /// HEAD's tree; `None` before the first commit.
    pub fn head_tree(&self) -> Option<git2::Tree<'_>> {
        self.repo.head().ok()?.peel_to_tree().ok()
    }

    /// The bytes of `rel` at HEAD.
    pub fn at_head(&self, rel: &str) -> Option<Vec<u8>> {
        self.file_in(&self.head_tree()?, rel)
    }

    /// Every file under the result folders at HEAD → its sha256.
    pub fn results_at_head(&self) -> BTreeMap<String, String> {
        let mut files = BTreeMap::new();
        let Some(tree) = self.head_tree() else {
            return files;
        };
        for dir in RESULT_DIRS {
            let Ok(entry) = tree.get_path(Path::new(&self.in_repo(dir))) else {
                continue;
            };
            let Ok(sub) = self.repo.find_tree(entry.id()) else {
                continue;
            };
            let _ = sub.walk(git2::TreeWalkMode::PreOrder, |parent, e| {
                if let Ok(blob) = self.repo.find_blob(e.id()) {
                    let path = format!("{dir}/{parent}{}", e.name().unwrap_or_default());
                    files.insert(
                        path,
                        repro_base::tools::hex(&Sha256::digest(blob.content())),
                    );
                }
                git2::TreeWalkResult::Ok
            });
        }
        files
    }

    /// The result folders HEAD has (those `git checkout --` can restore).
    pub fn result_dirs_at_head(&self) -> Vec<&'static str> {
        let Some(tree) = self.head_tree() else {
            return Vec::new();
        };
        RESULT_DIRS
            .into_iter()
            .filter(|d| tree.get_path(Path::new(&self.in_repo(d))).is_ok())
            .collect()
    }

    /// Whether a tracked file under the result folders differs from HEAD (untracked files
    /// do not count: checking out HEAD's results leaves them).
    pub fn results_differ_from_head(&self) -> bool {
        let mut opts = StatusOptions::new();
        opts.include_untracked(false).include_ignored(false);
        for dir in RESULT_DIRS {
            opts.pathspec(self.in_repo(dir));
        }
        self.repo
            .statuses(Some(&mut opts))
            .is_ok_and(|s| !s.is_empty())
    }

    /// `rel`'s state in the index and working tree against HEAD (`CURRENT` when the same,
    /// `WT_NEW` when untracked).
    pub fn status(&self, rel: &str) -> Status {
        self.repo
            .status_file(Path::new(&self.in_repo(rel)))
            .unwrap_or(Status::WT_NEW)
    }

    /// Whether `rel` is in the index (committed or staged).
    pub fn tracked(&self, rel: &str) -> bool {
        self.repo
            .index()
            .is_ok_and(|i| i.get_path(Path::new(&self.in_repo(rel)), 0).is_some())
    }
}

/// The digest a lock records for a dep with these bytes, in the form of `recorded`: the
/// code digest for sources a stage compiles itself (`code:…`), else the sha256; a file
/// that is not there is [`MISSING`].
pub fn dep_digest(bytes: Option<&[u8]>, recorded: &str) -> String {
    match bytes {
        None => MISSING.to_string(),
        Some(b) if recorded.contains(':') => repro_engine::code_digest::code_digest(b),
        Some(b) => repro_base::tools::hex(&Sha256::digest(b)),
    }
}
