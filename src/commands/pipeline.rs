//! The engine's subcommands (`run`, `stage`, `status`, `dag`, `build`, `tune`): turn
//! parsed arguments into a [`runner::Request`] or a report, and the outcome into the exit
//! code.

use super::exit;
use crate::{
    cli::BuildArgs, cli::DagArgs, cli::GlobalArgs, cli::RunArgs, cli::RunOpts, cli::StageArgs,
    cli::StatusArgs, cli::TuneArgs,
};
use repro_base::errors::UsageError;
use repro_engine::display;
use repro_engine::runner;
use repro_engine::runner::Request;
use repro_engine::runner::RunOutcome;
use repro_engine::runner::Selection;
use repro_engine::status;
use repro_engine::Overrides;
use repro_engine::TuneOverrides;
use repro_pipeline::{diag::did_you_mean, diag::quoted_list};
use repro_stages::BuiltinKind;
use std::path::Path;

/// Carry out `req` on the pipeline at `file`; the exit code of how it ended.
fn run_request(file: &Path, req: &Request) -> anyhow::Result<i32> {
    Ok(match runner::run(file, &repro_stages::kinds(), req)? {
        RunOutcome::Passed => exit::OK,
        RunOutcome::Failed => exit::FAILED,
        RunOutcome::Interrupted => exit::INTERRUPTED,
    })
}

fn request(
    global: &GlobalArgs,
    opts: &RunOpts,
    selection: Selection,
    overrides: Overrides,
) -> Request {
    let mut overrides = overrides;
    // Forced GPU stages measure again what they could reuse.
    overrides.remeasure = opts.force;
    Request {
        selection,
        jobs: opts.jobs,
        dry_run: opts.dry_run,
        force: opts.force,
        fail_fast: opts.fail_fast,
        wait: opts.wait,
        quiet: global.quiet,
        executor: opts.executor.clone(),
        count_gpus,
        overrides,
    }
}

/// The GPUs this machine has, for a local executor's slots: the probe cached in the project
/// the run started in (`REPRO_ROOT` in a child).
fn count_gpus() -> Option<u32> {
    let root = std::env::var_os("REPRO_ROOT").map_or_else(|| ".".into(), std::path::PathBuf::from);
    repro_gpu::probe_cached(&root)
        .ok()
        .map(|gpus| gpus.len() as u32)
}

/// `repro run`.
pub fn run(global: &GlobalArgs, args: &RunArgs) -> anyhow::Result<i32> {
    run_request(
        &global.file,
        &request(global, &args.opts, Selection::All, Overrides::default()),
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
        &request(global, &args.opts, selection, Overrides::default()),
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
            Overrides::default(),
        ),
    )
}

/// `repro tune [STAGE…]`: the `tune`-kind stages (or the named ones, each a tune stage),
/// with `--exhaustive` / `--budget`.
pub fn tune(global: &GlobalArgs, args: &TuneArgs) -> anyhow::Result<i32> {
    let overrides = Overrides {
        tune: TuneOverrides {
            exhaustive: args.exhaustive,
            budget: args.budget,
        },
        ..Overrides::default()
    };
    let kind = BuiltinKind::Tune.as_str();
    let selection = if args.stages.is_empty() {
        Selection::Kind(kind.into())
    } else {
        let project = repro_stages::load(&global.file)?;
        let tunes: Vec<&str> = project
            .stages
            .iter()
            .filter(|s| s.kind.kind() == kind)
            .map(|s| s.name.as_str())
            .collect();
        if let Some(other) = args.stages.iter().find(|n| !tunes.contains(&n.as_str())) {
            let help = did_you_mean(other, tunes.iter().copied()).unwrap_or_else(|| {
                format!("the tune stages are {}", quoted_list(tunes.iter().copied()))
            });
            return Err(UsageError(format!(
                "`{other}` is not a tune stage of {}\n  help: {help}",
                global.file.display()
            ))
            .into());
        }
        Selection::Named {
            names: args.stages.clone(),
            with_deps: true,
            downstream: false,
        }
    };
    run_request(
        &global.file,
        &request(global, &args.opts, selection, overrides),
    )
}

/// `repro status [--json] [--exit-code]`.
pub fn status(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<i32> {
    let (project, statuses) = status::load_and_evaluate(&global.file, repro_stages::load)?;
    repro_pipeline::scan_cache::make_cache_folder(&project.root);
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
    let project = repro_stages::load(&global.file)?;
    repro_pipeline::scan_cache::make_cache_folder(&project.root);
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
