//! The command line's definitions (clap). [`crate::commands`] carries each one out.

use clap::{Args, Parser, Subcommand};
use repro_gpu::{timing::L2Mode, timing::Method};
use std::path::PathBuf;

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
    /// Say, per stage, up-to-date / stale / never-run / failed / kept, and what changed.
    ///
    /// `kept`: the stage cannot run on this machine (no GPU, no ncu, no torch) and keeps the
    /// results measured elsewhere, saying where. Exits 0 whatever it finds, unless
    /// --exit-code: then 1 when anything is stale, never run, failed, or kept although its
    /// sources changed.
    Status(StatusArgs),
    /// Print the stage graph (text, Mermaid or Graphviz dot).
    Dag(DagArgs),
    /// Compile the variants (the build stage), or list their resource usage.
    Build(BuildArgs),
    /// Run the autotuner (the tune stages, or those named); `--exhaustive` evaluates the
    /// whole space.
    Tune(TuneArgs),
    /// Turn a tune trial into a shipped variant: a proposed source becomes a file under
    /// kernels/ with a `kernels:` entry, and the trial's defines a `variants:` entry
    /// (pipeline.yaml is edited as text: its comments stay).
    Promote(PromoteArgs),
    /// Proposers for the tune stage's `proposer:` option: each reads the brief (the file
    /// $REPRO_BRIEF, else stdin) and prints its answer as JSON on stdout.
    #[command(subcommand)]
    Propose(ProposeCommand),
    /// Internal: load one variant, check it against the reference, time it, print one JSON line.
    ///
    /// Exits 0 when the run's correctness check passed, 1 when it failed (the record is
    /// printed all the same, with `"correctness_pass": false`) or the run could not be made,
    /// 2 for bad usage or a bad pipeline.yaml. --worker exits 0 when stdin ends, 1 when a
    /// run left the CUDA context unusable; a failed check is then in the answer, not the
    /// exit code.
    Exec(ExecArgs),
    /// Is A faster than B? Time two kernels on one GPU, interleaved, and give the ratio of
    /// their medians with a 95% confidence interval.
    ///
    /// A and B are variants of pipeline.yaml (their cubins from the build stage) or paths
    /// to .cubin files. Both are checked against the reference on the same inputs, then
    /// timed in one process by the isolated method (one launch per sample, the timer's cost
    /// subtracted), sample by sample in turn (A B, B A, A B, …) so drifting clocks or
    /// temperature affect both alike. The answer reads like hyperfine's: "A ran R× faster
    /// than B (95% CI lo–hi)", the interval from a paired bootstrap of the samples. Exits 1 when A or B fails the correctness check.
    Compare(CompareArgs),
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
    /// on (GPU, driver, tool versions) is not compared. Exit 0, or 1 with the list, each
    /// problem with the action that fixes it on this machine (a rerun this machine cannot do
    /// is sent to one that has the GPU or tool it lacks).
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
    /// Print a shell completion script for bash, zsh, fish, elvish or powershell.
    ///
    /// e.g. `repro completions bash > ~/.local/share/bash-completion/completions/repro`,
    /// `repro completions zsh > ~/.zfunc/_repro`, `repro completions fish >
    /// ~/.config/fish/completions/repro.fish` (docs/guide/commands.md).
    Completions(CompletionsArgs),
    /// Print the man page repro(1) as roff, or write one page per subcommand into a folder.
    ///
    /// `repro man | man -l -` reads it; `repro man --dir ~/.local/share/man/man1` installs
    /// repro.1 and repro-<command>.1 for `man repro-run`.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write repro.1 and a page per subcommand (repro-run.1, …) into DIR instead of
    /// printing repro.1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
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
    /// Rerun even if up to date, measuring again what the bench and profile stages would
    /// reuse from the committed results.
    #[arg(long)]
    pub force: bool,
    /// Stop at the first failing stage instead of running what does not depend on it.
    #[arg(long)]
    pub fail_fast: bool,
    /// If another repro holds the project lock, wait for it instead of exiting.
    #[arg(long)]
    pub wait: bool,
    /// Where to run stage processes: local or slurm (overrides pipeline.yaml).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(repro_pipeline::validate::EXECUTOR_KINDS.iter().copied()))]
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
    /// Exit 1 when a stage is stale, never run, failed, or kept although its sources changed;
    /// 0 when all are up to date or kept only because this machine cannot measure them (as
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

