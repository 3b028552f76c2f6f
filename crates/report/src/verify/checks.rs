//! What `repro verify` checks in a set of [`Results`]: every output matches the lock and
//! nothing else lies among the results; every stage's source-level inputs (its part of
//! pipeline.yaml, its dep files, the results of the stages it needs) are those the lock
//! recorded; and the manifest names a clean commit, in HEAD's history, whose sources are
//! the ones the results were made from. Each finding carries the [`Fix`] it needs;
//! [`super::advice`] says what that means on this machine.

use super::advice::Fix;
use super::git::{dep_digest, BeyondShallow, Git};
use super::results::{is_committed, Results};
use repro_engine::statcache::StatCache;
use repro_engine::status::recorded_upstream;
use repro_engine::{fingerprint, fingerprint::Inputs};
use repro_engine::{lockfile::LockEntry, lockfile::LockFile};
use repro_pipeline::kind::Overrides;
use repro_pipeline::{paths::LOCK_FILE, paths::MACHINE_LOCAL, paths::MANIFEST_FILE};
use repro_pipeline::{Project, Stage};
use std::collections::{BTreeMap, BTreeSet};

/// One inconsistency, and what kind of action fixes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub what: String,
    pub fix: Fix,
}

fn finding(what: String, fix: Fix) -> Finding {
    Finding { what, fix }
}

/// Everything inconsistent in `results`, against the sources in the working tree.
pub fn findings(project: &Project, results: &Results) -> anyhow::Result<Vec<Finding>> {
    let lock = &results.lock;
    let mut out = output_findings(results);
    out.extend(results.problems.iter().map(|p| {
        finding(
            format!("`{}` {}", p.path, p.what),
            Fix::Remove { fix: p.fix.clone() },
        )
    }));
    out.extend(results.strays().into_iter().map(|p| {
        finding(
            format!("`{p}` is in the results but no stage wrote it"),
            Fix::Stray { path: p.into() },
        )
    }));
    let mut cache = StatCache::load(&project.root);
    for &i in project.dag.topo_order() {
        let stage = &project.stages[i];
        let Some(entry) = lock.stages.get(&stage.name) else {
            out.push(finding(
                format!("stage `{}` has no results in {LOCK_FILE}", stage.name),
                Fix::Rerun { stage: i },
            ));
            continue;
        };
        out.extend(upstream_findings(project, i, lock, entry));
        let now = inputs_now(project, stage, entry, &mut cache)?;
        out.extend(
            spec_changes(stage, &entry.inputs, &now)
                .into_iter()
                .map(|what| {
                    finding(
                        format!("stage `{}`: {what} since its results were made", stage.name),
                        Fix::Spec { stage: i },
                    )
                }),
        );
        out.extend(
            changed_keys(&sources(&entry.inputs.deps), &sources(&now.deps))
                .into_iter()
                .map(|dep| {
                    finding(
                        format!(
                            "stage `{}`: `{dep}` changed since its results were made",
                            stage.name
                        ),
                        Fix::Source {
                            stage: i,
                            path: dep,
                        },
                    )
                }),
        );
        out.extend(machine_local_findings(i, stage, entry, lock));
    }
    out.extend(manifest_findings(project, results));
    Ok(out)
}

/// A stage's inputs from the sources now, under the overrides its lock entry recorded.
pub fn inputs_now(
    project: &Project,
    stage: &Stage,
    entry: &LockEntry,
    cache: &mut StatCache,
) -> anyhow::Result<Inputs> {
    fingerprint::compute(
        project,
        stage,
        entry.inputs.upstream.clone(),
        &Overrides::from_recorded(&entry.inputs.overrides),
        cache,
    )
}

/// Committed outputs whose file is not the one the lock recorded.
fn output_findings(results: &Results) -> Vec<Finding> {
    results
        .committed_outputs()
        .into_iter()
        .filter(|(path, digest)| results.files.get(*path).map(String::as_str) != Some(digest))
        .map(|(path, _)| {
            let what = if results.files.contains_key(path) {
                format!("`{path}` is not the file the run wrote (edited, or left from another run)")
            } else {
                format!("`{path}`, which the run wrote, is missing")
            };
            finding(what, Fix::Output { path: path.into() })
        })
        .collect()
}

/// The stage's recorded view of each stage it needs must be those stages' recorded outputs.
fn upstream_findings(
    project: &Project,
    i: usize,
    lock: &LockFile,
    entry: &LockEntry,
) -> Vec<Finding> {
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
            (expected.as_ref() != entry.inputs.upstream.get(need)).then(|| {
                finding(
                    format!("stage `{stage}` was made from other results of `{need}` than those committed"),
                    Fix::Rerun { stage: i },
                )
            })
        })
        .collect()
}

