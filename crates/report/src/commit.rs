//! `repro commit [-m MSG] [--allow-failed]`: commit `artifacts/` (the lock included) and
//! `reports/` — and nothing else — with a message listing the gates and headline numbers.
//!
//! The new commit's tree is HEAD's tree with only those two folders replaced by their
//! working-tree contents, so other changes already staged stay staged and uncommitted. It
//! is made by the `git` command line ([`super::git_cli`]), so hooks, clean filters (Git
//! LFS), signing and git's environment variables apply; when git refuses, the index is
//! left as it was found. No commit is made while another repro runs in the project.
//!
//! It refuses (exit 1, each reason with the flag that overrides it) when the results are
//! not ones to commit: a stage is stale, never ran, or kept results from another machine
//! because it could not run here, or the report is out of date with its inputs
//! (`--allow-stale`, judged as `repro status` judges); a measurement HEAD has is missing
//! or unmeasured here (`--allow-lost`); a source file the results were made from differs
//! from HEAD (`--allow-dirty`: commit the source first, so the manifest names that
//! commit); HEAD's results were measured on a GPU model these replace
//! (`--allow-other-gpu`); a stage or gate failed (`--allow-failed`).

use super::artifacts::Artifacts;
use super::context::{Builder, ReportContext};
use super::state::{RunState, LOCK};
use repro_engine::project_lock;
use repro_engine::project_lock::Held;
use repro_engine::project_lock::ProjectLock;
use repro_engine::status::State;
use repro_pipeline::builtin_kind::BuiltinKind;
use repro_pipeline::Project;
use std::path::Path;

/// The folders `repro commit` commits, relative to the project root.
pub use repro_pipeline::paths::RESULT_DIRS as COMMITTED;

/// What `repro commit` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// A new commit (its id) with this message.
    Commit { id: git2::Oid, message: String },
    /// The folders are as HEAD has them already.
    NothingToCommit,
}

/// Which refusals the user overrides.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allow {
    /// `--allow-failed`: a gate or stage failed.
    pub failed: bool,
    /// `--allow-stale`: a stage is stale, kept from another machine or never ran; the
    /// report is out of date with its inputs; outputs differ from the lock.
    pub stale: bool,
    /// `--allow-lost`: a measurement HEAD has is missing or unmeasured here.
    pub lost: bool,
    /// `--allow-dirty`: sources the results were made from differ from HEAD.
    pub dirty: bool,
    /// `--allow-other-gpu`: HEAD's results were measured on other GPU models.
    pub other_gpu: bool,
}

/// One reason not to commit, and the flag that overrides it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub text: String,
    pub flag: &'static str,
}

impl Problem {
    fn new(flag: &'static str, text: String) -> Problem {
        Problem { text, flag }
    }

    fn allowed(&self, allow: Allow) -> bool {
        match self.flag {
            "--allow-failed" => allow.failed,
            "--allow-stale" => allow.stale,
            "--allow-lost" => allow.lost,
            "--allow-other-gpu" => allow.other_gpu,
            _ => allow.dirty,
        }
    }
}

