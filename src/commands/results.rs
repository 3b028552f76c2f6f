//! The results commands: `repro diff`, `repro commit`, `repro verify`, `repro docs`.

use super::exit;
use crate::doctables;
use crate::{cli::CommitArgs, cli::DiffArgs, cli::GlobalArgs};
use repro_engine::display;
use repro_report::{commit, diff};

/// `repro diff`: print the comparison and return the exit code.
pub fn diff(global: &GlobalArgs, args: &DiffArgs) -> anyhow::Result<i32> {
    let root = diff::project_root(&global.file);
    let report = diff::diff(&root, &args.rev)?;
    if args.json {
        display::out_line(&serde_json::to_string_pretty(&report)?)?;
    } else {
        display::out(&diff::markdown(&report))?;
    }
    Ok(if report.regressed() {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// `repro commit`: commit the results, or refuse (an error naming each reason and its flag).
pub fn commit(global: &GlobalArgs, args: &CommitArgs) -> anyhow::Result<i32> {
    let project = repro_stages::load(&global.file)?;
    let allow = commit::Allow {
        failed: args.allow_failed,
        stale: args.allow_stale,
        lost: args.allow_lost,
        dirty: args.allow_dirty,
        other_gpu: args.allow_other_gpu,
    };
    match commit::commit(&project, args.message.as_deref(), allow)? {
        commit::Committed::Commit { id, message } => {
            let first = message.lines().next().unwrap_or_default();
            display::out_line(&format!("committed {} {first}", &id.to_string()[..10]))?;
        }
        commit::Committed::NothingToCommit => {
            display::out_line("nothing to commit: artifacts/ and reports/ are as HEAD has them")?;
        }
    }
    Ok(exit::OK)
}

/// `repro verify`: print the verdict; exit 1 when anything is inconsistent.
pub fn verify(global: &GlobalArgs) -> anyhow::Result<i32> {
    let project = repro_stages::load(&global.file)?;
    let verdict = repro_report::verify::verify(&project)?;
    if verdict.problems.is_empty() {
        let at = verdict
            .commit
            .as_deref()
            .map(|c| format!(" made at commit {}", &c[..c.len().min(10)]))
            .unwrap_or_default();
        display::out_line(&format!(
            "verified: {} stages and {} committed outputs{at} are consistent with the sources",
            verdict.stages, verdict.outputs
        ))?;
        return Ok(exit::OK);
    }
    let n = verdict.problems.len();
    display::out_line(&format!(
        "repro verify: the committed results are not consistent ({n} problem{}):",
        if n == 1 { "" } else { "s" }
    ))?;
    for p in &verdict.problems {
        display::out_line(&format!("  - {p}"))?;
    }
    Ok(exit::FAILED)
}

/// `repro docs [--check]`: regenerate (or only compare) the docs' generated tables.
pub fn docs(global: &GlobalArgs, check: bool) -> anyhow::Result<i32> {
    let doctables::Refresh { tables, stale } = doctables::refresh(&global.file, check)?;
    if check && !stale.is_empty() {
        display::out_line(&format!(
            "repro docs --check: {} generated tables are not current with the committed results:",
            stale.len()
        ))?;
        for s in &stale {
            display::out_line(&format!("  - {s}"))?;
        }
        display::out_line("run `repro docs` and commit the docs")?;
        return Ok(exit::FAILED);
    }
    let verb = if check { "current" } else { "regenerated" };
    display::out_line(&format!(
        "{tables} generated tables; {} {}",
        if check { tables } else { stale.len() },
        verb
    ))?;
    Ok(exit::OK)
}