/// What of a stage's part of pipeline.yaml differs between `was` and `now` (its spec, its
/// `env`, each param the sources decide).
pub fn spec_changes(stage: &Stage, was: &Inputs, now: &Inputs) -> Vec<String> {
    let mut out = Vec::new();
    if was.kind != now.kind || was.command != now.command || was.options != now.options {
        out.push("its spec in pipeline.yaml changed".to_string());
    }
    if was.env != now.env {
        out.push("its `env` changed".to_string());
    }
    let machine = stage.kind.machine_params();
    let params = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter()
            .filter(|(k, _)| !machine.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    for key in changed_keys(&params(&was.params), &params(&now.params)) {
        out.push(format!("param `{key}` changed"));
    }
    out
}

/// Deps that are sources (not machine-local).
fn sources(deps: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    deps.iter()
        .filter(|(k, _)| !k.starts_with(MACHINE_LOCAL))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
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
fn machine_local_findings(
    i: usize,
    stage: &Stage,
    entry: &LockEntry,
    lock: &LockFile,
) -> Vec<Finding> {
    entry
        .inputs
        .deps
        .iter()
        .filter(|(path, _)| path.starts_with(MACHINE_LOCAL))
        .filter_map(|(path, digest)| {
            let (writer, run) = lock
                .stages
                .iter()
                .find(|(_, e)| e.outputs.contains_key(path))?;
            (&run.outputs[path] != digest).then(|| {
                finding(
                    format!(
                        "stage `{}` used a `{path}` that `{writer}` did not record",
                        stage.name
                    ),
                    Fix::Rerun { stage: i },
                )
            })
        })
        .collect()
}

/// The manifest must name a clean commit, in HEAD's history, whose sources are those the
/// lock recorded.
fn manifest_findings(project: &Project, results: &Results) -> Vec<Finding> {
    let rerender = |what: String| finding(what, Fix::Rerender);
    let Some(manifest) = &results.manifest else {
        let Some(w) = crate::manifest::writer(project) else {
            return vec![finding(
                format!("there is no {MANIFEST_FILE}, and no stage writes one"),
                Fix::AddSummary,
            )];
        };
        let name = &project.stages[w].name;
        let recorded = results.committed_outputs().get(MANIFEST_FILE).copied();
        let written = results.files.get(MANIFEST_FILE).map(String::as_str);
        // Said already: its stage never ran, or the file is not the one it wrote.
        if !results.lock.stages.contains_key(name) || recorded.is_some_and(|d| written != Some(d)) {
            return Vec::new();
        }
        return vec![finding(
            format!("{MANIFEST_FILE}, which stage `{name}` wrote, is not readable YAML"),
            Fix::Unreadable { stage: w },
        )];
    };
    let mut out = Vec::new();
    if manifest["git"]["dirty"].as_bool() != Some(false) {
        out.push(rerender(format!(
            "{MANIFEST_FILE} says the results were made from uncommitted sources (git.dirty is not false)"
        )));
    }
    let Some(sha) = results.manifest_commit() else {
        out.push(rerender(format!("{MANIFEST_FILE} names no git commit")));
        return out;
    };
    let short = &sha[..sha.len().min(10)];
    match sources_at(&project.root, &sha, &results.lock) {
        Ok(mismatched) => out.extend(mismatched.into_iter().map(|path| {
            rerender(format!(
                "{MANIFEST_FILE} names commit {short}, but there `{path}` is not the file the results were made from"
            ))
        })),
        Err(e) if e.is::<BeyondShallow>() => out.push(finding(
            format!("{MANIFEST_FILE} names commit {short}, which this shallow clone's history does not reach"),
            Fix::Deepen,
        )),
        Err(e) => out.push(rerender(format!("{MANIFEST_FILE} names commit {short}: {e:#}"))),
    }
    out
}

/// Dep files recorded in the lock whose content at commit `sha` differs from the record.
fn sources_at(root: &std::path::Path, sha: &str, lock: &LockFile) -> anyhow::Result<Vec<String>> {
    let git =
        Git::open(root).ok_or_else(|| anyhow::anyhow!("the project is not in a git repository"))?;
    let tree = git.commit_in_history(sha)?.tree()?;
    let mut mismatched = BTreeSet::new();
    for entry in lock.stages.values() {
        for (path, recorded) in &entry.inputs.deps {
            if path.starts_with(MACHINE_LOCAL) || is_committed(path) {
                continue;
            }
            if &dep_digest(git.file_in(&tree, path).as_deref(), recorded) != recorded {
                mismatched.insert(path.clone());
            }
        }
    }
    Ok(mismatched.into_iter().collect())
}
