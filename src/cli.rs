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
    /// Quiet: no spinners, notes or warnings; only errors and the final table.
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
    ///
    /// Exits 0 whatever it finds, unless --exit-code: then 1 when anything is stale, never
    /// run or failed.
    Status(StatusArgs),
    /// Print the stage graph (text, Mermaid or Graphviz dot).
    Dag(DagArgs),
    /// Compile the variants (the build stage), or list their resource usage.
    Build(BuildArgs),
    /// Run the autotuner (the tune stage); `--exhaustive` evaluates the whole space.
    Tune(TuneArgs),
    /// Internal: load one variant, check it against the reference, time it, print one JSON line.
    Exec(crate::gpu::exec::ExecArgs),
    /// Is A faster than B? Time two kernels on one GPU, interleaved, and give the ratio of
    /// their medians with a 95% confidence interval.
    ///
    /// A and B are variants of pipeline.yaml (their cubins from the build stage) or paths
    /// to .cubin files. Both are checked against the reference on the same inputs, then
    /// timed in one process by the isolated method (one launch per sample, the timer's cost
    /// subtracted), sample by sample in turn (A B, B A, A B, …) so drifting clocks or
    /// temperature affect both alike. The answer reads like hyperfine's: "A ran 1.092×
    /// faster than B (95% CI 1.088–1.097)", the interval from a paired bootstrap of the
    /// samples. Exits 1 when A or B fails the correctness check.
    Compare(crate::gpu::compare::CompareArgs),
    /// Nsight Compute helpers.
    #[command(subcommand)]
    Ncu(NcuCommand),
    /// Compare bench and ncu results in the working tree with those committed at REV.
    ///
    /// Exit 1 when something is slower, a measurement REV has is missing now, or a gate went
    /// from pass to fail or from checked to not checked; 2 when REV does not exist. Results
    /// measured on different GPU models are shown side by side, never called FASTER/SLOWER.
    Diff(DiffArgs),
    /// Commit artifacts/, reports/ and the lock with a message listing gates and headline numbers.
    ///
    /// Refuses (exit 1, naming each reason and the flag that overrides it) when a stage is
    /// stale, never ran, or kept results measured on another machine; when the report is out
    /// of date with its inputs or an output differs from the lock (--allow-stale); when a
    /// measurement HEAD has is missing or unmeasured here (--allow-lost); when a source the
    /// results were made from differs from HEAD (--allow-dirty: commit the source first);
    /// when they replace HEAD's results measured on another GPU model (--allow-other-gpu);
    /// when a stage or gate failed (--allow-failed). Only artifacts/ and reports/ are
    /// staged; other staged changes stay staged.
    Commit(CommitArgs),
    /// Check, without a GPU, that the committed results are what the committed sources made.
    ///
    /// Every output under artifacts/ and reports/ matches the lock and no file there is
    /// unaccounted for; every stage's inputs from the sources (its spec in pipeline.yaml, its
    /// dep files, the results of the stages it needs) are those the lock recorded, so the
    /// report and manifest are current; and the manifest names a clean commit in HEAD's
    /// history whose sources are those the results were made from. The machine a stage ran
    /// on (GPU, driver, tool versions) is not compared. Exit 0, or 1 with the list.
    Verify,
    /// Regenerate the tables of measured figures in the docs from the committed results.
    ///
    /// Rewrites every table between `<!-- repro:table NAME -->` and `<!-- /repro:table -->`
    /// in README.md, kernels/README.md and docs/**/*.md. NAME is variants, perf-gates,
    /// resources, ncu, tune (from artifacts/) or results/FILE (benches/results/FILE).
    /// With --check, changes nothing and exits 1 naming each table that is not current.
    Docs(DocsArgs),
    /// Show the nvcc in use and where it came from; `install` fetches the pinned one.
    Toolchain(ToolchainArgs),
}

#[derive(Debug, Args)]
pub struct DocsArgs {
    /// Only compare: exit 1 when a generated table is not current.
    #[arg(long)]
    pub check: bool,
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
    /// Machine-readable output (every changed value in full).
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when a stage is stale, never run or failed, 0 when all are up to date (as
    /// `git diff --exit-code`), so a script or CI can ask "is anything stale?".
    #[arg(long)]
    pub exit_code: bool,
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
    /// JSON for CI instead of markdown (the markdown is ready to paste as a pull-request comment).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Extra first line for the commit message.
    #[arg(short, long)]
    pub message: Option<String>,
    /// Commit even when a gate or a stage failed; the message lists why.
    #[arg(long)]
    pub allow_failed: bool,
    /// Commit even when stages are stale, never ran or kept results from another machine.
    #[arg(long)]
    pub allow_stale: bool,
    /// Commit even when measurements HEAD has are missing or unmeasured here.
    #[arg(long)]
    pub allow_lost: bool,
    /// Commit even when sources the results were made from differ from HEAD.
    #[arg(long)]
    pub allow_dirty: bool,
    /// Commit even when these results replace HEAD's measured on another GPU model.
    #[arg(long)]
    pub allow_other_gpu: bool,
}

#[derive(Debug, Args)]
pub struct ToolchainArgs {
    #[command(subcommand)]
    pub action: Option<ToolchainAction>,
}

#[derive(Debug, Subcommand)]
pub enum ToolchainAction {
    /// Install nvcc from NVIDIA's wheels (pip) into the per-user cache, as `repro run` does
    /// for a pinned toolchain this machine lacks.
    Install {
        /// e.g. 13.0.88; default: the version pipeline.yaml pins (`toolchain: {nvcc: ...}`).
        version: Option<String>,
    },
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
        Command::Compare(args) => crate::gpu::compare::main(&cli.global, &args),
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
        Command::Verify => verify(&cli.global),
        Command::Docs(args) => crate::doctables::main(&cli.global, args.check),
        Command::Toolchain(ToolchainArgs { action: None }) => {
            crate::toolchain::command::show(&cli.global.file)
        }
        Command::Toolchain(ToolchainArgs {
            action: Some(ToolchainAction::Install { version }),
        }) => crate::toolchain::command::install(
            &cli.global.file,
            version.as_deref(),
            cli.global.quiet,
        ),
    }
}

/// `repro verify`: print the verdict; exit 1 when anything is inconsistent.
fn verify(global: &GlobalArgs) -> anyhow::Result<i32> {
    let project = crate::pipeline::load(&global.file)?;
    let verdict = crate::report::verify::verify(&project)?;
    if verdict.problems.is_empty() {
        let at = verdict
            .commit
            .as_deref()
            .map(|c| format!(" made at commit {}", &c[..c.len().min(10)]))
            .unwrap_or_default();
        println!(
            "verified: {} stages and {} committed outputs{at} are consistent with the sources",
            verdict.stages, verdict.outputs
        );
        return Ok(exit::OK);
    }
    println!(
        "repro verify: the committed results are not consistent ({} problems):",
        verdict.problems.len()
    );
    for p in &verdict.problems {
        println!("  - {p}");
    }
    Ok(exit::FAILED)
}
