//! The command line: argument definitions and dispatch. Each subcommand's work lives in
//! its own module; this file only wires them up and maps results to exit codes.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Exit codes (DESIGN.md): 0 all green, 1 a gate or stage failed, 2 bad usage or bad
/// pipeline.yaml, 130 interrupted.
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INTERRUPTED: i32 = 130;
}

#[derive(Debug, Parser)]
#[command(
    name = "repro",
    version,
    about = "Run a GPU-kernel pipeline (build → bench → tune → profile → summarize) as a cached, reproducible DAG",
    long_about = "repro reads pipeline.yaml, runs only the stages whose inputs changed, writes \
                  results atomically under artifacts/ and reports/, and records every stage's \
                  fingerprint in artifacts/repro.lock so results can be committed and compared \
                  across commits.\n\nStart with `repro run`; `repro status` says what is stale and why."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The pipeline file; its folder is the project root.
    #[arg(
        short = 'f',
        long = "file",
        global = true,
        default_value = "pipeline.yaml"
    )]
    pub file: PathBuf,
    /// Plain output: no spinners, only failures and the final table.
    #[arg(short, long, global = true)]
    pub quiet: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every stale stage in dependency order.
    Run(RunArgs),
    /// Run only the named stages against the recorded outputs of their upstream.
    Stage(StageArgs),
    /// Say, per stage, up-to-date / stale / never-run / failed, and what changed.
    Status(StatusArgs),
    /// Print the stage graph (text, Mermaid or Graphviz dot).
    Dag(DagArgs),
    /// Compile the variants (the build stage), or list their resource usage.
    Build(BuildArgs),
    /// Run the autotuner (the tune stage); `--exhaustive` evaluates the whole space.
    Tune(TuneArgs),
    /// Internal: load one variant, check it against the reference, time it, print one JSON line.
    Exec(crate::gpu::exec::ExecArgs),
    /// Nsight Compute helpers.
    #[command(subcommand)]
    Ncu(NcuCommand),
    /// Compare bench and ncu results in the working tree with those committed at REV.
    Diff(DiffArgs),
    /// Commit artifacts/, reports/ and the lock with a message listing gates and headline numbers.
    ///
    /// Refuses (unless --allow-failed) when there is no lock, a stage has not run or failed
    /// last time, a gate failed, or an output no longer matches the digest the lock
    /// recorded. It does not re-check inputs: run `repro status` (or `repro run`) first to
    /// be sure nothing is stale.
    /// Only artifacts/ and reports/ are staged; other staged changes stay staged.
    Commit(CommitArgs),
}

/// Options shared by every command that runs stages.
#[derive(Debug, Clone, Args, Default)]
pub struct RunOpts {
    /// Run up to N independent stages at once.
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    pub jobs: usize,
    /// Print the plan (what would run, what would be skipped, and why) and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Rerun even if up to date.
    #[arg(long)]
    pub force: bool,
    /// Stop at the first failing stage instead of running what does not depend on it.
    #[arg(long)]
    pub fail_fast: bool,
    /// If another repro holds the project lock, wait for it instead of exiting.
    #[arg(long)]
    pub wait: bool,
    /// GPU architecture to build for (e.g. sm_89), overriding the detected one.
    #[arg(long)]
    pub arch: Option<String>,
    /// Where to run stage processes: local or slurm (overrides pipeline.yaml).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::pipeline::validate::EXECUTOR_KINDS.iter().copied()))]
    pub executor: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Args)]
pub struct StageArgs {
    /// Stage names.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Also run upstream stages that are missing or stale.
    #[arg(long)]
    pub with_deps: bool,
    /// Also run every stage that depends on the named ones.
    #[arg(long)]
    pub downstream: bool,
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DagArgs {
    /// Mermaid flowchart (renders on GitHub).
    #[arg(long, conflicts_with = "dot")]
    pub mermaid: bool,
    /// Graphviz dot.
    #[arg(long)]
    pub dot: bool,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Print the variants and their resource usage (registers, smem, spills) as a table.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// Evaluate every configuration of the space, for comparison with the search.
    #[arg(long)]
    pub exhaustive: bool,
    /// Override the trial budget.
    #[arg(long)]
    pub budget: Option<u32>,
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Subcommand)]
pub enum NcuCommand {
    /// Convert an ncu CSV export (raw or details page) into repro's metric summary.
    Parse(NcuParseArgs),
}

#[derive(Debug, Args)]
pub struct NcuParseArgs {
    pub file: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The commit to compare against.
    #[arg(default_value = "HEAD")]
    pub rev: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Extra first line for the commit message.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Commit even when a gate or stage failed, a stage has not run, or outputs differ from
    /// the lock; the message lists why.
    #[arg(long)]
    pub allow_failed: bool,
}

/// Parse the command line, run, and return the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        // A bad pipeline.yaml prints its own `file:line:col: error:` lines.
        Err(err) if err.is::<crate::pipeline::LoadError>() => {
            eprintln!("{err}");
            exit::USAGE
        }
        Err(err) if err.is::<crate::engine::project_lock::WaitInterrupted>() => {
            eprintln!("{err}");
            exit::INTERRUPTED
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            // A request naming what does not exist is bad usage.
            if err.is::<crate::engine::runner::UsageError>() {
                exit::USAGE
            } else {
                exit::FAILED
            }
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Exec(args) => crate::gpu::exec::main(&cli.global, &args),
        Command::Ncu(NcuCommand::Parse(args)) => crate::ncu::parse_command(&args),
        Command::Build(a) if a.list => crate::stages::build::list::main(&cli.global, &a),
        Command::Run(args) => crate::engine::commands::run(&cli.global, &args),
        Command::Stage(args) => crate::engine::commands::stage(&cli.global, &args),
        Command::Status(args) => crate::engine::commands::status(&cli.global, &args),
        Command::Dag(args) => crate::engine::commands::dag(&cli.global, &args),
        Command::Build(args) => crate::engine::commands::build(&cli.global, &args),
        Command::Tune(args) => crate::engine::commands::tune(&cli.global, &args),
        Command::Diff(args) => crate::report::diff::main(&cli.global, &args),
        Command::Commit(args) => crate::report::commit::main(&cli.global, &args),
    }
}
