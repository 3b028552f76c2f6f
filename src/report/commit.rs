//! `repro commit [-m MSG] [--allow-failed]`: commit `artifacts/` (the lock included) and
//! `reports/` — and nothing else — with a message listing the gates and headline numbers.
//!
//! The new commit's tree is HEAD's tree with only those two folders replaced by their
//! working-tree contents, so other changes already staged stay staged and uncommitted.
//!
//! It refuses, unless `--allow-failed`, when the run is not one to commit: there is no
//! lock (nothing ran), a pipeline stage has no entry in the lock (never ran), the engine
//! recorded a stage as failed, an output no longer matches the hash the lock recorded
//! (artifacts edited or left from another run), or a gate failed. Which inputs changed
//! since the run is the engine's `repro status`; this check reads only the lock and state
//! files (see [`super::state`]).

use super::artifacts::Artifacts;
use super::context::{Builder, ReportContext};
use super::state::{RunState, LOCK};
use crate::pipeline::Pipeline;
use anyhow::Context;
use std::path::Path;

/// The folders `repro commit` commits, relative to the project root.
pub use crate::pipeline::paths::RESULT_DIRS as COMMITTED;

/// What `repro commit` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// A new commit (its id) with this message.
    Commit { id: git2::Oid, message: String },
    /// The folders are as HEAD has them already.
    NothingToCommit,
}

pub fn main(global: &crate::cli::GlobalArgs, args: &crate::cli::CommitArgs) -> anyhow::Result<i32> {
    let project = crate::pipeline::load(&global.file)?;
    match commit(
        &project.root,
        &project.pipeline,
        args.message.as_deref(),
        args.allow_failed,
    )? {
        Committed::Commit { id, message } => {
            let first = message.lines().next().unwrap_or_default();
            println!("committed {} {first}", &id.to_string()[..10]);
        }
        Committed::NothingToCommit => {
            println!("nothing to commit: artifacts/ and reports/ are as HEAD has them");
        }
    }
    Ok(crate::cli::exit::OK)
}

/// Why the current results should not be committed (empty: fine to commit).
pub fn problems(
    root: &Path,
    pipeline: &Pipeline,
    state: &RunState,
    report: &ReportContext,
) -> Vec<String> {
    let mut out = Vec::new();
    if !state.lock_found {
        out.push(format!(
            "there is no {LOCK}: nothing has run here; run `repro run` first"
        ));
    } else {
        for name in pipeline.stages.keys() {
            match state.stages.get(name) {
                None => out.push(format!(
                    "stage `{name}` has not run (no entry in {LOCK}); run `repro run`"
                )),
                Some(s) if s.failed() => out.push(format!(
                    "stage `{name}` {}{}; fix it and rerun `repro run`",
                    s.status.as_deref().unwrap_or("failed"),
                    s.reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )),
                Some(_) => {}
            }
        }
        let changed = state.changed_outputs(root);
        if !changed.is_empty() {
            out.push(format!(
                "outputs differ from what {LOCK} recorded (stale or edited): {}; rerun `repro run`",
                changed.join(", ")
            ));
        }
    }
    for g in &report.failed_gates {
        out.push(format!("gate failed: {g}"));
    }
    out
}

