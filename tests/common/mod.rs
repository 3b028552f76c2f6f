//! Test support: a minimal local executor (child process, timeout, captured output), the
//! `repro` binary to run, and cubins compiled from the CUDA fixtures with nvcc.
#![allow(dead_code)]

use repro::executor::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
#[path = "../support/skip.rs"]
pub mod skip;
#[allow(unused_imports)]
pub use skip::{say_skipped, skipped, Need};

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs each job as a child process; kills it at its timeout.
pub struct TestExecutor;

impl Executor for TestExecutor {
    fn name(&self) -> &str {
        "test"
    }

    fn run(&self, job: &Job, _cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        let start = Instant::now();
        let mut cmd = Command::new(&job.argv[0]);
        cmd.args(&job.argv[1..])
            .current_dir(&job.cwd)
            .envs(&job.env)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(g) = job.gpu {
            cmd.env(
                "CUDA_VISIBLE_DEVICES",
                repro::executor::local::visible_gpu(g),
            );
        }
        let mut child = cmd.spawn()?;
        let mut out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let out_reader = std::thread::spawn(move || {
            let mut b = Vec::new();
            out.read_to_end(&mut b).ok();
            b
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            err.read_to_string(&mut s).ok();
            s
        });
        let exit = loop {
            if let Some(status) = child.try_wait()? {
                break match (status.code(), status.signal()) {
                    (Some(c), _) => ExitKind::Code(c),
                    (None, Some(s)) => ExitKind::Signal(s),
                    _ => ExitKind::Code(-1),
                };
            }
            if job.timeout.is_some_and(|t| start.elapsed() > t) {
                child.kill()?;
                child.wait()?;
                break ExitKind::TimedOut;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = out_reader.join().unwrap();
        let tail = err_reader.join().unwrap();
        Ok(JobOutcome {
            exit,
            stdout,
            tail,
            node: None,
            elapsed: start.elapsed(),
        })
    }

    fn gpu_slots(&self) -> u32 {
        1
    }
}

/// The `repro` binary: `$REPRO_BIN` (for test binaries carried to another machine) or
/// the one cargo built.
pub fn repro_bin() -> PathBuf {
    std::env::var_os("REPRO_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_repro")))
}

/// Where the sources live: `$REPRO_SOURCE_ROOT` or the crate's folder.
pub fn source_root() -> PathBuf {
    std::env::var_os("REPRO_SOURCE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// A project at `root` for a GPU test: `files` copied from the sources (their folders
/// made), and `pipeline` written as pipeline.yaml with `arch:` set to what this GPU runs (the
/// build compiles only what the pipeline declares); returns that architecture.
pub fn gpu_project(root: &Path, files: &[&str], pipeline: &str) -> String {
    for f in files {
        std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
        std::fs::copy(source_root().join(f), root.join(f)).unwrap();
    }
    let arch = repro::stages::build::arch::target_for(&repro::gpu::probe().expect("a GPU")[0]);
    let pipeline = pipeline.replacen("version: 1\n", &format!("version: 1\narch: [{arch}]\n"), 1);
    std::fs::write(root.join("pipeline.yaml"), pipeline).unwrap();
    arch
}

/// `repro ARGS` in `root`: its exit status and its stdout then stderr.
pub fn run_repro(root: &Path, args: &[&str]) -> (std::process::ExitStatus, String) {
    let out = Command::new(repro_bin())
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, text)
}

/// The defines of pipeline.yaml's stage2-baseline and stage5-ws-p1 variants, for
/// compiling them in GPU tests.
pub const STAGE2_BASELINE: [&str; 3] = [
    "USE_CP_ASYNC=1",
    "USE_WMMA_PV=1",
    "USE_WARP_SPECIALIZATION=0",
];
pub const STAGE5_WS_P1: [&str; 4] = [
    "USE_CP_ASYNC=1",
    "USE_WMMA_PV=1",
    "USE_WARP_SPECIALIZATION=1",
    "NUM_PRODUCER_WARPS=1",
];
/// The mission shape, `B,H,S,D`.
pub const MISSION: &str = "2,8,512,64";

/// Tests of the no-driver message: false, after saying the test is skipped, on a machine
/// that has a CUDA driver.
pub fn no_driver_here() -> bool {
    if repro::gpu::driver_library_loads().is_ok() {
        say_skipped("this machine has a CUDA driver, so the no-driver message cannot be shown");
        return false;
    }
    true
}

/// GPU tests run only with `REPRO_GPU_TESTS=1`; otherwise say so and skip.
pub fn gpu_tests_enabled(test: &str) -> bool {
    if std::env::var("REPRO_GPU_TESTS").as_deref() == Ok("1") {
        return true;
    }
    skipped(
        Need::Gpu,
        &format!("{test} needs a GPU; set REPRO_GPU_TESTS=1 to run it"),
    );
    false
}

/// Run `cmd`, require success, and parse its stdout as JSON.
pub fn stdout_json<T: serde::de::DeserializeOwned>(cmd: &mut Command) -> T {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Compile `source` (relative to the source root) to `out` for `arch` with nvcc.
pub fn compile(source: &str, defines: &[&str], arch: &str, out: &Path) {
    let tc = repro::toolchain::find(&source_root(), None)
        .unwrap_or_else(|e| panic!("GPU tests need nvcc: {e}"));
    let mut cmd = Command::new(tc.nvcc);
    cmd.args(["-cubin", "-O3", &format!("-arch={arch}"), "-o"])
        .arg(out)
        .arg(source_root().join(source));
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    let status = cmd.status().expect("nvcc runs");
    assert!(status.success(), "nvcc failed on {source}");
}

/// Write `yaml` as `root/pipeline.yaml` and run its `bench` stage with [`TestExecutor`];
/// returns the outcome and the staging folder its files were written to.
pub fn run_bench_stage(yaml: &str, root: &Path) -> (repro::engine::StageOutcome, PathBuf) {
    use repro::engine::{RunCtx, StageKind};
    let file = root.join("pipeline.yaml");
    std::fs::write(&file, yaml).unwrap();
    let pipeline: repro::pipeline::Pipeline = serde_yaml::from_str(yaml).unwrap();
    let staging = root.join(".repro/staging");
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let exe = repro_bin();
    let overrides = repro::engine::Overrides::default();
    let progress = |line: &str| eprintln!("bench: {line}");
    let spec = &pipeline.stages["bench"];
    let config = repro::stages::bench::BenchStage
        .configure("bench", spec, &pipeline)
        .unwrap();
    let peers = repro::pipeline::kind::Configs::new(vec![("bench".into(), config.clone())]);
    let ctx = RunCtx {
        name: "bench",
        spec,
        config: &config,
        peers: &peers,
        pipeline: &pipeline,
        root,
        staging: &staging,
        log: &root.join("bench.log"),
        executor: &TestExecutor,
        cancel: &cancel,
        repro_exe: &exe,
        pipeline_file: &root.join("pipeline.yaml"),
        overrides: &overrides,
        progress: &progress,
    };
    let outcome = repro::stages::bench::BenchStage.run(&ctx).unwrap();
    (outcome, staging)
}
