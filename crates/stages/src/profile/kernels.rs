//! The kernel targets (variants, tune elites) profiled in one ncu process: a GPU worker
//! (`repro exec --worker`) runs under `ncu --profile-from-start off`, and each target's
//! request launches its kernel `launches` times inside a profiler window, after the
//! correctness check and the warm-up ([`NcuCall::request`]). ncu profiles those launches and
//! nothing else, so its CSV holds `launches` launches per answered request, in request order.
//!
//! A request that fails ends the process there: its launches, if any, come last in the CSV,
//! and the targets after it run in a fresh process. When a process ends before ncu wrote
//! its CSV (a crash or a hang kills it), the targets it had answered run once more.
//!
//! A pass's process can be started ahead of its turn ([`Process::start`]): ncu starts, and
//! the worker opens its CUDA context, then waits for its first request with nothing on the
//! GPU. ncu sets itself up at a process's first profiled launch and lets one process's
//! launches be profiled at a time, so a process started early must make none before its
//! turn; a context alone neither takes ncu nor disturbs the launches it profiles
//! (docs/guide/ncu.md, "Processes started ahead of their turn").

use super::calls::csv_of;
use super::ncu_call::{NcuCall, Page};
use super::run::{failure_context, Reading};
use super::targets::{status_target, Target};
use crate::gpu_nodes::stage_jobs;
use repro_gpu::worker::pool::Workers;
use repro_ncu::launches::summarize_launches;
use repro_ncu::metrics;
use repro_ncu::parse::{self, Launch};
use repro_pipeline::kind::RunCtx;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::Workloads;
use repro_schema::{BenchResult, NcuTarget, RunStatus};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Each target's record and CSV, in the order given, or the line saying ncu may not read
/// the GPU's counters.
pub(super) type Profiled = Result<Vec<(NcuTarget, String)>, String>;

/// What one ncu process did: the targets whose requests ran to the end, in order, and
/// whether the process stopped early at a failed one.
struct Round {
    answered: Vec<usize>,
    stopped_early: bool,
    /// Why the run it stopped at failed (empty when none did).
    failure: String,
    /// ncu's output (its CSV), and how its process ended.
    text: String,
    ending: String,
}

/// An ncu process whose GPU worker profiles kernel targets, writing its CSV to `csv`. It
/// starts when made; dropped before it is ended, it is killed.
pub(super) struct Process<'a> {
    workers: Option<Workers<'a>>,
    csv: PathBuf,
    began: Instant,
}

impl<'a> Process<'a> {
    /// Start one now. A worker that cannot start fails its first run, which says why.
    pub(super) fn start(ctx: &RunCtx<'a>, call: &NcuCall, csv: PathBuf) -> Process<'a> {
        if let Some(dir) = csv.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::remove_file(&csv);
        let workers = Workers::wrapped(stage_jobs(ctx), 1, call.wrapper(&Page::Csv(&csv)));
        let _ = workers.start(0);
        Process {
            workers: Some(workers),
            csv,
            began: Instant::now(),
        }
    }

    /// When it started.
    pub(super) fn began(&self) -> Instant {
        self.began
    }

    fn workers(&self) -> &Workers<'a> {
        self.workers.as_ref().expect("a live process")
    }

    /// End it, giving ncu `grace` to write: its CSV, and how it ended.
    fn end(mut self, grace: Duration) -> (String, String) {
        let workers = self.workers.take().expect("a live process");
        let ending = match workers.close(grace).pop() {
            Some(Ok(outcome)) => format!("ncu ended with {:?}", outcome.exit),
            Some(Err(e)) => format!("ncu could not be ended cleanly: {e:#}"),
            None => "ncu had ended already".into(),
        };
        let text = std::fs::read_to_string(&self.csv).unwrap_or_default();
        (text, ending)
    }
}

impl Drop for Process<'_> {
    fn drop(&mut self) {
        if let Some(workers) = self.workers.take() {
            let _ = workers.close(Duration::ZERO);
        }
    }
}

