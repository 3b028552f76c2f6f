//! The `cmd` kind: run any command as a stage. `run` is an argv list, or one string run
//! with `sh -c` when `shell: true` is written. Its outputs are written in place (the
//! engine backs up the previous ones). Its environment has the stage's `env`, each param
//! as `REPRO_PARAM_<name>` ([`param_env`]: `-` and other characters become `_`),
//! `REPRO_BIN` (this repro, so scripts can call back into it), `REPRO_ROOT` and
//! `REPRO_STAGE`.
//!
//! A `cmd` stage may say what of the machine its results depend on: `gpu: true` puts this
//! machine's GPUs (model, arch, driver) into its fingerprint, and `tools: {name: [argv]}`
//! the version each command prints (`torch: [python3, kernels/baselines/torch_version.py]`, which reads the version without importing torch).
//! Without a GPU, or with a tool missing, the stage cannot measure here: it is skipped
//! before its command starts, and results it measured elsewhere are kept.

use anyhow::bail;
use repro_base::tools::MISSING_TOOL;
use repro_engine::display::visible_line;
use repro_executor::{ExitKind, Job};
use repro_pipeline::kind::{Config, Configured, Overrides};
use repro_pipeline::options::decode;
use repro_pipeline::{
    kind::OptionError, kind::Outputs, kind::RunCtx, kind::StageInputs, kind::StageKind,
    kind::StageOutcome,
};
use repro_pipeline::{validate::env_value_problem, validate::PARAM_ENV_PREFIX};
use repro_pipeline::{Command, Pipeline, StageSpec};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct CmdKind;

/// How much of each line of a failed stage's output its error shows.
const TAIL_COLUMNS: usize = 200;

/// The option that puts the machine's GPUs into the fingerprint.
const GPU: &str = "gpu";
/// The option naming the tools whose versions the results depend on.
const TOOLS: &str = "tools";

/// What of the machine a `cmd` stage declared its results depend on: its own keys.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct MachineNeeds {
    gpu: bool,
    /// Tool name → the command that prints its version.
    tools: BTreeMap<String, Vec<String>>,
}

fn machine_needs(spec: &StageSpec) -> Result<MachineNeeds, OptionError> {
    let needs: MachineNeeds = decode("cmd", spec).map_err(|e| {
        let message = match e.path.first().map(String::as_str) {
            Some(GPU) => "`gpu` must be true or false\nhelp: `gpu: true` when the command measures on this machine's GPU",
            Some(TOOLS) => "`tools` must map a name to the command that prints its version\nhelp: e.g. `tools: {python: [python3, --version]}`",
            _ => return e,
        };
        OptionError {
            path: e.path,
            message: message.into(),
        }
    })?;
    if let Some((name, _)) = needs
        .tools
        .iter()
        .find(|(name, argv)| name.is_empty() || argv.is_empty())
    {
        return Err(option_error(
            &[TOOLS, name],
            format!("tool `{name}` needs the command that prints its version, as a list\nhelp: e.g. `{name}: [{name}, --version]`"),
        ));
    }
    Ok(needs)
}

/// Each declared tool's version on this machine, probed in the stage's environment (its
/// `env:` over repro's) and cached ([`repro_base::tools`]), or `missing`.
fn tool_versions(root: &Path, spec: &StageSpec, needs: &MachineNeeds) -> BTreeMap<String, String> {
    needs
        .tools
        .iter()
        .map(|(name, argv)| {
            let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
            let version = repro_base::tools::probe_in(root, &spec.env, &argv[0], &args, |_| true)
                .map(|t| t.version)
                .unwrap_or_else(|| MISSING_TOOL.to_string());
            (name.clone(), version)
        })
        .collect()
}

fn option_error(path: &[&str], message: String) -> OptionError {
    OptionError {
        path: path.iter().map(|s| s.to_string()).collect(),
        message,
    }
}

