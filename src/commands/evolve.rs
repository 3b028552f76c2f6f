//! Source-level evolution from the command line: `repro propose …` (the shipped
//! proposers) and `repro promote` (a tune trial to a shipped variant).

use super::exit;
use crate::{cli::GlobalArgs, cli::PromoteArgs, cli::ProposeCommand};
use repro_engine::display;
use repro_tune::{proposer::brief, proposer::openai, proposer::patches};

/// `repro propose patches --dir DIR [--model-if-configured]` / `repro propose openai`: the
/// answer on stdout.
pub fn propose(command: &ProposeCommand) -> anyhow::Result<i32> {
    let brief = brief::read()?;
    let answer = match command {
        ProposeCommand::Patches {
            model_if_configured: true,
            ..
        } if openai::Endpoint::configured() => {
            openai::propose(&brief, &openai::Endpoint::from_env()?)?
        }
        ProposeCommand::Patches { dir, .. } => patches::propose(&brief, dir)?,
        ProposeCommand::Openai => openai::propose(&brief, &openai::Endpoint::from_env()?)?,
    };
    display::out_line(&serde_json::to_string_pretty(&answer)?)?;
    Ok(exit::OK)
}

/// `repro promote TRIAL --name NAME`.
pub fn promote(global: &GlobalArgs, args: &PromoteArgs) -> anyhow::Result<i32> {
    let project = repro_stages::load(&global.file)?;
    let done =
        repro_tune::promote::promote(&project, &args.trial, &args.name, args.stage.as_deref())?;
    let file = project.file.display();
    match &done.file {
        Some(path) => display::out_line(&format!(
            "promoted trial {} (source {}) as `{}`: wrote {} and added kernels.{} and variants.{} to {file}",
            done.trial,
            done.source.as_deref().unwrap_or_default(),
            args.name,
            path.display(),
            args.name,
            args.name
        ))?,
        None => display::out_line(&format!(
            "promoted trial {} (kernel `{}`) as variant `{}` in {file}",
            done.trial, done.kernel, args.name
        ))?,
    }
    display::out_line("  next: `repro run` builds, benches and reports it")?;
    Ok(exit::OK)
}