/// Why the current results should not be committed (empty: fine to commit).
pub fn problems(
    project: &Project,
    state: &RunState,
    report: &ReportContext,
) -> anyhow::Result<Vec<Problem>> {
    let root = &project.root;
    let mut out = Vec::new();
    let stale = |text: String| Problem::new("--allow-stale", text);
    if !state.lock_found {
        out.push(stale(format!(
            "there is no {LOCK}: nothing has run here; run `repro run` first"
        )));
        return Ok(out);
    }
    for (name, s) in &state.stages {
        if s.failed() {
            out.push(Problem::new(
                "--allow-failed",
                format!(
                    "stage `{name}` failed{}; fix it and rerun `repro run`",
                    s.reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    for s in repro_engine::status::evaluate_project(project)? {
        let name = &project.stages[s.index].name;
        let what = match &s.state {
            // Failures are reported above, from the engine's records.
            State::UpToDate | State::Failed(_) => continue,
            State::NeverRun => "has not run (no entry in the lock)".to_string(),
            State::Kept { reason, .. } => format!(
                "was not re-run on this machine ({reason}): its results are {}",
                repro_engine::status::kept_from(project, s.index)
            ),
            State::Stale(changes) => format!("is stale ({})", what_changed(changes)),
        };
        let text = if s.inputs.kind == BuiltinKind::Summarize.as_str() {
            format!("the report is out of date with its inputs: stage `{name}` {what}")
        } else {
            format!("stage `{name}` {what}")
        };
        out.push(stale(format!(
            "{text}; run `repro run` on a machine that can measure it (`repro status` says more)"
        )));
    }
    let changed = state.changed_outputs(root);
    if !changed.is_empty() {
        out.push(stale(format!(
            "outputs differ from what {LOCK} recorded (stale or edited): {}; rerun `repro run`",
            changed.join(", ")
        )));
    }
    out.extend(head_comparison(root));
    out.extend(
        dirty_sources(project)?
            .into_iter()
            .map(|t| Problem::new("--allow-dirty", t)),
    );
    for g in &report.failed_gates {
        out.push(Problem::new("--allow-failed", format!("gate failed: {g}")));
    }
    if let Some(first) = report.not_measured.first() {
        out.push(stale(format!(
            "{} result(s) were not measured for these sources (`{}`: {}); run `repro run` on a GPU",
            report.not_measured.len(),
            first.name,
            first.reason
        )));
    }
    Ok(out)
}

/// The first few items, then how many more.
fn listed(items: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut text = items[..items.len().min(SHOWN)].join(", ");
    if items.len() > SHOWN {
        text.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    text
}

/// What changed, by name only (`repro status` gives the values), at most five.
fn what_changed(changes: &[repro_engine::status::Change]) -> String {
    let mut names: Vec<String> = changes
        .iter()
        .map(|c| {
            if c.name.is_empty() {
                c.what.to_string()
            } else {
                format!("{} `{}`", c.what, c.name)
            }
        })
        .collect();
    names.dedup();
    format!("{} changed", listed(&names))
}

/// What committing would do to the results HEAD holds: measurements lost (or no longer
/// checked), and results of another GPU model replaced.
fn head_comparison(root: &Path) -> Vec<Problem> {
    let Ok(d) = super::diff::diff(root, "HEAD") else {
        // No HEAD, or HEAD has no results: nothing can be lost.
        return Vec::new();
    };
    let mut out = Vec::new();
    let rows: Vec<String> = d
        .rows
        .iter()
        .filter(|r| r.verdict == super::diff::Verdict::Lost)
        .map(|r| {
            format!(
                "{} on `{}` ({} µs)",
                r.name,
                r.shape,
                super::context::num(r.before.map(|m| m.p50_us), 2)
            )
        })
        .collect();
    let gates: Vec<String> = d
        .flipped_gates
        .iter()
        .filter(|g| g.after.is_none())
        .map(|g| format!("`{}`", g.gate))
        .collect();
    for (items, what) in [
        (rows, "measured at HEAD and not measured now"),
        (gates, "checked at HEAD and not checked now"),
        (
            d.lost_profiles.clone(),
            "profiled at HEAD and not profiled now",
        ),
    ] {
        if !items.is_empty() {
            out.push(Problem::new(
                "--allow-lost",
                format!("{} {what}: {}", items.len(), listed(&items)),
            ));
        }
    }
    let replaced: Vec<&String> = d
        .gpus_before
        .iter()
        .filter(|g| !d.gpus_after.is_empty() && !d.gpus_after.contains(g))
        .collect();
    if !replaced.is_empty() {
        out.push(Problem::new(
            "--allow-other-gpu",
            format!(
                "HEAD's results were measured on {}, these on {}: keep each machine's results on a branch of its own (docs/guide/results.md)",
                replaced.iter().map(|g| g.as_str()).collect::<Vec<_>>().join(", "),
                d.gpus_after.join(", ")
            ),
        ));
    }
    out
}

/// Sources the results were made from (dep files in the lock, outside the result folders
/// and `.repro/`) that differ from HEAD, and a manifest that says they were dirty.
fn dirty_sources(project: &Project) -> anyhow::Result<Vec<String>> {
    let root = &project.root;
    // Rerunning does not write the manifest again (its inputs are the same): its stage is
    // run by name.
    let rewrite = super::manifest::rewrite(project)
        .map(|stage| format!("write the manifest again: {stage}"))
        .unwrap_or_else(|| "rerun `repro run`".into());
    let lock = repro_engine::lockfile::LockFile::load(root)?;
    let Ok(repo) = git2::Repository::discover(root) else {
        return Ok(Vec::new());
    };
    let prefix = super::diff::repo_prefix(&repo, root)?;
    let mut dirty = std::collections::BTreeSet::new();
    for entry in lock.stages.values() {
        for path in entry.inputs.deps.keys() {
            if path.starts_with(".repro/")
                || COMMITTED.iter().any(|d| Path::new(path).starts_with(d))
            {
                continue;
            }
            let in_repo = if prefix.is_empty() {
                path.clone()
            } else {
                format!("{prefix}/{path}")
            };
            let clean = match repo.status_file(Path::new(&in_repo)) {
                Ok(s) => s.is_empty() || s == git2::Status::CURRENT,
                // In neither HEAD nor the working tree: as recorded only if recorded missing.
                Err(_) => entry.inputs.deps[path] == repro_engine::fingerprint::MISSING,
            };
            if !clean {
                dirty.insert(path.clone());
            }
        }
    }
    let mut out: Vec<String> = dirty
        .into_iter()
        .map(|p| format!("`{p}`, an input of the results, differs from HEAD: commit the source first, then {rewrite}, then `repro commit` (the manifest then names that commit)"))
        .collect();
    let dirty_run =
        super::manifest::read(root).is_some_and(|m| m["git"]["dirty"].as_bool() == Some(true));
    if out.is_empty() && dirty_run {
        out.push(format!(
            "{} says the run was made from uncommitted sources (git dirty): commit them, then {rewrite}, then `repro commit`",
            super::manifest::MANIFEST
        ));
    }
    Ok(out)
}

/// Check, then commit the results of the project at `root`.
pub fn commit(project: &Project, message: Option<&str>, allow: Allow) -> anyhow::Result<Committed> {
    let root = &project.root;
    let _lock = hold_project(root)?;
    let pipeline = &project.pipeline;
    let artifacts = Artifacts::load(root)?;
    let state = RunState::load(root, pipeline.stages.keys().map(String::as_str))?;
    let manifest = super::manifest::read(root);
    let env = repro_gpu::env::capture(
        root,
        &crate::capture::capture_options(pipeline, &artifacts, &state, manifest.as_ref()),
    );
    let report = Builder::new(pipeline, &project.configs, &artifacts, &state, &env).build();
    let problems = problems(project, &state, &report)?;
    let refused: Vec<&Problem> = problems.iter().filter(|p| !p.allowed(allow)).collect();
    if !refused.is_empty() {
        let mut flags: Vec<&str> = refused.iter().map(|p| p.flag).collect();
        flags.sort();
        flags.dedup();
        anyhow::bail!(
            "refusing to commit these results:\n  - {}\nFix them and rerun, or pass {} to commit them anyway",
            refused
                .iter()
                .map(|p| format!("{} (override: {})", p.text, p.flag))
                .collect::<Vec<_>>()
                .join("\n  - "),
            flags.join(" ")
        );
    }
    let overridden: Vec<String> = problems.iter().map(|p| p.text.clone()).collect();
    let text = commit_message(message, &report, &overridden);
    let repo = git2::Repository::discover(root).map_err(|e| {
        anyhow::anyhow!(
            "{} is not inside a git repository: {}",
            root.display(),
            e.message()
        )
    })?;
    if !super::git_cli::commit_folders(root, &COMMITTED, &text)? {
        return Ok(Committed::NothingToCommit);
    }
    let head = repo.head()?.peel_to_commit()?;
    Ok(Committed::Commit {
        id: head.id(),
        message: head.message().unwrap_or(&text).to_string(),
    })
}

/// The project lock, held while the results are checked and committed: a run under way
/// may have half-written its outputs, and none may start until the commit is made.
fn hold_project(root: &Path) -> anyhow::Result<ProjectLock> {
    let never = std::sync::atomic::AtomicBool::new(false);
    project_lock::acquire(root, false, &never, |_| {}).map_err(|e| match e.downcast::<Held>() {
        Ok(Held { holder, file }) => anyhow::anyhow!(
            "refusing to commit: another repro is running in this project ({holder}{}): the outputs of the stages it runs may be half-written\n  help: wait for it to finish, then rerun `repro commit` (lock file: {})",
            if holder.run.is_empty() { String::new() } else { format!(", run {}", holder.run) },
            file.display()
        ),
        Err(e) => e,
    })
}

/// The commit message: a subject (the user's, or the best variant's headline), the headline
/// numbers, the gates, and — with `--allow-failed` — what was wrong.
pub fn commit_message(user: Option<&str>, r: &ReportContext, problems: &[String]) -> String {
    let first = r.workloads.first();
    let best_row = first.and_then(|w| w.headline.rows.iter().find(|row| row.best));
    let subject = match (user, best_row) {
        (Some(m), _) => m.trim().to_string(),
        (None, Some(b)) => format!("repro: {} p50 {} µs on {}", b.name, b.p50, r.primary_shape),
        (None, None) => format!("repro: results on {}", r.primary_shape),
    };
    let mut s = match r.not_measured.len() {
        0 => format!("{subject}\n"),
        n => format!("{subject} (NOT MEASURED: {n} kept from another build)\n"),
    };
    if !r.not_measured.is_empty() {
        s += "\nNot measured for these sources (kept from another build of the kernel):\n";
        for m in &r.not_measured {
            s += &format!("  {}: {}\n", m.name, m.reason);
        }
    }
    let several = r.workloads.len() > 1;
    for w in &r.workloads {
        let which = if several {
            format!("`{}` on {}", w.name, w.primary_shape)
        } else {
            w.primary_shape.clone()
        };
        s += &format!("\nHeadline ({which}, p50 µs, median over seeds):\n");
        for row in &w.headline.rows {
            let tag = match (row.kind.as_str(), row.control, row.best) {
                ("baseline", _, _) => " (baseline)",
                (_, true, _) => " (control)",
                (_, _, true) => " (best)",
                ("tuned", _, _) => " (tuned)",
                _ => "",
            };
            let vs: Vec<String> = w
                .headline
                .baselines
                .iter()
                .zip(&row.vs)
                .filter(|(b, _)| **b != row.name)
                .map(|(b, v)| format!("{v} vs {b}"))
                .collect();
            let vs = if vs.is_empty() {
                String::new()
            } else {
                format!("  {}", vs.join(", "))
            };
            s += &format!("  {}{tag}: {}{vs}  {}\n", row.name, row.p50, row.status);
        }
    }
    s += "\nGates:\n";
    let mut gate_line =
        |name: &str, ran: bool, note: &Option<String>, total: usize, failed: usize| {
            s += &match (ran, failed) {
                (false, _) => format!("  ⏭ {name}: {}\n", note.as_deref().unwrap_or("not run")),
                (true, 0) => format!("  ✅ {name}: {total}/{total} pass\n"),
                (true, f) => format!("  ❌ {name}: {f} of {total} fail\n"),
            };
        };
    let g = &r.gates;
    let fails = |cells: Vec<&String>| cells.iter().filter(|c| c.contains('❌')).count();
    let ptxas = g.ptxas.data.as_deref().unwrap_or_default();
    gate_line(
        "ptxas",
        g.ptxas.ran,
        &g.ptxas.note,
        ptxas.len(),
        fails(ptxas.iter().map(|p| &p.result).collect()),
    );
    let named = |name: &str, w: &crate::context::WorkloadReport| match several {
        true => format!("{name} ({})", w.name),
        false => name.to_string(),
    };
    for w in &r.workloads {
        let corr = w
            .correctness
            .data
            .as_ref()
            .map(|c| c.rows.as_slice())
            .unwrap_or_default();
        gate_line(
            &named("correctness", w),
            w.correctness.ran,
            &w.correctness.note,
            corr.len(),
            fails(corr.iter().map(|c| &c.result).collect()),
        );
    }
    for w in &r.workloads {
        for (name, sec) in [
            ("performance", &w.performance),
            ("baseline speedup", &w.baseline),
        ] {
            let name = named(name, w);
            match &sec.data {
                Some(rows) => {
                    for p in rows {
                        s += &format!(
                            "  {} {name}: {} {} (threshold {})\n",
                            mark_of(&p.result),
                            p.what,
                            p.measured,
                            p.threshold
                        );
                    }
                }
                None => s += &format!("  ⏭ {name}: {}\n", sec.note.as_deref().unwrap_or("not run")),
            }
        }
    }
    if !problems.is_empty() {
        s += "\nCommitted despite (overridden with --allow-* flags):\n";
        for p in problems {
            s += &format!("  - {p}\n");
        }
    }
    s += "\nReport: reports/summary.md. Committed by `repro commit`.\n";
    s
}

/// The leading ✅/❌/— of a result cell.
fn mark_of(result: &str) -> &str {
    result.split_whitespace().next().unwrap_or("—")
}
