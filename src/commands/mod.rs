//! The command layer: each subcommand's arguments (`crate::cli`) become a call into the
//! library, and the library's typed outcome becomes the exit code. Only `main`, `cli` and
//! this layer know clap and exit codes (docs/ARCHITECTURE.md).

mod evolve;
mod exec;
mod pipeline;
mod results;
mod shell;
mod toolchain;
mod tools;

use crate::{cli::Cli, cli::Command, cli::NcuCommand, cli::ToolchainAction, cli::ToolchainArgs};
use clap::Parser;
use repro_engine::display;

/// Exit codes: 0 all green, 1 a gate or stage failed, 2 bad usage or bad pipeline.yaml,
/// 130 interrupted.
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INTERRUPTED: i32 = 130;
    /// The reader of stdout or stderr went away (`repro run | head -1`): what a shell
    /// reports for a process ended by `SIGPIPE` (128 + 13), without a message.
    pub const BROKEN_PIPE: i32 = 141;
}

/// Parse the command line, run, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli) {
        // Nobody reads what repro would say: end quietly, as a tool killed by SIGPIPE.
        Ok(_) | Err(_) if display::output_closed() => exit::BROKEN_PIPE,
        Err(err) if display::is_broken_pipe(&err) => exit::BROKEN_PIPE,
        Ok(code) => code,
        // A bad pipeline.yaml prints its own `file:line:col: error:` lines.
        Err(err) if err.is::<repro_pipeline::LoadError>() => {
            display::err(&err.to_string());
            exit::USAGE
        }
        Err(err) if err.is::<repro_engine::project_lock::WaitInterrupted>() => {
            display::err(&err.to_string());
            exit::INTERRUPTED
        }
        Err(err) => {
            display::err(&format!("error: {err:#}"));
            // A request naming what does not exist is bad usage.
            if err.is::<repro_base::errors::UsageError>() {
                exit::USAGE
            } else {
                exit::FAILED
            }
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Exec(args) => exec::exec(&cli.global, &args),
        Command::Compare(args) => exec::compare(&cli.global, &args),
        Command::Ncu(NcuCommand::Parse(args)) => tools::ncu_parse(&args),
        Command::Build(a) if a.list => tools::build_list(&cli.global),
        Command::Run(args) => pipeline::run(&cli.global, &args),
        Command::Stage(args) => pipeline::stage(&cli.global, &args),
        Command::Status(args) => pipeline::status(&cli.global, &args),
        Command::Dag(args) => pipeline::dag(&cli.global, &args),
        Command::Build(args) => pipeline::build(&cli.global, &args),
        Command::Tune(args) => pipeline::tune(&cli.global, &args),
        Command::Promote(args) => evolve::promote(&cli.global, &args),
        Command::Propose(command) => evolve::propose(&command),
        Command::Diff(args) => results::diff(&cli.global, &args),
        Command::Commit(args) => results::commit(&cli.global, &args),
        Command::Verify => results::verify(&cli.global),
        Command::Docs(args) => results::docs(&cli.global, args.check),
        Command::Toolchain(ToolchainArgs { action: None }) => toolchain::show(&cli.global.file),
        Command::Toolchain(ToolchainArgs {
            action: Some(ToolchainAction::Install { version }),
        }) => toolchain::install(&cli.global.file, version.as_deref(), cli.global.quiet),
        Command::Completions(args) => shell::completions(&args),
        Command::Man(args) => shell::man(&args),
    }
}