/// Check, then commit the results of the project at `root`.
pub fn commit(
    root: &Path,
    pipeline: &Pipeline,
    message: Option<&str>,
    allow_failed: bool,
) -> anyhow::Result<Committed> {
    let artifacts = Artifacts::load(root)?;
    let state = RunState::load(root, pipeline.stages.keys().map(String::as_str))?;
    let env = crate::env::capture(
        root,
        &crate::stages::summarize::capture_options(pipeline, &artifacts),
    );
    let report = Builder {
        pipeline,
        artifacts: &artifacts,
        state: &state,
        env: &env,
    }
    .build();
    let problems = problems(root, pipeline, &state, &report);
    if !problems.is_empty() && !allow_failed {
        anyhow::bail!(
            "refusing to commit these results:\n  - {}\nFix them and rerun, or pass --allow-failed to commit them anyway",
            problems.join("\n  - ")
        );
    }
    let text = commit_message(message, &report, &problems);
    let repo = git2::Repository::discover(root).map_err(|e| {
        anyhow::anyhow!(
            "{} is not inside a git repository: {}",
            root.display(),
            e.message()
        )
    })?;
    let prefix = super::diff::repo_prefix(&repo, root)?;
    let dirs: Vec<String> = COMMITTED
        .iter()
        .map(|d| {
            if prefix.is_empty() {
                d.to_string()
            } else {
                format!("{prefix}/{d}")
            }
        })
        .collect();
    let ours = |path: &str| dirs.iter().any(|d| path.starts_with(&format!("{d}/")));

    // Stage our folders in the real index (new, changed and deleted files).
    let mut index = repo.index()?;
    let mut only_ours = |path: &Path, _: &[u8]| -> i32 {
        if ours(&path.to_string_lossy()) {
            0
        } else {
            1
        }
    };
    index.add_all(
        dirs.iter(),
        git2::IndexAddOption::DEFAULT,
        Some(&mut only_ours),
    )?;
    index.update_all(dirs.iter(), Some(&mut only_ours))?;
    index.write().context("cannot write the git index")?;

    // The commit's tree: HEAD's, with only our folders taken from the index.
    let head = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let mut tree_index = git2::Index::new()?;
    if let Some(h) = &head {
        tree_index.read_tree(&h.tree()?)?;
    }
    for d in &dirs {
        tree_index.remove_dir(Path::new(d), 0)?;
    }
    for entry in index.iter() {
        if ours(&String::from_utf8_lossy(&entry.path)) {
            tree_index.add(&entry)?;
        }
    }
    let tree_id = tree_index.write_tree_to(&repo)?;
    if head.as_ref().is_some_and(|h| h.tree_id() == tree_id) {
        return Ok(Committed::NothingToCommit);
    }
    let tree = repo.find_tree(tree_id)?;
    let sig = repo.signature().context(
        "git has no author identity; set it with `git config user.name NAME` and `git config user.email EMAIL`",
    )?;
    let parents: Vec<&git2::Commit> = head.iter().collect();
    let id = repo.commit(Some("HEAD"), &sig, &sig, &text, &tree, &parents)?;
    Ok(Committed::Commit { id, message: text })
}

/// The commit message: a subject (the user's, or the best variant's headline), the headline
/// numbers, the gates, and — with `--allow-failed` — what was wrong.
pub fn commit_message(user: Option<&str>, r: &ReportContext, problems: &[String]) -> String {
    let best_row = r.headline.rows.iter().find(|row| row.best);
    let subject = match (user, best_row) {
        (Some(m), _) => m.trim().to_string(),
        (None, Some(b)) => format!("repro: {} p50 {} µs on {}", b.name, b.p50, r.primary_shape),
        (None, None) => format!("repro: results on {}", r.primary_shape),
    };
    let mut s = format!(
        "{subject}\n\nHeadline ({}, p50 µs, median over seeds):\n",
        r.primary_shape
    );
    for row in &r.headline.rows {
        let tag = match (row.kind.as_str(), row.control, row.best) {
            ("baseline", _, _) => " (baseline)",
            (_, true, _) => " (control)",
            (_, _, true) => " (best)",
            ("tuned", _, _) => " (tuned)",
            _ => "",
        };
        let vs: Vec<String> = r
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
    let corr = g
        .correctness
        .data
        .as_ref()
        .map(|c| c.rows.as_slice())
        .unwrap_or_default();
    gate_line(
        "correctness",
        g.correctness.ran,
        &g.correctness.note,
        corr.len(),
        fails(corr.iter().map(|c| &c.result).collect()),
    );
    for (name, sec) in [
        ("performance", &g.performance),
        ("baseline speedup", &g.baseline),
    ] {
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
    if !problems.is_empty() {
        s += "\nCommitted with --allow-failed despite:\n";
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
