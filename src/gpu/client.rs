//! For stages: run `repro exec` as an executor job and read its result back. A crash,
//! timeout or unreadable output becomes a `failed` [`BenchResult`] with the reason, never
//! an error, so one bad kernel does not stop a stage.

use super::timing::{L2Mode, Method};
use crate::executor::{ExitKind, Job, JobOutcome};
use crate::pipeline::{Precision, Recipe, Shape};
use crate::schema::BenchResult;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What to run: a variant of pipeline.yaml, or a cubin and its entry.
#[derive(Debug, Clone, PartialEq)]
pub enum ExecTarget {
    Variant(String),
    Cubin { path: PathBuf, entry: String },
}

/// One `repro exec` run: what the bench, tune and profile stages ask for, and what the
/// command line parses back ([`ExecRequest::argv`] and `commands::exec` are each other's
/// inverse; a test checks the round trip). A `shape` is a name of pipeline.yaml or `B,H,S,D`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecRequest {
    pub target: ExecTarget,
    /// A shape name of pipeline.yaml.
    pub shape: String,
    /// The input recipe (`repro exec --inputs`).
    pub inputs: Recipe,
    /// The precision class to judge by (`--precision`); `None`: the variant's own.
    pub precision: Option<Precision>,
    pub seed: u64,
    pub warmup: u32,
    pub iters: u32,
    pub l2: L2Mode,
    pub method: Method,
    /// `false`: check correctness only (`--no-timing`).
    pub timing: bool,
}

impl ExecRequest {
    /// The `repro exec` arguments (after `exec`) that ask for this run: the one place
    /// that spells them.
    pub fn argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        match &self.target {
            ExecTarget::Variant(v) => argv.extend(["--variant".into(), v.clone()]),
            ExecTarget::Cubin { path, entry } => argv.extend([
                "--cubin".into(),
                path.display().to_string(),
                "--entry".into(),
                entry.clone(),
            ]),
        }
        let shape_flag = if super::exec::parse_dims(&self.shape).is_ok() {
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
            "--inputs".into(),
            self.inputs.name().into(),
        ]);
        if let Some(p) = self.precision {
            argv.extend(["--precision".into(), p.name().into()]);
        }
        if !self.timing {
            argv.push("--no-timing".into());
        }
        argv
    }

    /// A short label, e.g. `stage2-baseline:mission:0` (`...:mission:sink:0` for a recipe
    /// other than gaussian).
    pub fn label(&self) -> String {
        let target = match &self.target {
            ExecTarget::Variant(v) => v.clone(),
            ExecTarget::Cubin { path, .. } => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        };
        match self.inputs {
            Recipe::Gaussian => format!("{target}:{}:{}", self.shape, self.seed),
            r => format!("{target}:{}:{r}:{}", self.shape, self.seed),
        }
    }
}

/// Environment variable telling `repro exec` which physical GPU index it was given (the
/// executor restricts the child to that GPU, which the child then sees as device 0).
pub const GPU_INDEX_ENV: &str = "REPRO_GPU_INDEX";

/// The `repro exec` job for `req`, on GPU `gpu` (the executor sets
/// `CUDA_VISIBLE_DEVICES`), killed after `timeout`.
pub fn exec_job(
    repro_exe: &Path,
    pipeline_file: &Path,
    root: &Path,
    req: &ExecRequest,
    gpu: Option<u32>,
    timeout: Duration,
) -> Job {
    let mut argv: Vec<String> = vec![
        repro_exe.display().to_string(),
        "-f".into(),
        pipeline_file.display().to_string(),
        "exec".into(),
    ];
    argv.extend(req.argv());
    let mut job = Job::new(format!("exec:{}", req.label()), argv, root);
    job.timeout = Some(timeout);
    job.capture_stdout = true;
    job.gpu = gpu;
    if let Some(g) = gpu {
        job.env = BTreeMap::from([(GPU_INDEX_ENV.to_string(), g.to_string())]);
    }
    job
}

