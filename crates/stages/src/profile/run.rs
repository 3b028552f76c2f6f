//! The ncu run of the baseline calls of one command: the job, the full report kept on
//! request, the records read from ncu's output; and the summary written at the end.

use super::calls::read_calls;
use super::kernels::Profiled;
use super::ncu_call::NcuCall;
use super::targets::status_target;
use super::targets::Program;
use super::targets::Target;
use anyhow::Context as _;
use repro_executor::ExitKind;
use repro_executor::Job;
use repro_ncu as ncu_mod;
use repro_ncu::metrics::Arch;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::kind::StageOutcome;
use repro_schema::to_json_pretty;
use repro_schema::NcuSummary;
use repro_schema::NcuTarget;
use repro_schema::RunStatus;
use std::path::Path;
use std::time::Duration;

/// The ncu job for one unit (a kernel target, or the baseline calls of one command);
/// `page` are the flags that choose the output.
pub(super) fn profile_job(
    ctx: &RunCtx,
    call: &NcuCall,
    unit: &[&Target],
    timeout: Duration,
    page: &[String],
) -> Job {
    let labels: Vec<&str> = unit.iter().map(|t| t.label.as_str()).collect();
    let mut job = Job::new(
        format!("profile:{}", labels.join("+")),
        call.script_argv(unit, page),
        ctx.root,
    );
    job.timeout = Some(timeout);
    job.log = Some(ctx.log.to_path_buf());
    job.capture_stdout = true;
    job.gpu = Some(0);
    job.env = ctx.spec.env.clone().into_iter().collect();
    if matches!(unit[0].program, Program::Script(_)) {
        // As the cmd stage gives its scripts: this repro, to dump the workload's inputs.
        job.env
            .insert("REPRO_BIN".into(), ctx.repro_exe.display().to_string());
        job.env
            .insert("REPRO_ROOT".into(), ctx.root.display().to_string());
    }
    job
}

/// Save a full-set report to `.repro/ncu/<target>.ncu-rep` (outside the staged outputs); the
/// baseline calls of one process share its report, copied under each label.
pub(super) fn keep_report(
    ctx: &RunCtx,
    call: &NcuCall,
    unit: &[&Target],
    timeout: Duration,
) -> Result<(), String> {
    let dir = ctx.root.join(".repro/ncu");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let report = dir.join(&unit[0].label);
    let flags = ["--set", "full", "-f", "-o", &report.to_string_lossy()].map(str::to_string);
    let job = profile_job(ctx, call, unit, timeout, &flags);
    let outcome = ctx
        .executor
        .run(&job, ctx.cancel)
        .map_err(|e| e.to_string())?;
    if !outcome.success() {
        return Err(format!(
            "ncu ended with {:?}: {}",
            outcome.exit,
            last_lines(&outcome.tail, 5)
        ));
    }
    let saved = dir.join(format!("{}.ncu-rep", unit[0].label));
    for t in &unit[1..] {
        let copy = dir.join(format!("{}.ncu-rep", t.label));
        std::fs::copy(&saved, &copy)
            .map_err(|e| format!("cannot copy {} to {}: {e}", saved.display(), copy.display()))?;
    }
    Ok(())
}

/// How a unit's output is read: the GPU's architecture, the user's extra metrics, and how
/// many launches (a baseline's: calls) each target had profiled.
pub(super) struct Reading<'a> {
    pub arch: Option<Arch>,
    pub extra: &'a [String],
    pub launches: u32,
}

/// Profile the calls of baseline scripts that share one command in one ncu process.
pub(super) fn profile_scripts(
    ctx: &RunCtx,
    call: &NcuCall,
    unit: &[&Target],
    reading: &Reading,
) -> anyhow::Result<Profiled> {
    let job = script_job(ctx, call, unit, None);
    let outcome = ctx.executor.run(&job, ctx.cancel)?;
    read_script_outcome(unit, &outcome, reading)
}

/// The ncu job of a script unit; with `gate`, the script waits for that file to exist
/// before it copies to or launches on the GPU (`REPRO_PROFILE_GATE`, [`super::schedule`]),
/// and its time limit covers the wait.
pub(super) fn script_job(
    ctx: &RunCtx,
    call: &NcuCall,
    unit: &[&Target],
    gate: Option<(&Path, Duration)>,
) -> Job {
    let page = call.csv_page();
    let mut job = profile_job(ctx, call, unit, call.opts.timeout, &page);
    if let Some((gate, wait)) = gate {
        job.env.insert(GATE_VAR.into(), gate.display().to_string());
        job.timeout = job.timeout.map(|t| t + wait);
    }
    job
}

/// The variable naming the file a baseline script waits for before it puts work on the GPU.
pub(super) const GATE_VAR: &str = "REPRO_PROFILE_GATE";

/// A script unit's records from how its ncu job ended.
pub(super) fn read_script_outcome(
    unit: &[&Target],
    outcome: &repro_executor::JobOutcome,
    reading: &Reading,
) -> anyhow::Result<Profiled> {
    if outcome.exit == ExitKind::Cancelled {
        let labels: Vec<&str> = unit.iter().map(|t| t.label.as_str()).collect();
        anyhow::bail!("interrupted while profiling {}", labels.join(", "));
    }
    let stdout = String::from_utf8_lossy(&outcome.stdout).into_owned();
    Ok(read_unit(unit, outcome, &stdout, reading))
}

/// Turn one script unit's ncu run into its calls' records, each with the CSV to write.
pub(super) fn read_unit(
    unit: &[&Target],
    outcome: &repro_executor::JobOutcome,
    stdout: &str,
    reading: &Reading,
) -> Profiled {
    let everything = format!("{stdout}\n{}", outcome.tail);
    if ncu_mod::is_permission_error(&everything) {
        let line = everything
            .lines()
            .find(|l| l.contains("ERR_NVGPUCTRPERM"))
            .unwrap_or("ERR_NVGPUCTRPERM")
            .trim()
            .to_string();
        return Err(line);
    }
    let context = failure_context(stdout, &outcome.tail);
    let ended = match &outcome.exit {
        ExitKind::Code(0) => None,
        ExitKind::TimedOut => Some(format!("ncu timed out; last output:\n{context}")),
        other => Some(format!("ncu ended with {other:?}:\n{context}")),
    };
    if let Some(reason) = ended {
        let failed = |t: &&Target| {
            let record = status_target(
                &t.label,
                &t.variant,
                &t.entry,
                RunStatus::Failed,
                reason.clone(),
            );
            (record, stdout.to_string())
        };
        return Ok(unit.iter().map(failed).collect());
    }
    Ok(read_calls(unit, stdout, &everything, reading))
}

/// What to show when a target fails: ncu's messages and the program's own lines (its
/// stderr included, from the job's tail), without the CSV records, the last 15, each cut
/// to 300 characters.
pub(super) fn failure_context(stdout: &str, tail: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in stdout.lines().chain(tail.lines()) {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('"') || lines.iter().any(|l| l == line) {
            continue;
        }
        lines.push(line.chars().take(300).collect());
    }
    lines[lines.len().saturating_sub(15)..].join("\n")
}

pub(super) fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Write `summary.json` (targets in the order they were profiled, then the skipped ones).
pub(super) fn finish(
    out_dir: &Path,
    mut summary: NcuSummary,
    skipped: Vec<NcuTarget>,
    outcome: StageOutcome,
) -> anyhow::Result<StageOutcome> {
    summary.targets.extend(skipped);
    let path = out_dir.join("summary.json");
    std::fs::write(&path, to_json_pretty(&summary))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(outcome)
}