/// Profile `targets` (kernel targets only) in as few ncu processes as they allow, the first
/// being `first`; any after it write their CSV where it does.
pub(super) fn profile_kernels<'a>(
    ctx: &RunCtx<'a>,
    call: &NcuCall,
    targets: &[&Target],
    reading: &Reading,
    first: Process<'a>,
) -> Profiled {
    let csv = first.csv.clone();
    let mut first = Some(first);
    let mut records: Vec<Option<(NcuTarget, String)>> = vec![None; targets.len()];
    let mut queue: Vec<usize> = (0..targets.len()).collect();
    let mut second_try: BTreeSet<usize> = BTreeSet::new();
    while !queue.is_empty() {
        let process = first
            .take()
            .unwrap_or_else(|| Process::start(ctx, call, csv.clone()));
        let round = run_round(ctx, process, call, targets, &queue, &mut records);
        // ncu says so in its log; its stderr, where the failed run's reason quotes it.
        let said = format!("{}\n{}", round.text, round.failure);
        if repro_ncu::is_permission_error(&said) {
            let line = said
                .lines()
                .find(|l| l.contains("ERR_NVGPUCTRPERM"))
                .unwrap_or("ERR_NVGPUCTRPERM");
            return Err(line.trim().to_string());
        }
        let unread = assign(targets, &round.answered, &round.text, reading, &mut records);
        let attempted = round.answered.len() + usize::from(round.stopped_early);
        let mut next: Vec<usize> = queue[attempted.min(queue.len())..].to_vec();
        for i in unread {
            // Killed before ncu wrote: worth a fresh process once. Otherwise ncu's output
            // lacks them for a reason another run would not change.
            if round.stopped_early && second_try.insert(i) {
                next.push(i);
            } else {
                let reason = format!(
                    "ncu's output has no profiled launches of `{}` for this target ({}):\n{}",
                    targets[i].entry,
                    round.ending,
                    failure_context(&round.text, "")
                );
                records[i] = Some(failed(targets[i], reason));
            }
        }
        queue = next;
    }
    Ok(records
        .into_iter()
        .map(|r| r.expect("every target was profiled or failed"))
        .collect())
}

/// Run the targets `queue` names in `process` until one fails (recorded in `records`),
/// then end it.
fn run_round(
    ctx: &RunCtx,
    process: Process,
    call: &NcuCall,
    targets: &[&Target],
    queue: &[usize],
    records: &mut [Option<(NcuTarget, String)>],
) -> Round {
    let workers = process.workers();
    let workloads = Workloads::of(ctx.pipeline);
    let mut answered = Vec::new();
    let mut failure = String::new();
    for &i in queue {
        let t = targets[i];
        let done = records.iter().filter(|r| r.is_some()).count() + answered.len();
        (ctx.progress)(&format!("ncu {} ({}/{})", t.label, done + 1, targets.len()));
        let record = workers.run(0, &call.request(t), &dims(&workloads, t), call.opts.timeout);
        let Some(why) = run_failure(record) else {
            answered.push(i);
            continue;
        };
        failure = why;
        records[i] = Some(failed(t, format!("the run under ncu failed: {failure}")));
        break;
    }
    let (text, ending) = process.end(call.opts.timeout);
    Round {
        answered,
        stopped_early: !failure.is_empty(),
        failure,
        text,
        ending,
    }
}

/// Why a run under ncu failed, if it did: it did not run to its end, or its outputs failed
/// the correctness check (a profile of a kernel that computes the wrong thing is no measure
/// of it). An unchecked run (`ExecRequest::check`) has no verdict.
fn run_failure(record: BenchResult) -> Option<String> {
    if record.status != RunStatus::Ok {
        return Some(record.error.unwrap_or_else(|| "repro exec failed".into()));
    }
    (record.correctness_pass == Some(false)).then(|| match record.error {
        Some(why) => format!("its outputs failed the correctness check: {why}"),
        None => "its outputs failed the correctness check (its accuracy figures against the \
                 workload's gates: `repro exec` on the same target prints them)"
            .into(),
    })
}

/// Give each `answered` target (in request order) its `launches` launches from ncu's
/// output `text`, in order, into `records`; the targets whose launches are not there (or
/// are not of their entry) come back.
pub(super) fn assign(
    targets: &[&Target],
    answered: &[usize],
    text: &str,
    reading: &Reading,
    records: &mut [Option<(NcuTarget, String)>],
) -> Vec<usize> {
    let launches = match parse::parse(text) {
        Ok(export) => export.launches,
        Err(_) => return answered.to_vec(),
    };
    let n = reading.launches as usize;
    let mut unread = Vec::new();
    for (k, &i) in answered.iter().enumerate() {
        let t = targets[i];
        let chunk: Option<Vec<&Launch>> = launches
            .get(k * n..(k + 1) * n)
            .map(|c| c.iter().collect())
            .filter(|c: &Vec<&Launch>| c.iter().all(|l| l.function_name() == t.entry));
        let Some(chunk) = chunk else {
            unread.push(i);
            continue;
        };
        records[i] = Some(read_target(t, &chunk, text, reading));
    }
    unread
}

