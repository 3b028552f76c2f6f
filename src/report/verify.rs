//! `repro verify`: without a GPU, check that the committed results are what the committed
//! sources produced — every output matches the lock; every stage's source-level inputs
//! (pipeline.yaml's spec of it, its dep files, the results of the stages it needs) are
//! those the lock recorded; and the manifest names a clean commit whose sources are the
//! ones the results were made from. What a stage records of the machine (GPU, driver,
//! tool versions, the arch chosen for the GPU) is not compared: verifying needs no GPU.

use super::manifest::MANIFEST;
use super::state::{RunState, LOCK};
use crate::engine::fingerprint::{self, Inputs};
use crate::engine::lockfile::{LockEntry, LockFile};
use crate::engine::statcache::StatCache;
use crate::engine::status::recorded_upstream;
use crate::pipeline::paths::RESULT_DIRS;
use crate::pipeline::{Project, Stage};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Deps under here are machine-local (cubins): a fresh clone has none. They are checked
/// against the lock entry of the stage that wrote them instead.
const MACHINE_LOCAL: &str = ".repro/";

/// What `repro verify` found: the commit the results name, and every problem.
#[derive(Debug, Default)]
pub struct Verdict {
    pub stages: usize,
    pub outputs: usize,
    /// The manifest's git sha, when it names one.
    pub commit: Option<String>,
    pub problems: Vec<String>,
}

/// Check the committed results of `project`.
pub fn verify(project: &Project) -> anyhow::Result<Verdict> {
    let root = &project.root;
    let mut verdict = Verdict::default();
    if !root.join(LOCK).is_file() {
        verdict
            .problems
            .push(format!("there is no {LOCK}: no results were committed"));
        return Ok(verdict);
    }
    let lock = LockFile::load(root)?;
    let names = project.stages.iter().map(|s| s.name.as_str());
    let state = RunState::load(root, names)?;
    verdict.stages = lock.stages.len();
    verdict.outputs = committed_outputs(&lock).len();
    for path in state.changed_outputs(root) {
        verdict.problems.push(format!(
            "`{path}` is not the file the run wrote (edited, or left from another run): restore it with `git checkout`, or rerun `repro run`"
        ));
    }
    verdict.problems.extend(stray_files(root, &lock));
    let mut cache = StatCache::load(root);
    for &i in project.dag.topo_order() {
        let stage = &project.stages[i];
        let Some(entry) = lock.stages.get(&stage.name) else {
            verdict.problems.push(format!(
                "stage `{}` has no results in {LOCK}: run `repro run`",
                stage.name
            ));
            continue;
        };
        verdict
            .problems
            .extend(upstream_problems(project, i, &lock, entry));
        let now = fingerprint::compute(
            project,
            stage,
            entry.inputs.upstream.clone(),
            &entry.inputs.overrides,
            &mut cache,
        )?;
        verdict
            .problems
            .extend(input_problems(stage, &entry.inputs, &now));
        verdict
            .problems
            .extend(machine_local_problems(stage, entry, &lock));
    }
    let (commit, problems) = manifest_problems(root, &lock);
    verdict.commit = commit;
    verdict.problems.extend(problems);
    Ok(verdict)
}

/// Lock outputs that are committed (under `artifacts/` or `reports/`).
fn committed_outputs(lock: &LockFile) -> BTreeSet<&str> {
    lock.stages
        .values()
        .flat_map(|e| e.outputs.keys())
        .map(String::as_str)
        .filter(|p| is_committed(p))
        .collect()
}

fn is_committed(path: &str) -> bool {
    RESULT_DIRS.iter().any(|d| Path::new(path).starts_with(d))
}

/// Files under the result folders that no stage wrote.
fn stray_files(root: &Path, lock: &LockFile) -> Vec<String> {
    let known = committed_outputs(lock);
    let mut found = Vec::new();
    for dir in RESULT_DIRS {
        let mut cache = StatCache::default();
        if let Ok(tree) = cache.digest_tree(root, Path::new(dir)) {
            found.extend(tree.into_keys());
        }
    }
    found
        .into_iter()
        .filter(|p| p != LOCK && !known.contains(p.as_str()))
        .map(|p| {
            format!("`{p}` is in the results but no stage wrote it: remove it, or declare it as an output and rerun")
        })
        .collect()
}

/// The stage's recorded view of each stage it needs must be those stages' recorded outputs.
fn upstream_problems(
    project: &Project,
    i: usize,
    lock: &LockFile,
    entry: &LockEntry,
) -> Vec<String> {
    let stage = &project.stages[i].name;
    let early_cutoff = project.stages[i].kind.early_cutoff();
    project
        .dag
        .needs(i)
        .iter()
        .filter_map(|&j| {
            let need = &project.stages[j].name;
            let expected = lock
                .stages
                .get(need)
                .map(|run| recorded_upstream(run, early_cutoff));
            let recorded = entry.inputs.upstream.get(need);
            (expected.as_ref() != recorded).then(|| {
                let on = match entry.inputs.hardware.as_deref() {
                    Some(hw) if !hw.starts_with("no GPU") => {
                        format!(" on a machine that can measure it ({hw})")
                    }
                    _ => String::new(),
                };
                format!("stage `{stage}` was made from other results of `{need}` than those committed: run `repro run`{on}, then `repro commit`")
            })
        })
        .collect()
}

