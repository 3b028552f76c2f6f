//! The engine's subcommands (`run`, `stage`, `status`, `dag`, `build`, `tune`): turn
//! parsed arguments into a [`runner::Request`] or a report. `cli::dispatch` calls these.

use super::runner::{self, Request, Selection};
use super::status;
use crate::cli::{
    exit, BuildArgs, DagArgs, GlobalArgs, RunArgs, RunOpts, StageArgs, StatusArgs, TuneArgs,
};
use std::collections::BTreeMap;

fn request(
    global: &GlobalArgs,
    opts: &RunOpts,
    selection: Selection,
    overrides: BTreeMap<String, String>,
) -> Request {
    let mut overrides = overrides;
    if let Some(arch) = &opts.arch {
        overrides.insert("arch".into(), arch.clone());
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
    runner::run(
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
    runner::run(
        &global.file,
        &request(global, &args.opts, selection, BTreeMap::new()),
    )
}

/// `repro build`: the `build`-kind stages, with `--arch` (`--list` is dispatched to
/// `stages::build::list`).
pub fn build(global: &GlobalArgs, args: &BuildArgs) -> anyhow::Result<i32> {
    runner::run(
        &global.file,
        &request(
            global,
            &args.opts,
            Selection::Kind("build".into()),
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
    runner::run(
        &global.file,
        &request(
            global,
            &args.opts,
            Selection::Kind("tune".into()),
            overrides,
        ),
    )
}

/// `repro status [--json] [--exit-code]`.
pub fn status(global: &GlobalArgs, args: &StatusArgs) -> anyhow::Result<i32> {
    let project = crate::pipeline::load(&global.file)?;
    let statuses = status::evaluate_project(&project)?;
    if args.json {
        print!("{}", status::render_json(&project, &statuses));
    } else {
        print!("{}", status::render_text(&project, &statuses));
    }
    Ok(if args.exit_code && !status::all_up_to_date(&statuses) {
        exit::FAILED
    } else {
        exit::OK
    })
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
    print!("{text}");
    Ok(exit::OK)
}