/// The variable a param is exported in: `REPRO_PARAM_` and its name, each character that
/// is not an ASCII letter, digit or `_` written as `_` (`learning-rate` is
/// `REPRO_PARAM_learning_rate`).
pub fn param_env(name: &str) -> String {
    let tail: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{PARAM_ENV_PREFIX}{tail}")
}

/// Every param has a name, no two are exported in the same variable, and each value is
/// one a variable can hold.
fn check_params(spec: &StageSpec) -> Result<(), OptionError> {
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in &spec.params {
        if name.is_empty() {
            return Err(option_error(
                &["params", name],
                "a param has an empty name\nhelp: name it with letters, digits, `_` or `-`".into(),
            ));
        }
        if let Some(first) = seen.insert(param_env(name), name) {
            return Err(option_error(
                &["params", name],
                format!(
                    "params `{first}` and `{name}` would both be exported as `{}`\nhelp: rename one: characters other than letters, digits and `_` become `_` in the variable's name",
                    param_env(name)
                ),
            ));
        }
        let text = repro_engine::fingerprint::canonical(value);
        if let Some((problem, help)) = env_value_problem(&param_env(name), &text) {
            return Err(option_error(
                &["params", name],
                format!(
                    "param `{name}` (exported as `{}`) {problem}\nhelp: {help}",
                    param_env(name)
                ),
            ));
        }
    }
    Ok(())
}

/// The argv a `cmd` stage runs (validated shape).
pub fn argv(spec: &StageSpec) -> Option<Vec<String>> {
    match (&spec.run, spec.shell) {
        (Some(Command::Argv(v)), false) if !v.is_empty() => Some(v.clone()),
        (Some(Command::Line(line)), true) => Some(vec!["sh".into(), "-c".into(), line.clone()]),
        _ => None,
    }
}