/// A record with the identity fields filled and every measurement empty.
pub fn blank_result(
    shape_name: &str,
    shape: &Shape,
    seed: u64,
    warmup: u32,
    iters: u32,
    status: &str,
) -> BenchResult {
    BenchResult {
        shape: shape_name.to_string(),
        B: shape.B,
        H: shape.H,
        S: shape.S,
        D: shape.D,
        seed,
        inputs: crate::pipeline::Recipe::Gaussian.name().to_string(),
        warmup,
        iters,
        status: status.to_string(),
        error: None,
        device_index: None,
        device_name: None,
        node: None,
        timing_mode: None,
        p50_us: None,
        p90_us: None,
        p99_us: None,
        mean_us: None,
        std_us: None,
        min_us: None,
        ci95_us: None,
        cv: None,
        samples: None,
        max_abs_err: None,
        mean_abs_err: None,
        pct_bad: None,
        rel_l2_err: None,
        max_err_over_ref_std: None,
        nan_count: None,
        inf_count: None,
        correctness_pass: None,
        speedups: BTreeMap::new(),
    }
}

/// The result of a finished `repro exec` job: its JSON line, or a `failed` record saying
/// why there is none (fault, timeout, signal, garbage on stdout). Either way it names the
/// node the executor ran the job on.
pub fn result_from_outcome(req: &ExecRequest, shape: &Shape, outcome: &JobOutcome) -> BenchResult {
    let mut result = parse_outcome(req, shape, outcome);
    result.node = outcome.node.clone();
    result
}