/// `--budget N`: refused at the command line when N is not a positive number.
fn positive_budget(text: &str) -> Result<std::num::NonZeroU32, String> {
    text.parse()
        .map_err(|_| format!("--budget {text}: expected a positive number of trials"))
}

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The tune stages to run, with what they need (default: every tune stage).
    pub stages: Vec<String>,
    /// Evaluate every configuration of the space, for comparison with the search.
    #[arg(long)]
    pub exhaustive: bool,
    /// Override the trial budget (a positive number of trials).
    #[arg(long, value_parser = positive_budget)]
    pub budget: Option<std::num::NonZeroU32>,
    #[command(flatten)]
    pub opts: RunOpts,
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// A trial number of the tune stage's `tune_log.csv`, or the first hex digits (4 or more)
    /// of a proposed source's digest (its `source` column: its best passing trial).
    pub trial: String,
    /// The new variant's name (and the kernel's and file's, for a proposed source).
    #[arg(long)]
    pub name: String,
    /// The tune stage whose trial it is (default: the pipeline's only one).
    #[arg(long)]
    pub stage: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ProposeCommand {
    /// Scripted and deterministic: the unified diffs DIR/*.patch, in name order, on the
    /// best trial so far; then those that passed, stacked on it.
    Patches {
        /// The folder of `.patch` files (written against the tuned kernel's source).
        #[arg(long)]
        dir: PathBuf,
        /// Ask the model instead (as `repro propose openai`) when one is configured: when
        /// $REPRO_PROPOSER_URL, $REPRO_PROPOSER_MODEL or $REPRO_PROPOSER_KEY is set. The
        /// shipped tune stages' proposer: scripted patches by default, the model when you
        /// export its endpoint.
        #[arg(long)]
        model_if_configured: bool,
    },
    /// Ask a model through an OpenAI-compatible chat-completions endpoint:
    /// $REPRO_PROPOSER_URL (the API base), $REPRO_PROPOSER_MODEL and, if it needs one,
    /// $REPRO_PROPOSER_KEY (never printed).
    Openai,
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

/// `repro exec`'s arguments; `commands::exec` turns them into an `ExecRequest`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// A variant of pipeline.yaml: loads `.repro/cubins/<VARIANT>.cubin`.
    #[arg(long, conflicts_with_all = ["cubin", "dump_inputs"])]
    pub variant: Option<String>,
    /// A cubin file to load instead of a variant's (needs --entry).
    #[arg(long, requires = "entry")]
    pub cubin: Option<PathBuf>,
    /// The kernel's entry point in --cubin.
    #[arg(long, requires = "cubin")]
    pub entry: Option<String>,
    /// A define --cubin was compiled with, `NAME=VALUE` (repeated): the workload's launch
    /// geometry may read it.
    #[arg(long = "define", value_name = "NAME=VALUE", requires = "cubin", value_parser = parse_define)]
    pub defines: Vec<(String, i64)>,
    /// The workload to run (default: the variant's, or the pipeline's only one).
    #[arg(long)]
    pub workload: Option<String>,
    /// A shape name of the workload (`shapes:`).
    #[arg(long, conflicts_with = "dims")]
    pub shape: Option<String>,
    /// Explicit dimensions: `rows=4,hidden=1024`, or the values in the order of the
    /// workload's `dims` (`4,1024`).
    #[arg(long, value_parser = parse_dims_text)]
    pub dims: Option<String>,
    /// Input seed (with --dump-inputs: only this seed; default all of the workload's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Input recipe, one of the workload's `recipes` (docs/guide/correctness.md). Default:
    /// the shape's first; with --dump-inputs: only this recipe (default every recipe the
    /// workload's `inputs` lists for the shape).
    #[arg(long)]
    pub inputs: Option<String>,
    /// The precision class whose thresholds apply, for a workload whose gates give one per
    /// class (default: the variant's declared class, else the workload's `precision`).
    #[arg(long)]
    pub precision: Option<String>,
    /// Launches before timing.
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// Timing samples (the minimum; more are taken while the CV is above --max-cv and the
    /// median's 95% confidence interval is wider than --max-cv of it).
    #[arg(long, default_value_t = 100)]
    pub iters: u32,
    /// Device index (among the visible ones).
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// `warm`, or `flush` L2 before each sample (outside the timed region).
    #[arg(long, default_value_t = L2Mode::Warm, value_parser = str::parse::<L2Mode>)]
    pub l2: L2Mode,
    /// Check correctness only.
    #[arg(long)]
    pub no_timing: bool,
    /// Instead of timing: after the check and --warmup launches, launch the kernel N times
    /// between cuProfilerStart and cuProfilerStop, each waited for. Under `ncu
    /// --profile-from-start off` exactly those N launches are profiled (the profile stage's
    /// way; docs/guide/ncu.md).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub profile_launches: Option<u32>,
    /// With --profile-launches: no correctness check first (and no reference run), for a
    /// cubin another run checked on the same case, as the profile stage's passes after its
    /// time pass do. --warmup then counts every launch before the profiled ones. Exits 0
    /// once the launches ran.
    #[arg(long, requires = "profile_launches")]
    pub unchecked: bool,
    /// Keep sampling while the coefficient of variation is above this and the median is not
    /// known to within this fraction (its 95% confidence interval)...
    #[arg(long, default_value_t = 0.01)]
    pub max_cv: f64,
    /// ...for at most this many seconds.
    #[arg(long, default_value_t = 5.0)]
    pub max_time: f64,
    /// `isolated`: one launch per sample, queued behind a hold so the host is not timed,
    /// with the timer's own cost subtracted (what Nsight Compute's gpu__time_duration
    /// measures). `graph`: the mean launch of a CUDA graph of back-to-back launches (the
    /// throughput of a graph replay, a little below the isolated time; docs/guide/gpu.md).
    /// Under ncu, which serializes launches, use `graph`.
    #[arg(long, default_value_t = Method::Isolated, value_parser = str::parse::<Method>)]
    pub method: Method,
    /// Graph method: launches per sample (default: enough for a sample of at least 100 µs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub launches_per_sample: Option<u32>,
    /// The reference cubin (default the build's, of the workload and the GPU's arch:
    /// `.repro/cubins/reference[-WORKLOAD].ARCH.cubin`).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// Write the cases of every shape × recipe × seed of the workload (or the chosen ones)
    /// into DIR, with an `index.json`, and exit. Needs no GPU.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["cubin", "no_timing", "attributes"])]
    pub dump_inputs: Option<PathBuf>,
    /// Print the driver's attributes of kernel ENTRY in CUBIN as one JSON line (registers,
    /// static smem, local bytes, ...). Repeat it for more kernels: all are read in one CUDA
    /// context, a line each in order; a kernel that does not load prints its `error` and the
    /// exit status is 1.
    #[arg(
        long,
        num_args = 2,
        value_names = ["CUBIN", "ENTRY"],
        action = clap::ArgAction::Append,
        conflicts_with_all = ["variant", "cubin", "entry"]
    )]
    pub attributes: Vec<String>,
    /// Print the GPUs this process sees as a JSON list (`GpuInfo`) and exit: how stages
    /// discover the GPUs of a cluster node through the executor.
    #[arg(long, conflicts_with_all = ["variant", "cubin", "dump_inputs", "attributes"])]
    pub query_devices: bool,
    /// Serve many runs in one process, for the stages (docs/guide/gpu.md, "The GPU
    /// worker"): read one JSON request per line on stdin, answer each with one JSON line on
    /// stdout, keep the CUDA context, the loaded modules and the reference outputs between
    /// runs, exit when stdin ends or a run leaves the context unusable.
    #[arg(long, conflicts_with_all = ["variant", "cubin", "dump_inputs", "attributes", "query_devices", "shape", "dims"])]
    pub worker: bool,
}

