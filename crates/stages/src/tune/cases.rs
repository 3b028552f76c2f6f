//! The cases the elite's confirmations check, made in the tune's GPU worker while the GPU
//! would otherwise wait for nvcc. A worker draws each (shape, recipe, seed) case and
//! computes the reference's outputs on it the first time a run asks for it, then keeps them
//! (`repro_gpu::warm`): the trials ask for a few, the confirmations after the search for
//! every one the workload declares, and drawing those took most of the first member's
//! confirmation. So once the search sends its first trials to nvcc (none when the memo
//! holds every one), the base variant (built by the build stage) is checked untimed on each
//! case in turn, but only while no trial or confirmation wants the GPU ([`GpuUse`]); it stops
//! at the first run that does not pass, and when the search and its confirmations are over.
//! Its runs are not results: nothing is recorded but the log's line.

use super::gpu::every_case;
use repro_gpu::client::{ExecRequest, ExecTarget};
use repro_gpu::timing::{L2Mode, Method};
use repro_gpu::worker::pool::Workers;
use repro_pipeline::workload::Declaration;
use repro_schema::RunStatus;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What the search tells [`prepare`]: whether it has trials to measure, and whether a
/// trial or a confirmation wants the GPU now.
#[derive(Default)]
pub(super) struct GpuUse {
    wanted: AtomicUsize,
    trials: AtomicBool,
}

impl GpuUse {
    /// The search has trials to compile and measure (not all came from the memo).
    pub(super) fn trials_begin(&self) {
        self.trials.store(true, Ordering::SeqCst);
    }

    /// A claim on the GPU slots until the claim is dropped.
    pub(super) fn want(&self) -> Wanting<'_> {
        self.wanted.fetch_add(1, Ordering::SeqCst);
        Wanting(self)
    }

    /// Whether [`prepare`] may run a case now.
    fn free(&self) -> bool {
        self.trials.load(Ordering::SeqCst) && self.wanted.load(Ordering::SeqCst) == 0
    }
}

/// A trial's or a confirmation's claim on the GPU slots ([`GpuUse::want`]).
pub(super) struct Wanting<'a>(&'a GpuUse);

impl Drop for Wanting<'_> {
    fn drop(&mut self) {
        self.0.wanted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The base variant, checked on every case of its workload to prepare them.
pub(super) struct Preparer<'w, 'a> {
    pub workers: &'w Workers<'a>,
    pub base: String,
    pub workload: String,
    pub decl: Declaration,
    pub timeout: Duration,
}

/// How far [`prepare`] got.
pub(super) struct Prepared {
    pub cases: usize,
    pub of: usize,
    pub took: Duration,
    /// Why it stopped before the last case, when a run did not pass.
    pub stopped: Option<String>,
}

impl Prepared {
    /// The stage log's line.
    pub(super) fn line(&self, base: &str) -> String {
        let stopped = match &self.stopped {
            Some(why) => format!("; stopped: {why}"),
            None => String::new(),
        };
        format!(
            "tune: {} of {} cases prepared for the confirmations while the GPU waited for nvcc (`{base}` checked untimed on each) in {:.1} s{stopped}",
            self.cases,
            self.of,
            self.took.as_secs_f64()
        )
    }
}

/// Run `work` (the search and its confirmations) with [`prepare`] beside it when there is a
/// base variant, and log how far that got once `work` is over (when it had trials).
pub(super) fn alongside<R>(
    preparer: Option<&Preparer>,
    gpu: &GpuUse,
    log: &Path,
    work: impl FnOnce() -> R,
) -> R {
    let over = AtomicBool::new(false);
    std::thread::scope(|s| {
        let preparing = preparer.map(|p| s.spawn(|| (prepare(p, gpu, &over), &p.base)));
        let outcome = {
            let _over = Over(&over);
            work()
        };
        match preparing.map(|t| t.join()) {
            // A tune whose memo held every trial prepared nothing, and says nothing of it.
            Some(Ok((prepared, base))) if gpu.trials.load(Ordering::SeqCst) => {
                repro_base::fsio::append_line(log, &prepared.line(base))
            }
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            _ => {}
        }
        outcome
    })
}

/// Tells [`prepare`] to stop when dropped, a panic of the work beside it included.
struct Over<'a>(&'a AtomicBool);