fn parse_outcome(req: &ExecRequest, shape: &Shape, outcome: &JobOutcome) -> BenchResult {
    let failed = |reason: String| {
        let mut r = blank_result(&req.shape, shape, req.seed, req.warmup, req.iters, "failed");
        r.inputs = req.inputs.name().to_string();
        r.error = Some(reason);
        r
    };
    match &outcome.exit {
        ExitKind::Code(0) => match outcome.last_stdout_line() {
            None => failed("repro exec printed no result line".into()),
            Some(line) => match serde_json::from_str::<BenchResult>(&line) {
                Ok(r) => r,
                Err(e) => failed(format!(
                    "repro exec printed a line that is not a bench result ({e}): {}",
                    truncate(&line, 200)
                )),
            },
        },
        ExitKind::Code(code) => failed(format!(
            "repro exec exited with code {code}: {}",
            error_lines(&outcome.tail)
        )),
        ExitKind::Signal(sig) => failed(format!(
            "repro exec was killed by signal {sig} ({}): {}",
            signal_name(*sig),
            error_lines(&outcome.tail)
        )),
        ExitKind::TimedOut => failed(format!(
            "timed out after {:.1} s and was killed (a hang or deadlock in the kernel?)",
            outcome.elapsed.as_secs_f64()
        )),
        ExitKind::Cancelled => failed("cancelled (the run was interrupted)".into()),
        ExitKind::Scheduler(reason) => failed(format!("the scheduler ended the job: {reason}")),
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

    const MISSION: Shape = Shape {
        B: 2,
        H: 8,
        S: 512,
        D: 64,
    };

    fn req() -> ExecRequest {
        ExecRequest {
            target: ExecTarget::Variant("stage5-ws-p1".into()),
            shape: "mission".into(),
            inputs: crate::pipeline::Recipe::Gaussian,
            precision: None,
            seed: 2,
            warmup: 20,
            iters: 100,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            timing: true,
        }
    }

    fn outcome(exit: ExitKind, stdout: &str, tail: &str) -> JobOutcome {
        JobOutcome {
            exit,
            stdout: stdout.as_bytes().to_vec(),
            tail: tail.into(),
            node: None,
            elapsed: Duration::from_millis(2500),
        }
    }

    #[test]
    fn job_carries_every_option() {
        let mut r = req();
        r.timing = false;
        r.l2 = L2Mode::Flush;
        r.method = Method::Graph;
        r.inputs = Recipe::Sink;
        r.precision = Some(Precision::Fp8Pv);
        let job = exec_job(
            Path::new("/bin/repro"),
            Path::new("/p/pipeline.yaml"),
            Path::new("/p"),
            &r,
            Some(3),
            Duration::from_secs(60),
        );
        assert_eq!(
            job.argv.join(" "),
            "/bin/repro -f /p/pipeline.yaml exec --variant stage5-ws-p1 --shape mission --seed 2 \
             --warmup 20 --iters 100 --l2 flush --method graph --inputs sink --precision fp8-pv \
             --no-timing"
        );
        assert_eq!(job.gpu, Some(3));
        assert_eq!(job.env.get(GPU_INDEX_ENV).map(String::as_str), Some("3"));
        assert_eq!(job.timeout, Some(Duration::from_secs(60)));
        assert!(job.capture_stdout);
        assert_eq!(job.name, "exec:stage5-ws-p1:mission:sink:2");
    }

    #[test]
    fn cubin_target_names_the_entry() {
        let mut r = req();
        r.target = ExecTarget::Cubin {
            path: "/c/fault.cubin".into(),
            entry: "sdpa_fp8_fwd".into(),
        };
        let job = exec_job(
            Path::new("repro"),
            Path::new("pipeline.yaml"),
            Path::new("."),
            &r,
            None,
            Duration::from_secs(1),
        );
        assert!(job
            .argv
            .join(" ")
            .contains("--cubin /c/fault.cubin --entry sdpa_fp8_fwd"));
        assert!(job.env.is_empty());
        assert_eq!(r.label(), "fault:mission:2");
    }

    #[test]
    fn a_result_line_round_trips() {
        let mut good = blank_result("mission", &MISSION, 2, 20, 100, "ok");
        good.p50_us = Some(12.5);
        good.correctness_pass = Some(true);
        let line = serde_json::to_string(&good).unwrap();
        let got = result_from_outcome(
            &req(),
            &MISSION,
            &outcome(ExitKind::Code(0), &format!("{line}\n"), ""),
        );
        assert_eq!(got, good);
    }

    #[test]
    fn results_name_the_node_that_ran_them_even_when_failed() {
        let line =
            serde_json::to_string(&blank_result("mission", &MISSION, 2, 20, 100, "ok")).unwrap();
        let mut ran = outcome(ExitKind::Code(0), &line, "");
        ran.node = Some("gpu-node-07".into());
        let got = result_from_outcome(&req(), &MISSION, &ran);
        assert_eq!(got.node.as_deref(), Some("gpu-node-07"));
        assert!(serde_json::to_string(&got)
            .unwrap()
            .contains(r#""node":"gpu-node-07""#));
        let mut killed = outcome(ExitKind::Scheduler("TIMEOUT".into()), "", "");
        killed.node = Some("gpu-node-08".into());
        let got = result_from_outcome(&req(), &MISSION, &killed);
        assert_eq!(got.status, "failed");
        assert_eq!(got.node.as_deref(), Some("gpu-node-08"));
    }

    #[test]
    fn records_without_a_node_stay_as_they_were() {
        let old = blank_result("mission", &MISSION, 2, 20, 100, "ok");
        let line = serde_json::to_string(&old).unwrap();
        assert!(!line.contains("node"), "{line}");
        assert_eq!(serde_json::from_str::<BenchResult>(&line).unwrap(), old);
    }

    #[test]
    fn a_fault_is_a_failed_record_with_the_driver_message() {
        let tail = "warming up\nerror: running the kernel: cuStreamSynchronize failed: \
                    CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)\n";
        let got = result_from_outcome(&req(), &MISSION, &outcome(ExitKind::Code(1), "", tail));
        assert_eq!(got.status, "failed");
        assert_eq!((got.B, got.S, got.seed), (2, 512, 2));
        let err = got.error.unwrap();
        assert!(err.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{err}");
        assert!(err.starts_with("repro exec exited with code 1"), "{err}");
        assert_eq!(got.p50_us, None);
    }

    #[test]
    fn timeout_signal_and_garbage_are_failures() {
        let t = result_from_outcome(&req(), &MISSION, &outcome(ExitKind::TimedOut, "", ""));
        assert!(t.error.unwrap().contains("timed out after 2.5 s"));
        let s = result_from_outcome(&req(), &MISSION, &outcome(ExitKind::Signal(11), "", "x"));
        assert!(s.error.unwrap().contains("SIGSEGV"));
        let g = result_from_outcome(&req(), &MISSION, &outcome(ExitKind::Code(0), "hello\n", ""));
        assert!(g.error.unwrap().contains("not a bench result"));
        let e = result_from_outcome(&req(), &MISSION, &outcome(ExitKind::Code(0), "\n", ""));
        assert_eq!(
            e.error.as_deref(),
            Some("repro exec printed no result line")
        );
    }
}