/// `--dims`: checked against the workload once it is known.
fn parse_dims_text(s: &str) -> Result<String, String> {
    if repro_gpu::exec::is_dims(s) {
        Ok(s.to_string())
    } else {
        Err("expected the workload's dimensions, e.g. `rows=4,hidden=1024` or `4,1024`".into())
    }
}

/// `--define NAME=VALUE` with an integer value.
fn parse_define(s: &str) -> Result<(String, i64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got `{s}`"))?;
    let value = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not an integer (a launch reads integer defines)"))?;
    Ok((name.trim().to_string(), value))
}

/// `repro compare`'s arguments.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first kernel: a variant of pipeline.yaml (its `.repro/cubins/<VARIANT>.cubin`
    /// from the build stage), or a path to a `.cubin` (e.g. `.repro/cubins/tune-top1.cubin`).
    pub a: String,
    /// The second kernel, likewise.
    pub b: String,
    /// Entry point of a kernel given as a `.cubin` path (default: the other side's, when it
    /// is a variant; else the entry every kernel of pipeline.yaml shares).
    #[arg(long)]
    pub entry: Option<String>,
    /// A define the `.cubin` sides were compiled with, `NAME=VALUE` (repeated).
    #[arg(long = "define", value_name = "NAME=VALUE", value_parser = parse_define)]
    pub defines: Vec<(String, i64)>,
    /// The workload (default: the variant side's, or the pipeline's only one).
    #[arg(long)]
    pub workload: Option<String>,
    /// A shape name of the workload (default: its primary shape).
    #[arg(long, conflicts_with = "dims")]
    pub shape: Option<String>,
    /// Explicit dimensions: `rows=4,hidden=1024`, or the values in the order of `dims`.
    #[arg(long, value_parser = parse_dims_text)]
    pub dims: Option<String>,
    /// Input seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Launches of each kernel, in turn, before timing.
    #[arg(long, default_value_t = 20)]
    pub warmup: u32,
    /// Pairs of samples (one launch of A and one of B each, in alternating order).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(10..))]
    pub pairs: u32,
    /// `warm`, or `flush` L2 before each sample (outside the timed region).
    #[arg(long, default_value_t = L2Mode::Warm, value_parser = str::parse::<L2Mode>)]
    pub l2: L2Mode,
    /// Device index (among the visible ones).
    #[arg(long, default_value_t = 0)]
    pub device: u32,
    /// The reference cubin (default the build's, of the workload and the GPU's arch).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// Print the comparison as JSON (every sample included).
    #[arg(long)]
    pub json: bool,
}
