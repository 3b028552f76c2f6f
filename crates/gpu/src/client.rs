//! For stages: what one `repro exec` run is ([`ExecRequest`], sent to a GPU worker, see
//! [`super::worker`]) and the records a run without a result becomes: a crash, timeout or
//! unreadable answer is a `failed` [`BenchResult`] with the reason, never an error, so one
//! bad kernel does not stop a stage.

use super::timing::{L2Mode, Method};
use repro_executor::ExitKind;
use repro_executor::JobOutcome;
use repro_pipeline::workload::exprs::Bindings;
use repro_schema::BenchResult;
use repro_schema::RunStatus;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What to run: a variant of pipeline.yaml, or a cubin, its entry and the defines it was
/// compiled with (which the workload's launch geometry may read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecTarget {
    Variant(String),
    Cubin {
        path: PathBuf,
        entry: String,
        #[serde(default, skip_serializing_if = "Bindings::is_empty")]
        defines: Bindings,
    },
}

/// One `repro exec` run: what the bench, tune and profile stages ask for, and what the
/// command line parses back ([`ExecRequest::argv`] and `commands::exec` are each other's
/// inverse; a test checks the round trip). A worker reads it as JSON
/// ([`super::worker`]). A `shape` is a name of the workload's shapes, or its dimensions
/// (`rows=4,hidden=1024`, or the values in the order of its `dims`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub target: ExecTarget,
    /// The workload (`--workload`); `None`: the variant's, or the pipeline's only one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    pub shape: String,
    /// The input recipe (`repro exec --inputs`); `None`: the shape's first.
    pub inputs: Option<String>,
    /// The precision class to judge by (`--precision`); `None`: the variant's own.
    pub precision: Option<String>,
    pub seed: u64,
    pub warmup: u32,
    pub iters: u32,
    pub l2: L2Mode,
    pub method: Method,
    /// `false`: check correctness only (`--no-timing`).
    pub timing: bool,
    /// Launches of the entry inside a profiler window after the warm-up, instead of timing
    /// (`--profile-launches`): what `ncu --profile-from-start off` profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<u32>,
    /// `false` (`--unchecked`, only with `profile`): launch without the correctness check,
    /// so without the reference's outputs, for a cubin another run checked on the same case:
    /// the profile stage's passes after its time pass.
    #[serde(default = "checked", skip_serializing_if = "is_checked")]
    pub check: bool,
}

fn checked() -> bool {
    true
}

fn is_checked(check: &bool) -> bool {
    *check
}

impl ExecRequest {
    /// The `repro exec` arguments (after `exec`) that ask for this run: the one place
    /// that spells them.
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        match &self.target {
            ExecTarget::Variant(v) => argv.extend(["--variant".into(), v.clone()]),
            ExecTarget::Cubin {
                path,
                entry,
                defines,
            } => {
                argv.extend([
                    "--cubin".into(),
                    path.display().to_string(),
                    "--entry".into(),
                    entry.clone(),
                ]);
                for (k, v) in defines {
                    argv.extend(["--define".into(), format!("{k}={v}")]);
                }
            }
        }
        if let Some(w) = &self.workload {
            argv.extend(["--workload".into(), w.clone()]);
        }
        let shape_flag = if super::exec::is_dims(&self.shape) {
            "--dims"
        } else {
            "--shape"
        };
        argv.extend([
            shape_flag.into(),
            self.shape.clone(),
            "--seed".into(),
            self.seed.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--iters".into(),
            self.iters.to_string(),
            "--l2".into(),
            self.l2.name().into(),
            "--method".into(),
            self.method.name().into(),
        ]);
        if let Some(r) = &self.inputs {
            argv.extend(["--inputs".into(), r.clone()]);
        }
        if let Some(p) = &self.precision {
            argv.extend(["--precision".into(), p.clone()]);
        }
        if !self.timing {
            argv.push("--no-timing".into());
        }
        if let Some(n) = self.profile {
            argv.extend(["--profile-launches".into(), n.to_string()]);
        }
        if !self.check {
            argv.push("--unchecked".into());
        }
        argv
    }

    /// A short label, e.g. `stage2-baseline:mission:0` (`...:mission:sink:0` for a recipe
    /// other than the shape's first, or gaussian).
    pub fn label(&self) -> String {
        let target = match &self.target {
            ExecTarget::Variant(v) => v.clone(),
            ExecTarget::Cubin { path, .. } => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        };
        match self.inputs.as_deref() {
            None | Some("gaussian") => format!("{target}:{}:{}", self.shape, self.seed),
            Some(r) => format!("{target}:{}:{r}:{}", self.shape, self.seed),
        }
    }
}

/// Environment variable telling `repro exec` which physical GPU index it was given (the
/// executor restricts the child to that GPU, which the child then sees as device 0).
pub const GPU_INDEX_ENV: &str = "REPRO_GPU_INDEX";

/// A `failed` record for `req` (of dimensions `dims`) saying why.
pub fn failed_result(req: &ExecRequest, dims: &Bindings, reason: String) -> BenchResult {
    let mut r = BenchResult::blank(
        &req.shape,
        dims.clone(),
        req.seed,
        (req.warmup, req.iters),
        RunStatus::Failed,
    );
    if let Some(recipe) = &req.inputs {
        r.inputs = recipe.clone();
    }
    r.error = Some(reason);
    r
}

