//! The action that fixes each problem `repro verify` finds, as things stand on this
//! machine: a file to restore or delete, or the commands to run — never one that cannot
//! work here. Rerunning a stage this machine cannot run (no GPU, a declared tool missing)
//! only keeps its old results, so such a rerun is sent to a machine that has what it
//! needs. Going back to the committed results is offered where it would fix the problem:
//! the working tree's results differ from HEAD's, and HEAD's pass every check.

use super::checks::{self, Finding};
use super::git::{dep_digest, Git};
use super::machine::{lack, Lack};
use super::results::Results;
use git2::Status;
use repro_engine::statcache::StatCache;
use repro_engine::{fingerprint, fingerprint::MISSING};
use repro_pipeline::kind::Overrides;
use repro_pipeline::paths::LOCK_FILE;
use repro_pipeline::Project;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// What this machine lacks to run each stage, indexed like `project.stages`.
fn machine_lacks(
    project: &Project,
    results: Option<&Results>,
    cache: &mut StatCache,
) -> anyhow::Result<Vec<Lack>> {
    let mut lacks = Vec::new();
    for stage in &project.stages {
        let entry = results.and_then(|r| r.lock.stages.get(&stage.name));
        let now = match entry {
            Some(e) => checks::inputs_now(project, stage, e, cache)?,
            None => fingerprint::compute(
                project,
                stage,
                BTreeMap::new(),
                &Overrides::default(),
                cache,
            )?,
        };
        lacks.push(lack(entry.map(|e| &*e.inputs), &now));
    }
    Ok(lacks)
}

/// Whether checking out HEAD's results fixes `findings` (strays aside, which checking out
/// leaves): the working tree's differ from them, and they pass every check.
fn restoring_head_fixes(project: &Project, git: &Git, findings: &[Finding]) -> bool {
    findings.iter().any(|f| !matches!(f.fix, Fix::Stray { .. }))
        && git.results_differ_from_head()
        && Results::at_head(project, git)
            .is_some_and(|head| checks::findings(project, &head).is_ok_and(|f| f.is_empty()))
}

/// What kind of action fixes a finding.
#[derive(Debug, Clone, PartialEq)]
pub enum Fix {
    /// There is no lock, or none repro can read.
    NoLock { unreadable: bool },
    /// A committed output is not the file the lock recorded.
    Output { path: String },
    /// A file among the results that no stage wrote.
    Stray { path: String },
    /// Among the results, what is not a plain file or folder (a symlink), or cannot be
    /// read: `fix` says how to remove it, never through a link.
    Remove { fix: String },
    /// The stage must run again: it never ran, or what it was made from is not what is
    /// recorded now.
    Rerun { stage: usize },
    /// The stage's part of pipeline.yaml is not what its results were made from.
    Spec { stage: usize },
    /// A source file of the stage is not the one its results were made from.
    Source { stage: usize, path: String },
    /// The manifest must be written again, at a clean commit that has the sources.
    Rerender,
    /// The manifest names a commit beyond the history a shallow clone has.
    Deepen,
    /// The stage that writes the manifest wrote something else than YAML.
    Unreadable { stage: usize },
    /// No stage writes the manifest.
    AddSummary,
}

pub struct Advice<'a> {
    project: &'a Project,
    /// The working tree's results; `None` when there is no lock.
    results: Option<&'a Results>,
    git: Option<Git>,
    /// What this machine lacks to run each stage, indexed like `project.stages`.
    lacks: Vec<Lack>,
    /// `git checkout -- artifacts reports`, when that fixes what is found.
    restore_all: Option<String>,
    /// Stages whose part of pipeline.yaml as HEAD has it is what their results were made from.
    spec_at_head: BTreeSet<usize>,
}