/// A target's record from its profiled launches, and its part of ncu's CSV.
fn read_target(
    target: &Target,
    launches: &[&Launch],
    text: &str,
    reading: &Reading,
) -> (NcuTarget, String) {
    let record = summarize_launches(
        launches,
        reading.arch,
        reading.extra,
        metrics::TargetId {
            target: &target.label,
            variant: &target.variant,
            kernel: &target.entry,
        },
    );
    if record.kernel_time_us.is_none() {
        let ids: Vec<&str> = launches.iter().map(|l| l.id.as_str()).collect();
        let reason = format!(
            "ncu listed launches {} of {} but measured no time for some (did the kernel fail?)",
            ids.join(", "),
            target.entry
        );
        return failed(target, reason);
    }
    let ids: BTreeSet<&str> = launches.iter().map(|l| l.id.as_str()).collect();
    (record, csv_of(text, &ids))
}

fn failed(target: &Target, reason: String) -> (NcuTarget, String) {
    let record = status_target(
        &target.label,
        &target.variant,
        &target.entry,
        RunStatus::Failed,
        reason,
    );
    (record, String::new())
}

/// The dimensions of `target`'s shape (for the record of a run that did not answer).
fn dims(workloads: &Workloads, target: &Target) -> Bindings {
    workloads
        .get(&target.workload)
        .and_then(|d| d.shape_dims(&target.shape))
        .unwrap_or_default()
}

/// `keep_report`: profile `targets` again in one process with ncu's full set, saved to
/// `.repro/ncu/kernels.ncu-rep` and copied to each target's `<label>.ncu-rep`.
pub(super) fn keep_report(ctx: &RunCtx, call: &NcuCall, targets: &[&Target]) -> Result<(), String> {
    let dir = ctx.root.join(".repro/ncu");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let workers = Workers::wrapped(
        stage_jobs(ctx),
        1,
        call.wrapper(&Page::Report(&dir.join("kernels"))),
    );
    let workloads = Workloads::of(ctx.pipeline);
    for t in targets {
        let record = workers.run(0, &call.request(t), &dims(&workloads, t), call.opts.timeout);
        if record.status != RunStatus::Ok {
            let why = record.error.unwrap_or_default();
            return Err(format!("the run of {} under ncu failed: {why}", t.label));
        }
    }
    match workers.close(call.opts.timeout).pop() {
        Some(Ok(o)) if o.success() => {}
        Some(Ok(o)) => return Err(format!("ncu ended with {:?}: {}", o.exit, o.tail)),
        Some(Err(e)) => return Err(format!("{e:#}")),
        None => return Err("ncu ended before the last run".into()),
    }
    let saved = dir.join("kernels.ncu-rep");
    for t in targets {
        let copy = dir.join(format!("{}.ncu-rep", t.label));
        std::fs::copy(&saved, &copy)
            .map_err(|e| format!("cannot copy {} to {}: {e}", saved.display(), copy.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::run_failure;
    use repro_schema::{BenchResult, RunStatus};

    fn answer(status: RunStatus, pass: Option<bool>, error: Option<&str>) -> BenchResult {
        let mut r = BenchResult::blank("mission", Default::default(), 0, (5, 1), status);
        r.correctness_pass = pass;
        r.error = error.map(str::to_string);
        r
    }

    #[test]
    fn a_run_fails_when_it_did_not_end_or_its_check_failed_and_not_when_unchecked() {
        assert_eq!(run_failure(answer(RunStatus::Ok, Some(true), None)), None);
        assert_eq!(
            run_failure(answer(RunStatus::Ok, None, None)),
            None,
            "unchecked"
        );
        let crashed = answer(RunStatus::Failed, None, Some("CUDA_ERROR_LAUNCH_FAILED"));
        assert_eq!(
            run_failure(crashed).as_deref(),
            Some("CUDA_ERROR_LAUNCH_FAILED")
        );
        let unwritten = answer(RunStatus::Ok, Some(false), Some("`out` was never written"));
        assert_eq!(
            run_failure(unwritten).as_deref(),
            Some("its outputs failed the correctness check: `out` was never written")
        );
        let wrong = run_failure(answer(RunStatus::Ok, Some(false), None)).unwrap();
        assert!(
            wrong.starts_with("its outputs failed the correctness check ("),
            "{wrong}"
        );
    }
}