impl StageKind for CmdKind {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Cmd.as_str()
    }

    fn known_options(&self) -> Option<&'static [&'static str]> {
        Some(&[GPU, TOOLS])
    }

    fn writes_in_place(&self) -> bool {
        true
    }

    /// `timeout:` limits the command; past it, its process group is killed.
    fn configure(
        &self,
        name: &str,
        spec: &StageSpec,
        _pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        let needs = machine_needs(spec)?;
        check_params(spec)?;
        let checked = match (&spec.run, spec.shell) {
            (None, _) => Err(option_error(
                &[],
                format!("stage `{name}` has no `run` command\nhelp: add `run: [program, arg, ...]` (or a string with `shell: true`)"),
            )),
            (Some(Command::Argv(v)), false) if v.is_empty() || v[0].trim().is_empty() => Err(option_error(
                &["run"],
                format!("the `run` command of stage `{name}` has no program\nhelp: write the program and its arguments, e.g. `run: [python3, script.py]`"),
            )),
            (Some(Command::Line(line)), true) if line.trim().is_empty() => Err(option_error(
                &["run"],
                format!("the `run` command of stage `{name}` is empty\nhelp: write the shell command, e.g. `run: \"make all\"`"),
            )),
            (Some(Command::Argv(v)), false) if v.iter().any(|w| w.contains('\0')) => Err(option_error(
                &["run", &v.iter().position(|w| w.contains('\0')).unwrap_or(0).to_string()],
                format!("a word of the `run` command of stage `{name}` holds a NUL byte, which no program argument can\nhelp: remove the `\\0`"),
            )),
            (Some(Command::Line(line)), true) if line.contains('\0') => Err(option_error(
                &["run"],
                format!("the `run` command of stage `{name}` holds a NUL byte, which no shell command can\nhelp: remove the `\\0`"),
            )),
            (Some(Command::Line(_)), false) => Err(option_error(
                &["run"],
                format!("`run` of stage `{name}` is a string, but `shell: true` is not set\nhelp: write the command as a list (`run: [python3, script.py]`), or add `shell: true` to run the string with `sh -c`"),
            )),
            (Some(Command::Argv(_)), true) => Err(option_error(
                &["shell"],
                format!("`shell: true` in stage `{name}` needs `run` as one string\nhelp: write `run: \"cmd1 && cmd2\"`, or drop `shell: true` to run the list as argv"),
            )),
            _ => Ok(()),
        };
        checked.map(|()| Config::new(needs))
    }

    fn outputs(&self, stage: &Configured, _pipeline: &Pipeline) -> Outputs {
        stage.spec.outs.iter().map(PathBuf::from).collect()
    }

    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        _overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        // Deps, params and env are fingerprinted by the engine from the spec; the machine
        // parts the stage declared are added here.
        let needs: &MachineNeeds = stage.config.of();
        Ok(StageInputs {
            tools: tool_versions(root, stage.spec, needs),
            hardware: needs
                .gpu
                .then(|| crate::gpu_nodes::hardware(pipeline, stage.spec, root)),
            ..StageInputs::default()
        })
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let spec = ctx.spec;
        let Some(argv) = argv(spec) else {
            bail!("stage `{}` has no valid `run` command", ctx.name);
        };
        if let Some(skip) = cannot_run_here(ctx)? {
            return Ok(skip);
        }
        let mut job = Job::new(format!("cmd:{}", ctx.name), argv.clone(), ctx.root);
        job.env = spec.env.clone();
        for (k, v) in &spec.params {
            job.env
                .insert(param_env(k), repro_engine::fingerprint::canonical(v));
        }
        job.env
            .insert("REPRO_BIN".into(), ctx.repro_exe.display().to_string());
        job.env
            .insert("REPRO_ROOT".into(), ctx.root.display().to_string());
        job.env.insert("REPRO_STAGE".into(), ctx.name.to_string());
        job.timeout = spec.timeout_duration().ok().flatten();
        job.log = Some(ctx.log.to_path_buf());
        (ctx.progress)(&format!("running {}", argv[0]));
        let out = ctx.executor.run(&job, ctx.cancel)?;
        let what = match &out.exit {
            ExitKind::Code(0) => return Ok(StageOutcome::Passed),
            ExitKind::Code(code) => format!("`{}` exited with code {code}", argv[0]),
            ExitKind::Signal(sig) => format!("`{}` was killed by signal {sig}", argv[0]),
            ExitKind::TimedOut => format!(
                "`{}` timed out after {}s and was killed",
                argv[0],
                job.timeout.map(|t| t.as_secs_f64()).unwrap_or_default()
            ),
            ExitKind::Cancelled => "interrupted".to_string(),
            ExitKind::Scheduler(reason) => format!("the scheduler ended `{}`: {reason}", argv[0]),
        };
        if out.tail.trim().is_empty() {
            bail!("{what} (no output; log: {})", ctx.log.display());
        }
        // The stage's own output: shown, never sent raw to a terminal (escape sequences).
        let indented: Vec<String> = out
            .tail
            .lines()
            .map(|l| format!("    {}", visible_line(l, TAIL_COLUMNS)))
            .collect();
        bail!(
            "{what}; last lines of {}:\n{}",
            ctx.log.display(),
            indented.join("\n")
        )
    }
}

/// The skip for a stage whose declared GPU or tools this machine lacks; `None` when it can run.
fn cannot_run_here(ctx: &RunCtx) -> anyhow::Result<Option<StageOutcome>> {
    let needs: &MachineNeeds = ctx.config.of();
    if needs.gpu {
        if let Err(no) = crate::gpu_nodes::stage_gpus(ctx) {
            return Ok(Some(StageOutcome::Skipped {
                reason: no.0,
                fix: crate::gpu_nodes::no_gpu_fix(ctx.executor, "run this stage"),
            }));
        }
    }
    let missing: Vec<String> = tool_versions(ctx.root, ctx.spec, needs)
        .into_iter()
        .filter(|(_, version)| version == MISSING_TOOL)
        .map(|(name, _)| format!("`{name}` (`{}` failed)", needs.tools[&name].join(" ")))
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    Ok(Some(StageOutcome::Skipped {
        reason: format!("needs {} on this machine", missing.join(", ")),
        fix: "install the tools named, or run the stage on a machine that has them".into(),
    }))
}