impl<'a> Advice<'a> {
    /// What this machine and the repository offer to fix `findings`.
    pub fn new(
        project: &'a Project,
        results: Option<&'a Results>,
        findings: &[Finding],
    ) -> anyhow::Result<Advice<'a>> {
        let git = Git::open(&project.root);
        let mut cache = StatCache::load(&project.root);
        let lacks = machine_lacks(project, results, &mut cache)?;
        let restore_all = git
            .as_ref()
            .filter(|g| restoring_head_fixes(project, g, findings))
            .map(|g| format!("git checkout -- {}", g.result_dirs_at_head().join(" ")));
        let mut advice = Advice {
            project,
            results,
            git,
            lacks,
            restore_all,
            spec_at_head: BTreeSet::new(),
        };
        advice.spec_at_head = advice.specs_head_restores(findings, &mut cache);
        Ok(advice)
    }

    /// The stages of `Spec` findings that restoring pipeline.yaml from HEAD would fix.
    fn specs_head_restores(&self, findings: &[Finding], cache: &mut StatCache) -> BTreeSet<usize> {
        let stages: BTreeSet<usize> = findings
            .iter()
            .filter_map(|f| match f.fix {
                Fix::Spec { stage } => Some(stage),
                _ => None,
            })
            .collect();
        let file = self.pipeline_file();
        let (Some(git), Some(results)) = (&self.git, self.results) else {
            return BTreeSet::new();
        };
        if stages.is_empty() || git.status(&file) == Status::CURRENT {
            return BTreeSet::new();
        }
        let Some(text) = git.at_head(&file).and_then(|b| String::from_utf8(b).ok()) else {
            return BTreeSet::new();
        };
        let Ok(head) = repro_pipeline::load::load_str(
            &text,
            &self.project.file,
            &self.project.root,
            &self.project.kinds,
        ) else {
            return BTreeSet::new();
        };
        stages
            .into_iter()
            .filter(|&i| {
                let name = &self.project.stages[i].name;
                let (Some(stage), Some(entry)) = (head.stage(name), results.lock.stages.get(name))
                else {
                    return false;
                };
                checks::inputs_now(&head, stage, entry, cache)
                    .is_ok_and(|now| checks::spec_changes(stage, &entry.inputs, &now).is_empty())
            })
            .collect()
    }

    /// The action that fixes a finding of this kind here.
    pub fn action(&self, fix: &Fix) -> String {
        match fix {
            Fix::NoLock { unreadable } => {
                match &self.restore_all {
                    Some(cmd) => format!("restore the committed results: `{cmd}`"),
                    None if *unreadable => {
                        format!("delete it: `rm -- {LOCK_FILE}`, then {}", self.rerun())
                    }
                    None => self.rerun(),
                }
            }
            Fix::Output { path } => {
                let recorded = self.results.and_then(|r| {
                    r.committed_outputs()
                        .get(path.as_str())
                        .map(|d| d.to_string())
                });
                let at_head = self
                    .git
                    .as_ref()
                    .and_then(|g| g.at_head(path))
                    .map(|b| repro_base::tools::hex(&Sha256::digest(b)));
                if recorded.is_some() && at_head == recorded {
                    return format!("restore it: `git checkout -- {path}`");
                }
                self.or_restore(self.rerun())
            }
            Fix::Stray { path } => match &self.git {
                Some(g) if g.tracked(path) && g.status(path) == Status::CURRENT => {
                    format!("delete it: `git rm -- {path}`")
                }
                Some(g) if g.tracked(path) => format!("delete it: `git rm -f -- {path}`"),
                _ => format!("delete it: `rm -- {path}`"),
            },
            Fix::Remove { fix } => fix.clone(),
            Fix::Rerun { .. } => self.or_restore(self.rerun()),
            Fix::Spec { stage } => {
                let file = self.pipeline_file();
                let then = self.commit_then(&file, self.rerun());
                if self.spec_at_head.contains(stage) {
                    format!("restore `{file}`: `git checkout -- {file}`; or {then}")
                } else {
                    self.or_restore(then)
                }
            }
            Fix::Source { stage, path } => {
                let name = &self.project.stages[*stage].name;
                let recorded = self
                    .results
                    .and_then(|r| r.lock.stages.get(name))
                    .and_then(|e| e.inputs.deps.get(path));
                let restorable = recorded.is_some_and(|r| {
                    self.git
                        .as_ref()
                        .is_some_and(|g| &dep_digest(g.at_head(path).as_deref(), r) == r)
                });
                let then = self.commit_then(path, self.rerun());
                match recorded {
                    Some(r) if restorable && r == MISSING => {
                        format!("remove it: `rm -- {path}`; or {then}")
                    }
                    Some(_) if restorable => {
                        format!("restore it: `git checkout -- {path}`; or {then}")
                    }
                    _ => self.or_restore(then),
                }
            }
            Fix::Rerender => self.rerender(),
            // `repro commit` puts the results right above the sources' commit.
            Fix::Deepen => "fetch the history it is in: `git fetch --deepen=1` (a clone with `--depth 2` has it; in GitHub Actions, `fetch-depth: 2`), then `repro verify` again".into(),
            Fix::Unreadable { stage } => {
                let name = &self.project.stages[*stage].name;
                format!(
                    "make stage `{name}` write YAML there (a summarize stage renders its `manifest_template`), then commit the change, then {}",
                    self.rerender()
                )
            }
            Fix::AddSummary => self.add_summary(),
        }
    }

    /// Run what is stale again (`repro run` reaches it and every stage after it), then
    /// commit: here when this machine can run every stage, else [`Self::where_to_commit`].
    fn rerun(&self) -> String {
        format!(
            "run `repro run`{}, then `repro commit`",
            self.where_to_commit()
        )
    }

    /// Where results can be committed: `repro commit` refuses results this machine only
    /// keeps (they were not measured for the sources being committed), so when any stage
    /// lacks something here, ` on a machine with` what they lack; else nothing (here).
    /// Never an override.
    fn where_to_commit(&self) -> String {
        let mut lacking = Lack::default();
        for lack in &self.lacks {
            lacking.merge(lack);
        }
        if lacking.is_empty() {
            String::new()
        } else {
            format!(" on a machine with {lacking}")
        }
    }

    /// `action`, or going back to the committed results where that fixes everything found.
    fn or_restore(&self, action: String) -> String {
        match &self.restore_all {
            Some(cmd) => format!("{action}; or go back to the committed results: `{cmd}`"),
            None => action,
        }
    }

    /// `action`, after committing `file` where it differs from HEAD: results are committed
    /// from a clean commit whose sources made them.
    fn commit_then(&self, file: &str, action: String) -> String {
        match &self.git {
            Some(g) if g.status(file) != Status::CURRENT => {
                format!("commit `{file}`, then {action}")
            }
            _ => action,
        }
    }

    /// Write the manifest again with its stage, at a clean commit.
    fn rerender(&self) -> String {
        let (Some(_), Some(stage)) = (
            crate::manifest::writer(self.project),
            crate::manifest::rewrite(self.project),
        ) else {
            return self.add_summary();
        };
        let dirty = repro_gpu::env::git_state(&self.project.root).is_some_and(|g| g.dirty);
        let first = match &self.git {
            None => "put the project in a git repository (`git init`) and commit its sources, then ",
            Some(_) if dirty => {
                "commit (or remove) the changes `git status` lists outside artifacts/ and reports/, then "
            }
            Some(_) => "",
        };
        let run = format!("{stage}{}, then `repro commit`", self.where_to_commit());
        self.or_restore(format!("{first}write it again: {run}"))
    }

    /// Add a summarize stage, which writes the manifest.
    fn add_summary(&self) -> String {
        let dag = &self.project.dag;
        let sinks: Vec<&str> = (0..self.project.stages.len())
            .filter(|&i| dag.dependants(i).is_empty())
            .map(|i| dag.name(i))
            .collect();
        let name = ["summary", "summarize", "results-summary"]
            .into_iter()
            .find(|n| self.project.stage(n).is_none())
            .unwrap_or("summary");
        let file = self.pipeline_file();
        format!(
            "add a stage that writes it to {file}, under `stages:` (`{name}: {{uses: summarize, needs: [{}]}}`), then commit `{file}`, then run `repro run`{}, then `repro commit`",
            sinks.join(", "),
            self.where_to_commit()
        )
    }

    /// The pipeline file, relative to the project root (where it lives).
    fn pipeline_file(&self) -> String {
        self.project
            .file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "pipeline.yaml".into())
    }
}
