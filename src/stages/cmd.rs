//! The `cmd` kind: run any command as a stage. `run` is an argv list, or one string run
//! with `sh -c` when `shell: true` is written. Its outputs are written in place (the
//! engine backs up the previous ones). Its environment has the stage's `env`, each param
//! as `REPRO_PARAM_<name>`, `REPRO_BIN` (this repro, so scripts can call back into it),
//! `REPRO_ROOT` and `REPRO_STAGE`.

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::executor::{ExitKind, Job};
use crate::pipeline::{Command, Pipeline, StageSpec};
use anyhow::bail;
use std::path::{Path, PathBuf};

pub struct CmdKind;

fn option_error(path: &[&str], message: String) -> OptionError {
    OptionError {
        path: path.iter().map(|s| s.to_string()).collect(),
        message,
    }
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
        "cmd"
    }

    fn known_options(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    fn writes_in_place(&self) -> bool {
        true
    }

    fn validate(
        &self,
        name: &str,
        spec: &StageSpec,
        _pipeline: &Pipeline,
    ) -> Result<(), OptionError> {
        match (&spec.run, spec.shell) {
            (None, _) => Err(option_error(
                &[],
                format!("stage `{name}` has no `run` command\nhelp: add `run: [program, arg, ...]` (or a string with `shell: true`)"),
            )),
            (Some(Command::Argv(v)), false) if v.is_empty() => Err(option_error(
                &["run"],
                format!("the `run` command of stage `{name}` is empty\nhelp: write the program and its arguments, e.g. `run: [python3, script.py]`"),
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
        }
    }

    fn outputs(&self, _name: &str, spec: &StageSpec, _pipeline: &Pipeline) -> Outputs {
        spec.outs.iter().map(PathBuf::from).collect()
    }

    fn inputs(
        &self,
        _name: &str,
        _spec: &StageSpec,
        _pipeline: &Pipeline,
        _root: &Path,
    ) -> anyhow::Result<StageInputs> {
        // Deps, params and env are fingerprinted by the engine from the spec.
        Ok(StageInputs::default())
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let spec = ctx.spec;
        let Some(argv) = argv(spec) else {
            bail!("stage `{}` has no valid `run` command", ctx.name);
        };
        let mut job = Job::new(format!("cmd:{}", ctx.name), argv.clone(), ctx.root);
        job.env = spec.env.clone();
        for (k, v) in &spec.params {
            if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                job.env.insert(
                    format!("REPRO_PARAM_{k}"),
                    crate::engine::fingerprint::canonical(v),
                );
            }
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
        let indented: Vec<String> = out.tail.lines().map(|l| format!("    {l}")).collect();
        bail!(
            "{what}; last lines of {}:\n{}",
            ctx.log.display(),
            indented.join("\n")
        )
    }
}