/// How `program` ended, for a run it left without a result: its exit code or signal with
/// its error lines, the timeout, the interrupt, or the scheduler's reason.
pub(crate) fn why_it_ended(program: &str, outcome: &JobOutcome) -> String {
    match &outcome.exit {
        ExitKind::Code(code) => format!(
            "{program} exited with code {code}: {}",
            error_lines(&outcome.tail)
        ),
        ExitKind::Signal(sig) => format!(
            "{program} was killed by signal {sig} ({}): {}",
            signal_name(*sig),
            error_lines(&outcome.tail)
        ),
        ExitKind::TimedOut => format!(
            "timed out after {:.1} s and was killed (a hang or deadlock in the kernel?)",
            outcome.elapsed.as_secs_f64()
        ),
        ExitKind::Cancelled => "cancelled (the run was interrupted)".into(),
        ExitKind::Scheduler(reason) => format!("the scheduler ended the job: {reason}"),
    }
}

/// The `error: ...` lines of a tail, or its last three lines.
pub(crate) fn error_lines(tail: &str) -> String {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("error"))
        .collect();
    let chosen = if errors.is_empty() {
        lines[lines.len().saturating_sub(3)..].to_vec()
    } else {
        errors
    };
    if chosen.is_empty() {
        "no output".into()
    } else {
        truncate(&chosen.join(" | "), 500)
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn mission() -> Bindings {
        Bindings::from([("rows".into(), 4096), ("hidden".into(), 4096)])
    }

    fn req() -> ExecRequest {
        ExecRequest {
            target: ExecTarget::Variant("stage5-ws-p1".into()),
            workload: None,
            shape: "mission".into(),
            inputs: Some("gaussian".into()),
            precision: None,
            seed: 2,
            warmup: 20,
            iters: 100,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            timing: true,
            profile: None,
            check: true,
        }
    }

    fn outcome(exit: ExitKind, tail: &str) -> JobOutcome {
        JobOutcome {
            exit,
            stdout: Vec::new(),
            tail: tail.into(),
            node: None,
            elapsed: Duration::from_millis(2500),
        }
    }

    #[test]
    fn argv_carries_every_option() {
        let mut r = req();
        r.timing = false;
        r.l2 = L2Mode::Flush;
        r.method = Method::Graph;
        r.inputs = Some("tiny".into());
        r.precision = Some("fp8-pv".into());
        r.workload = Some("rmsnorm".into());
        assert_eq!(
            r.argv().join(" "),
            "--variant stage5-ws-p1 --workload rmsnorm --shape mission --seed 2 --warmup 20 \
             --iters 100 --l2 flush --method graph --inputs tiny --precision fp8-pv --no-timing"
        );
        assert_eq!(r.label(), "stage5-ws-p1:mission:tiny:2");
    }

    #[test]
    fn cubin_target_names_the_entry_and_defines() {
        let mut r = req();
        r.target = ExecTarget::Cubin {
            path: "/c/fault.cubin".into(),
            entry: "rmsnorm_fwd".into(),
            defines: Bindings::from([("VEC".into(), 8), ("ROWS_PER_BLOCK".into(), 2)]),
        };
        r.shape = "rows=4,hidden=1024".into();
        r.inputs = None;
        assert!(
            r.argv().join(" ").starts_with(
                "--cubin /c/fault.cubin --entry rmsnorm_fwd --define ROWS_PER_BLOCK=2 \
                 --define VEC=8 --dims rows=4,hidden=1024 "
            ),
            "{:?}",
            r.argv()
        );
        assert_eq!(r.label(), "fault:rows=4,hidden=1024:2");
    }

    #[test]
    fn records_without_a_node_stay_as_they_were() {
        let old = BenchResult::blank("mission", mission(), 2, (20, 100), RunStatus::Ok);
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("node"), "{line}");
        assert_eq!(serde_json::from_str::<BenchResult>(&line).unwrap(), old);
    }

    #[test]
    fn a_failed_record_keeps_the_runs_identity() {
        let mut r = req();
        r.inputs = Some("tiny".into());
        let got = failed_result(&r, &mission(), "why".into());
        assert_eq!(got.status, RunStatus::Failed);
        assert_eq!((got.dims["rows"], got.seed), (4096, 2));
        assert_eq!(got.inputs, "tiny");
        assert_eq!(got.error.as_deref(), Some("why"));
        assert_eq!(got.p50_us, None);
    }

    #[test]
    fn how_a_run_ended_names_the_code_signal_timeout_or_scheduler() {
        let tail = "warming up\nerror: running the kernel: cuStreamSynchronize failed: \
                    CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)\n";
        let code = why_it_ended("repro exec", &outcome(ExitKind::Code(1), tail));
        assert!(
            code.starts_with("repro exec exited with code 1: error: running"),
            "{code}"
        );
        assert!(code.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{code}");
        let t = why_it_ended("w", &outcome(ExitKind::TimedOut, ""));
        assert!(t.starts_with("timed out after 2.5 s"), "{t}");
        let s = why_it_ended("w", &outcome(ExitKind::Signal(11), "a\nb\nc\nd"));
        assert_eq!(s, "w was killed by signal 11 (SIGSEGV): b | c | d");
        let slurm = why_it_ended("w", &outcome(ExitKind::Scheduler("TIMEOUT".into()), ""));
        assert_eq!(slurm, "the scheduler ended the job: TIMEOUT");
        let none = why_it_ended("w", &outcome(ExitKind::Code(2), ""));
        assert_eq!(none, "w exited with code 2: no output");
    }
}
