//! One target's ncu run: the job, the full report kept on request, the target's record
//! read from ncu's output, and the summary written at the end.

use super::ncu_call::NcuCall;
use super::targets::{status_target, Program, Target};
use super::RunResult;
use crate::engine::{RunCtx, StageOutcome};
use crate::executor::{ExitKind, Job};
use crate::ncu::metrics::{self, Arch};
use crate::ncu::{self as ncu_mod, parse};
use crate::schema::{to_json_pretty, NcuKernel, NcuSummary, NcuTarget};
use anyhow::Context as _;
use std::path::Path;
use std::time::Duration;

/// The ncu job for one target; `page` are the flags that choose the output.
pub(super) fn profile_job(
    ctx: &RunCtx,
    call: &NcuCall,
    target: &Target,
    timeout: Duration,
    page: &[&str],
) -> Job {
    let extra: Vec<String> = page.iter().map(|s| s.to_string()).collect();
    let mut job = Job::new(
        format!("profile:{}", target.label),
        call.argv(target, &extra),
        ctx.root,
    );
    job.timeout = Some(timeout);
    job.log = Some(ctx.log.to_path_buf());
    job.capture_stdout = true;
    job.gpu = Some(0);
    job.env = ctx.spec.env.clone().into_iter().collect();
    if matches!(target.program, Program::Script(_)) {
        // As the cmd stage gives its scripts: this repro, to dump the workload's inputs.
        job.env
            .insert("REPRO_BIN".into(), ctx.repro_exe.display().to_string());
        job.env
            .insert("REPRO_ROOT".into(), ctx.root.display().to_string());
    }
    job
}

/// Save a full-set report to `.repro/ncu/<target>.ncu-rep` (outside the staged outputs).
pub(super) fn keep_report(
    ctx: &RunCtx,
    call: &NcuCall,
    target: &Target,
    timeout: Duration,
) -> Result<(), String> {
    let dir = ctx.root.join(".repro/ncu");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let report = dir.join(&target.label);
    let flags = ["--set", "full", "-f", "-o", &report.to_string_lossy()].map(str::to_string);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let job = profile_job(ctx, call, target, timeout, &flags);
    let outcome = ctx
        .executor
        .run(&job, ctx.cancel)
        .map_err(|e| e.to_string())?;
    if outcome.success() {
        Ok(())
    } else {
        Err(format!(
            "ncu ended with {:?}: {}",
            outcome.exit,
            last_lines(&outcome.tail, 5)
        ))
    }
}

/// Turn one ncu run into the target's record.
pub(super) fn read_target(
    target: &Target,
    outcome: &crate::executor::JobOutcome,
    stdout: &str,
    arch: Option<Arch>,
    extra: &[String],
) -> RunResult {
    let everything = format!("{stdout}\n{}", outcome.tail);
    if ncu_mod::is_permission_error(&everything) {
        let line = everything
            .lines()
            .find(|l| l.contains("ERR_NVGPUCTRPERM"))
            .unwrap_or("ERR_NVGPUCTRPERM")
            .trim()
            .to_string();
        return RunResult::NoPermission(line);
    }
    let failed = |reason: String| {
        RunResult::Done(Box::new(status_target(
            &target.label,
            &target.variant,
            &target.entry,
            "failed",
            reason,
        )))
    };
    let context = failure_context(stdout, &outcome.tail);
    match &outcome.exit {
        ExitKind::Code(0) => {}
        ExitKind::TimedOut => return failed(format!("ncu timed out; last output:\n{context}")),
        other => return failed(format!("ncu ended with {other:?}:\n{context}")),
    }
    if let Program::Script(_) = target.program {
        if let Some(reason) = script_skipped(&everything) {
            return RunResult::Done(Box::new(status_target(
                &target.label,
                &target.variant,
                "",
                "skipped",
                reason,
            )));
        }
    }
    let export = match parse::parse(stdout) {
        Ok(e) => e,
        Err(e) => return failed(format!("cannot read ncu's CSV: {e}")),
    };
    if let Program::Script(_) = target.program {
        return RunResult::Done(Box::new(baseline_call(target, &export, arch, extra)));
    }
    let launch = export
        .launches
        .iter()
        .find(|l| l.function_name() == target.entry)
        .unwrap_or(&export.launches[0]);
    let record = metrics::summarize(
        launch,
        arch,
        extra,
        metrics::TargetId {
            target: &target.label,
            variant: &target.variant,
            kernel: &target.entry,
        },
    );
    if record.kernel_time_us.is_none() {
        return failed(format!(
            "ncu listed launch {} of {} but measured nothing (did the kernel fail?):\n{context}",
            launch.id, launch.kernel
        ));
    }
    RunResult::Done(Box::new(record))
}

/// The line a baseline script prints instead of profiling (no torch, no GPU, no backend).
const SKIP_MARKER: &str = "repro-profile: skipped: ";

/// The reason a baseline script gave for not running its call, if it gave one.
pub(super) fn script_skipped(output: &str) -> Option<String> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix(SKIP_MARKER))
        .map(|r| r.trim().to_string())
}

/// A baseline call's record: every kernel ncu profiled inside the NVTX range, their summed
/// time as the call's kernel time, the other metrics from the longest kernel.
pub(super) fn baseline_call(
    target: &Target,
    export: &parse::Export,
    arch: Option<Arch>,
    extra: &[String],
) -> NcuTarget {
    let time = |l: &parse::Launch| metrics::read(l, metrics::Field::KernelTimeUs, arch);
    let kernels: Vec<NcuKernel> = export
        .launches
        .iter()
        .map(|l| NcuKernel {
            name: l.function_name().to_string(),
            time_us: time(l).map(|(t, _)| t),
        })
        .collect();
    let longest = export
        .launches
        .iter()
        .max_by(|a, b| {
            let t = |l| time(l).map_or(f64::NEG_INFINITY, |(t, _)| t);
            t(a).total_cmp(&t(b))
        })
        .expect("a parsed export has a launch");
    let mut record = metrics::summarize(
        longest,
        arch,
        extra,
        metrics::TargetId {
            target: &target.label,
            variant: &target.variant,
            kernel: longest.function_name(),
        },
    );
    let times: Option<Vec<f64>> = kernels.iter().map(|k| k.time_us).collect();
    record.kernel_time_us = times.map(|t| t.iter().sum());
    if record.kernel_time_us.is_none() {
        record.status = "failed".into();
        record.reason = Some(format!(
            "ncu measured no time for some of the {} kernels of the call",
            kernels.len()
        ));
    }
    record.kernels = kernels;
    record
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