impl Drop for Over<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Check `p.base` untimed on each case of its workload, on slot 0, whenever `gpu` is free,
/// until every case is done, one fails, or `over` is set.
pub(super) fn prepare(p: &Preparer, gpu: &GpuUse, over: &AtomicBool) -> Prepared {
    let began = Instant::now();
    let cases = every_case(&p.decl);
    let mut done = Prepared {
        cases: 0,
        of: cases.len(),
        took: Duration::ZERO,
        stopped: None,
    };
    for (shape, recipe, seed) in cases {
        while !gpu.free() && !over.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if over.load(Ordering::SeqCst) {
            break;
        }
        let dims = p.decl.shape_dims(shape).unwrap_or_default();
        let r = p
            .workers
            .run(0, &request(p, shape, recipe, seed), &dims, p.timeout);
        if r.status != RunStatus::Ok || r.correctness_pass != Some(true) {
            let why = r.error.unwrap_or_else(|| format!("status {}", r.status));
            done.stopped = Some(format!("{shape} ({recipe} inputs, seed {seed}): {why}"));
            break;
        }
        done.cases += 1;
    }
    done.took = began.elapsed();
    done
}

fn request(p: &Preparer, shape: &str, recipe: &str, seed: u64) -> ExecRequest {
    ExecRequest {
        target: ExecTarget::Variant(p.base.clone()),
        workload: Some(p.workload.clone()),
        shape: shape.to_string(),
        inputs: Some(recipe.to_string()),
        precision: None,
        seed,
        warmup: 0,
        iters: 1,
        l2: L2Mode::Warm,
        method: Method::Isolated,
        timing: false,
        profile: None,
        check: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_gpu::discover::StageJobs;

    /// `repro exec --worker` stand-in: notes each request line, answers it as passing,
    /// except on shape `fails`.
    const WORKER: &str = r#"#!/bin/sh
while read -r line; do
  echo "$line" >> "$(dirname "$0")/calls.txt"
  id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
  shape=$(printf '%s' "$line" | sed 's/.*"shape":"\([^"]*\)".*/\1/')
  pass=true
  [ "$shape" = "$FAILS" ] && pass=false
  printf '{"id":%s,"result":{"shape":"%s","seed":0,"warmup":0,"iters":1,"status":"ok","max_abs_err":0.5,"correctness_pass":%s}}\n' "$id" "$shape" "$pass"
done
"#;

    /// What the search says while [`prepare`] runs.
    enum Want {
        /// Trials began; nothing holds the GPU.
        Nothing,
        /// Trials began; one holds the GPU throughout.
        Held,
        /// Every trial came from the memo.
        NoTrials,
    }

    /// A project folder with the stand-in worker (failing on shape `fails`).
    struct Rig {
        dir: tempfile::TempDir,
        exe: std::path::PathBuf,
        executor: repro_executor::local::LocalExecutor,
        cancel: repro_executor::CancelFlag,
        decl: Declaration,
    }

    impl Rig {
        fn new(fails: &str) -> Rig {
            let dir = tempfile::tempdir().unwrap();
            let exe = dir.path().join("fake-repro");
            std::fs::write(&exe, WORKER.replace("$FAILS", fails)).unwrap();
            std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            let decl = repro_pipeline::workload::testing::tiny_pipeline("stages: {}\n", &["k"])
                .workloads["tiny"]
                .clone();
            Rig {
                dir,
                exe,
                executor: repro_executor::local::LocalExecutor::new(),
                cancel: Default::default(),
                decl,
            }
        }

        fn workers(&self) -> Workers<'_> {
            let jobs = StageJobs {
                executor: &self.executor,
                cancel: &self.cancel,
                repro_exe: &self.exe,
                pipeline_file: Path::new("pipeline.yaml"),
                root: self.dir.path(),
                log: None,
            };
            Workers::new(jobs, 1)
        }

        fn preparer<'w, 'a>(&self, workers: &'w Workers<'a>) -> Preparer<'w, 'a> {
            Preparer {
                workers,
                base: "base".into(),
                workload: "tiny".into(),
                decl: self.decl.clone(),
                timeout: Duration::from_secs(30),
            }
        }

        /// The request lines the worker saw.
        fn calls(&self) -> Vec<String> {
            let calls = std::fs::read_to_string(self.dir.path().join("calls.txt"));
            calls
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect()
        }
    }

    /// Run [`prepare`] with the stand-in worker (failing on shape `fails`), the search saying
    /// `wanted`; `over` is set after `after`. The result, the number of cases and the
    /// request lines the worker saw.
    fn run(fails: &str, wanted: Want, after: Duration) -> (Prepared, usize, Vec<String>) {
        let rig = Rig::new(fails);
        let workers = rig.workers();
        let p = rig.preparer(&workers);
        let (gpu, over) = (GpuUse::default(), AtomicBool::new(false));
        if !matches!(wanted, Want::NoTrials) {
            gpu.trials_begin();
        }
        let held = matches!(wanted, Want::Held).then(|| gpu.want());
        let prepared = std::thread::scope(|s| {
            let t = s.spawn(|| prepare(&p, &gpu, &over));
            let began = Instant::now();
            while !t.is_finished() && began.elapsed() < after {
                std::thread::sleep(Duration::from_millis(5));
            }
            over.store(true, Ordering::SeqCst);
            t.join().unwrap()
        });
        drop(held);
        workers.close(Duration::from_secs(5));
        (prepared, every_case(&rig.decl).len(), rig.calls())
    }

    #[test]
    fn beside_the_search_it_logs_how_far_it_got_and_a_panic_of_the_search_stops_it() {
        let rig = Rig::new("none");
        let log = rig.dir.path().join("tune.log");
        let workers = rig.workers();
        let p = rig.preparer(&workers);
        let gpu = GpuUse::default();
        assert_eq!(alongside(Some(&p), &gpu, &log, || 7), 7);
        assert!(!log.exists(), "no trials, no line");
        gpu.trials_begin();
        assert_eq!(alongside(Some(&p), &gpu, &log, || 7), 7);
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(logged.starts_with("tune: "), "{logged}");
        assert!(
            logged.contains("cases prepared for the confirmations"),
            "{logged}"
        );

        let began = Instant::now();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            alongside(Some(&p), &gpu, &log, || -> u32 {
                panic!("the search broke")
            })
        }));
        let panic = panicked.expect_err("the search's panic reaches the caller");
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"the search broke"));
        assert!(began.elapsed() < Duration::from_secs(10), "it stopped");
        workers.close(Duration::from_secs(5));
    }

    #[test]
    fn every_case_is_checked_untimed_with_the_base_variant_in_order() {
        let (prepared, cases, calls) = run("none", Want::Nothing, Duration::from_secs(10));
        assert!(cases > 1);
        assert_eq!((prepared.cases, prepared.of), (cases, cases));
        assert!(prepared.stopped.is_none());
        assert_eq!(calls.len(), cases);
        assert!(
            calls
                .iter()
                .all(|c| c.contains(r#""target":{"variant":"base"}"#)
                    && c.contains(r#""timing":false"#)
                    && c.contains(r#""workload":"tiny""#)),
            "{calls:?}"
        );
        assert!(prepared.line("base").starts_with(&format!(
            "tune: {cases} of {cases} cases prepared for the confirmations"
        )));
    }

    #[test]
    fn nothing_runs_while_a_trial_wants_the_gpu_and_it_stops_when_the_tune_is_over() {
        let (prepared, _, calls) = run("none", Want::Held, Duration::from_millis(300));
        assert_eq!(prepared.cases, 0);
        assert!(calls.is_empty(), "{calls:?}");
    }

    #[test]
    fn nothing_runs_when_the_memo_held_every_trial() {
        let (prepared, _, calls) = run("none", Want::NoTrials, Duration::from_millis(300));
        assert_eq!(prepared.cases, 0);
        assert!(calls.is_empty(), "no worker started: {calls:?}");
    }

    #[test]
    fn a_case_the_base_variant_fails_stops_it_and_says_where() {
        let decl = repro_pipeline::workload::testing::tiny_pipeline("stages: {}\n", &["k"])
            .workloads["tiny"]
            .clone();
        let (shape, _, _) = every_case(&decl)[1];
        let (prepared, _, calls) = run(shape, Want::Nothing, Duration::from_secs(10));
        let why = prepared
            .stopped
            .clone()
            .expect("stopped at the failing case");
        assert!(why.starts_with(&format!("{shape} (")), "{why}");
        assert_eq!(calls.len(), prepared.cases + 1);
        assert!(prepared.line("base").contains("; stopped: "));
    }
}