/// Source-level differences between what the lock recorded and the checkout now.
fn input_problems(stage: &Stage, was: &Inputs, now: &Inputs) -> Vec<String> {
    let name = &stage.name;
    let mut out = Vec::new();
    let mut note = |what: String| {
        out.push(format!(
            "stage `{name}`: {what} since its results were made: rerun `repro run`"
        ))
    };
    if was.kind != now.kind || was.command != now.command || was.options != now.options {
        note("its spec in pipeline.yaml changed".into());
    }
    if was.env != now.env {
        note("its `env` changed".into());
    }
    let machine = stage.kind.machine_params();
    let params = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .filter(|(k, _)| !machine.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    for key in changed_keys(&params(&was.params), &params(&now.params)) {
        note(format!("param `{key}` changed"));
    }
    let sources = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .filter(|(k, _)| !k.starts_with(MACHINE_LOCAL))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    for dep in changed_keys(&sources(&was.deps), &sources(&now.deps)) {
        note(format!("`{dep}` changed"));
    }
    out
}

fn changed_keys(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Machine-local deps (cubins) must be what the stage that wrote them recorded.
fn machine_local_problems(stage: &Stage, entry: &LockEntry, lock: &LockFile) -> Vec<String> {
    entry
        .inputs
        .deps
        .iter()
        .filter(|(path, _)| path.starts_with(MACHINE_LOCAL))
        .filter_map(|(path, digest)| {
            let writer = lock
                .stages
                .iter()
                .find(|(_, e)| e.outputs.contains_key(path));
            match writer {
                Some((_, e)) if &e.outputs[path] == digest => None,
                Some((w, _)) => Some(format!(
                    "stage `{}` used a `{path}` that `{w}` did not record: rerun `repro run`",
                    stage.name
                )),
                None => None,
            }
        })
        .collect()
}

/// The manifest must name a clean commit, in HEAD's history, whose sources are those the
/// lock recorded. Returns that commit and the problems.
fn manifest_problems(root: &Path, lock: &LockFile) -> (Option<String>, Vec<String>) {
    let mut problems = Vec::new();
    let Some(manifest) = super::manifest::read(root) else {
        problems.push(format!("there is no readable {MANIFEST}: run `repro run`"));
        return (None, problems);
    };
    let git = &manifest["git"];
    let sha = git["sha"].as_str().map(str::to_string);
    if git["dirty"].as_bool() != Some(false) {
        problems.push(format!(
            "{MANIFEST} says the results were made from uncommitted sources (git.dirty is not false): commit the sources, rerun `repro run`, then `repro commit`"
        ));
    }
    let Some(sha) = sha else {
        problems.push(format!(
            "{MANIFEST} names no git commit: run `repro run` inside the repository"
        ));
        return (None, problems);
    };
    match sources_at(root, &sha, lock) {
        Ok(mismatched) => problems.extend(mismatched.into_iter().map(|path| {
            format!(
                "{MANIFEST} names commit {}, but there `{path}` is not the file the results were made from: rerun `repro run` from a clean commit, then `repro commit`",
                &sha[..sha.len().min(10)]
            )
        })),
        Err(e) => problems.push(format!("{MANIFEST} names commit {sha}: {e:#}")),
    }
    (Some(sha), problems)
}

/// Dep files recorded in the lock whose content at commit `sha` differs from the record.
fn sources_at(root: &Path, sha: &str, lock: &LockFile) -> anyhow::Result<Vec<String>> {
    let repo = git2::Repository::discover(root)?;
    let oid = git2::Oid::from_str(sha)?;
    let commit = repo
        .find_commit(oid)
        .map_err(|_| anyhow::anyhow!("no such commit in this repository"))?;
    let head = repo.head()?.peel_to_commit()?.id();
    if head != oid && !repo.graph_descendant_of(head, oid)? {
        anyhow::bail!("that commit is not in the history of HEAD");
    }
    let tree = commit.tree()?;
    let prefix = super::diff::repo_prefix(&repo, root)?;
    let mut mismatched = BTreeSet::new();
    for entry in lock.stages.values() {
        for (path, recorded) in &entry.inputs.deps {
            if path.starts_with(MACHINE_LOCAL) || is_committed(path) {
                continue;
            }
            let in_repo = if prefix.is_empty() {
                path.clone()
            } else {
                format!("{prefix}/{path}")
            };
            let content = tree
                .get_path(Path::new(&in_repo))
                .ok()
                .and_then(|e| repo.find_blob(e.id()).ok())
                .map(|b| b.content().to_vec());
            let digest = match &content {
                None => fingerprint::MISSING.to_string(),
                Some(bytes) if recorded.contains(':') => {
                    crate::engine::code_digest::code_digest(bytes)
                }
                Some(bytes) => {
                    use sha2::Digest;
                    crate::tools::hex(&sha2::Sha256::digest(bytes))
                }
            };
            if &digest != recorded {
                mismatched.insert(path.clone());
            }
        }
    }
    Ok(mismatched.into_iter().collect())
}
