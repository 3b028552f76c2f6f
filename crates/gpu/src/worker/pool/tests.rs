//! The pool against a stand-in worker (a shell script speaking the protocol): each run's
//! seed picks what the worker does, and its process id, reported as the device name, shows
//! which worker answered.

use super::*;
use crate::worker::tests::request;
use repro_executor::local::LocalExecutor;
use repro_executor::CancelFlag;
use repro_schema::RunStatus;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Seed 13: a fault that loses the context (answered, then exit 1). 5: a harmless error.
/// 99: hangs. 77: crashes (SIGSEGV). 66: a kernel's printf before the answer. Otherwise a
/// record.
const FAKE_WORKER: &str = r#"#!/bin/sh
while read -r line; do
  id=$(printf '%s' "$line" | sed 's/.*"id":\([0-9]*\).*/\1/')
  seed=$(printf '%s' "$line" | sed 's/.*"seed":\([0-9]*\).*/\1/')
  case "$seed" in
    13) printf '{"id":%s,"error":"running the kernel: cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS","context_lost":true}\n' "$id"; exit 1 ;;
    5) printf '{"id":%s,"error":"no shape `huge` under workload.shapes"}\n' "$id"; continue ;;
    99) sleep 30 ;;
    77) echo "error: boom" >&2; kill -SEGV $$ ;;
    66) printf 'hello from thread 0\n' ;;
  esac
  printf '{"id":%s,"result":{"shape":"small","B":1,"H":1,"S":32,"D":64,"seed":%s,"warmup":1,"iters":2,"status":"ok","device_index":0,"device_name":"worker-%s","timing_mode":null,"p50_us":4.0,"correctness_pass":true}}\n' "$id" "$seed" "$$"
done
"#;

fn small() -> Bindings {
    Bindings::from([
        ("B".into(), 1),
        ("H".into(), 1),
        ("S".into(), 32),
        ("D".into(), 64),
    ])
}

struct Fixture {
    dir: tempfile::TempDir,
    exe: PathBuf,
    log: PathBuf,
    executor: LocalExecutor,
    cancel: CancelFlag,
}

impl Fixture {
    fn new(script: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-repro");
        std::fs::write(&exe, script).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fixture {
            log: dir.path().join("bench.log"),
            dir,
            exe,
            executor: LocalExecutor::new(),
            cancel: CancelFlag::default(),
        }
    }

    fn jobs(&self) -> StageJobs<'_> {
        StageJobs {
            executor: &self.executor,
            cancel: &self.cancel,
            repro_exe: &self.exe,
            pipeline_file: Path::new("pipeline.yaml"),
            root: self.dir.path(),
            log: Some(&self.log),
        }
    }

    fn workers(&self) -> Workers<'_> {
        Workers::new(self.jobs(), 1)
    }
}

/// The records of `seeds`, run in turn on one slot.
fn batch(workers: &Workers, seeds: &[u64], timeout: Duration) -> Vec<BenchResult> {
    seeds
        .iter()
        .map(|&s| workers.run(0, &request(s), &small(), timeout))
        .collect()
}

fn worker_of(r: &BenchResult) -> &str {
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    r.device_name.as_deref().unwrap()
}

#[test]
fn one_worker_answers_a_whole_batch() {
    let f = Fixture::new(FAKE_WORKER);
    let got = batch(&f.workers(), &[0, 1, 66, 2], Duration::from_secs(20));
    assert_eq!(
        got.iter().map(|r| r.seed).collect::<Vec<_>>(),
        [0, 1, 66, 2]
    );
    assert!(got.iter().all(|r| worker_of(r) == worker_of(&got[0])));
    assert_eq!(
        got[0].node.as_deref(),
        Some(repro_executor::local::hostname().as_str())
    );
    let log = std::fs::read_to_string(&f.log).unwrap();
    assert!(log.contains("hello from thread 0"), "{log}");
}

#[test]
fn a_fault_mid_batch_fails_that_run_and_a_fresh_worker_takes_the_rest() {
    let f = Fixture::new(FAKE_WORKER);
    let got = batch(&f.workers(), &[0, 1, 13, 2, 3], Duration::from_secs(20));
    let fault = &got[2];
    assert_eq!(fault.status, RunStatus::Failed);
    let err = fault.error.as_deref().unwrap();
    assert!(
        err.starts_with("repro exec: running the kernel")
            && err.contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
        "{err}"
    );
    assert_eq!(
        (fault.seed, fault.shape.as_str(), fault.dims["S"]),
        (13, "small", 32)
    );
    assert_eq!(worker_of(&got[0]), worker_of(&got[1]));
    assert_eq!(worker_of(&got[3]), worker_of(&got[4]));
    assert_ne!(
        worker_of(&got[1]),
        worker_of(&got[3]),
        "a fresh worker after the fault"
    );
    let log = std::fs::read_to_string(&f.log).unwrap();
    assert!(
        log.contains("GPU slot 0 ended (Code(1)): its CUDA context was lost"),
        "{log}"
    );
}

