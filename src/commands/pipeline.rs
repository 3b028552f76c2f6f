//! The engine's subcommands (`run`, `stage`, `status`, `dag`, `build`, `tune`): turn
//! parsed arguments into a [`runner::Request`] or a report, and the outcome into the exit
//! code.

use super::exit;
use crate::cli::{
    BuildArgs, DagArgs, GlobalArgs, RunArgs, RunOpts, StageArgs, StatusArgs, TuneArgs,
};
use crate::engine::display;
use crate::engine::runner::{self, Request, RunOutcome, Selection};
use crate::engine::status;
use crate::stages::BuiltinKind;
use std::collections::BTreeMap;
use std::path::Path;

/// Carry out `req` on the pipeline at `file`; the exit code of how it ended.
fn run_request(file: &Path, req: &Request) -> anyhow::Result<i32> {
    Ok(match runner::run(file, req)? {
        RunOutcome::Passed => exit::OK,
        RunOutcome::Failed => exit::FAILED,
        RunOutcome::Interrupted => exit::INTERRUPTED,
    })
}

fn request(
    global: &GlobalArgs,
    opts: &RunOpts,
    selection: Selection,
    overrides: BTreeMap<String, String>,
) -> Request {
    let mut overrides = overrides;
    if opts.force {
        // Forced GPU stages measure again what they could reuse.
        overrides.insert(crate::stages::reuse::REMEASURE.into(), "true".into());
    }
    Request {
        selection,
        jobs: opts.jobs,
        dry_run: opts.dry_run,
        force: opts.force,
        fail_fast: opts.fail_fast,
        wait: opts.wait,
        quiet: global.quiet,
        executor: opts.executor.clone(),
        overrides,
    }
}

/// `repro run`.
pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<i32> {
    run_request(
        &global.file,
        &request(global, &args.opts, Selection::All, BTreeMap::new()),
    )
}

/// `repro stage NAME…`.
pub fn stage(global: &GlobalArgs, args: &StageArgs) -> anyhow::Result<i32> {
    let selection = Selection::Named {
        names: args.names.clone(),
        with_deps: args.with_deps,
        downstream: args.downstream,
    };
    run_request(
        &global.file,
        &request(global, &args.opts, selection, BTreeMap::new()),
    )
}

/// `repro build`: the `build`-kind stages (`--list` is dispatched to `stages::build::list`).
pub fn build(global: &GlobalArgs, args: &BuildArgs) -> anyhow::Result<i32> {
    run_request(
        &global.file,
        &request(
            global,
            &args.opts,
            Selection::Kind(BuiltinKind::Build.as_str().into()),
            BTreeMap::new(),
        ),
    )
}

/// `repro tune`: the `tune`-kind stage, with `--exhaustive` / `--budget`.
pub fn tune(global: &GlobalArgs, args: &TuneArgs) -> anyhow::Result<i32> {
    let mut overrides = BTreeMap::new();
    if args.exhaustive {
        overrides.insert("exhaustive".into(), "true".into());
    }
    if let Some(budget) = args.budget {
        overrides.insert("budget".into(), budget.to_string());
    }
    run_request(
        &global.file,
        &request(
            global,
            &args.opts,
            Selection::Kind(BuiltinKind::Tune.as_str().into()),
            overrides,
        ),
    )
}

/// `repro status [--json] [--exit-code]`.
pub fn status(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<i32> {
    let project = crate::pipeline::load(&global.file)?;
    let statuses = status::evaluate_project(&project)?;
    if args.json {
        display::out(&status::render_json(&project, &statuses))?;
    } else {
        display::out(&status::render_text(&project, &statuses))?;
    }
    let behind = statuses.iter().any(|s| !current_here(s));
    // As `run` does: the command ends here, and the OS frees a large pipeline's many
    // small allocations faster than dropping them one by one (docs/PERFORMANCE.md).
    std::mem::forget(statuses);
    std::mem::forget(project);
    Ok(if args.exit_code && behind {
        exit::FAILED
    } else {
        exit::OK
    })
}

/// Whether a stage leaves nothing to do on this machine: up to date, or `kept` with
/// nothing changed but the machine ([`status::source_changes`]) — results measured
/// elsewhere that this machine cannot re-measure. A kept stage whose sources changed is
/// behind.
fn current_here(s: &status::StageStatus) -> bool {
    matches!(s.state, status::State::UpToDate) || s.state.kept_current()
}

/// `repro dag [--mermaid | --dot]`.
pub fn dag(global: &GlobalArgs, args: &DagArgs) -> anyhow::Result<i32> {
    let project = crate::pipeline::load(&global.file)?;
    let kind = |i: usize| project.stages[i].kind.kind().to_string();
    let text = if args.mermaid {
        project.dag.render_mermaid(kind)
    } else if args.dot {
        project.dag.render_dot(kind)
    } else {
        project.dag.render_text(kind)
    };
    display::out(&text)?;
    Ok(exit::OK)
}