#[test]
fn a_hang_is_killed_at_the_timeout_and_the_rest_still_run() {
    let f = Fixture::new(FAKE_WORKER);
    let began = Instant::now();
    let got = batch(&f.workers(), &[0, 99, 1], Duration::from_secs(1));
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
    let err = got[1].error.as_deref().unwrap();
    assert!(
        err.starts_with("timed out after 1.0 s and was killed"),
        "{err}"
    );
    assert_ne!(worker_of(&got[0]), worker_of(&got[2]));
}

#[test]
fn a_crash_names_the_signal_and_the_workers_last_words() {
    let f = Fixture::new(FAKE_WORKER);
    let got = batch(&f.workers(), &[77, 0], Duration::from_secs(20));
    let err = got[0].error.as_deref().unwrap();
    assert_eq!(
        err,
        "repro exec --worker was killed by signal 11 (SIGSEGV): error: boom"
    );
    assert_eq!(got[1].status, RunStatus::Ok);
}

#[test]
fn a_harmless_error_keeps_the_worker() {
    let f = Fixture::new(FAKE_WORKER);
    let got = batch(&f.workers(), &[0, 5, 1], Duration::from_secs(20));
    assert_eq!(
        got[1].error.as_deref(),
        Some("repro exec: no shape `huge` under workload.shapes")
    );
    assert_eq!(worker_of(&got[0]), worker_of(&got[2]));
}

#[test]
fn a_worker_that_exits_at_once_fails_each_run_with_its_message() {
    let f =
        Fixture::new("#!/bin/sh\necho 'error: no CUDA driver (libcuda.so.1) found' >&2\nexit 1\n");
    let got = batch(&f.workers(), &[0, 1], Duration::from_secs(20));
    for r in &got {
        let err = r.error.as_deref().unwrap();
        assert!(
            err.starts_with("repro exec --worker exited with code 1: error: no CUDA driver"),
            "{err}"
        );
    }
}

#[test]
fn a_worker_that_cannot_start_fails_the_run_not_the_stage() {
    let mut f = Fixture::new(FAKE_WORKER);
    f.exe = f.dir.path().join("missing");
    let got = batch(&f.workers(), &[0], Duration::from_secs(20));
    let err = got[0].error.as_deref().unwrap();
    assert!(
        err.starts_with("could not start repro exec --worker"),
        "{err}"
    );
}

#[test]
fn the_job_names_the_worker_its_gpu_and_the_pipeline() {
    let f = Fixture::new(FAKE_WORKER);
    let job = worker_job(&f.jobs(), 3, &[]);
    assert_eq!(
        job.argv[1..],
        ["-f", "pipeline.yaml", "exec", "--worker"].map(String::from)
    );
    assert_eq!(job.gpu, Some(3));
    let physical = repro_executor::local::visible_gpu(3);
    assert_eq!(job.env.get(GPU_INDEX_ENV), Some(&physical));
    assert_eq!(job.timeout, None, "each answer is timed instead");
}

/// A profiler's stand-in: runs the worker, then takes three seconds to write its report.
const FAKE_PROFILER: &str = r#"#!/bin/sh
report=$1; shift
"$@"
sleep 3
echo "profiled" > "$report"
"#;

#[test]
fn wrapped_workers_run_under_the_wrapper_and_close_waits_for_its_report() {
    let f = Fixture::new(FAKE_WORKER);
    let profiler = f.dir.path().join("fake-profiler");
    std::fs::write(&profiler, FAKE_PROFILER).unwrap();
    std::fs::set_permissions(&profiler, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = f.dir.path().join("report.txt");
    let wrapper = [&profiler, &report]
        .map(|p| p.display().to_string())
        .to_vec();
    let workers = Workers::wrapped(f.jobs(), 1, wrapper);
    let got = batch(&workers, &[0, 1], Duration::from_secs(20));
    assert!(got.iter().all(|r| r.status == RunStatus::Ok), "{got:?}");
    let ended = workers.close(Duration::from_secs(20));
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].as_ref().unwrap().exit, ExitKind::Code(0));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "profiled\n");
}
