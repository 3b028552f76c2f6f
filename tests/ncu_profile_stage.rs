//! The profile stage end to end without a GPU: no ncu at all, and a stand-in `ncu` script
//! that prints what the real one prints (the permission error; a real captured CSV; a crash).
//! Every scenario changes the process environment (`PATH`, `NCU`), so they run in one test.

#[path = "support/lock.rs"]
mod lock;
#[path = "support/skip.rs"]
mod skip;

use repro::engine::{Configs, Overrides, RunCtx, StageKind, StageOutcome};
use repro::executor::{CancelFlag, Executor, ExitKind, Job, JobOutcome};
use repro::pipeline::Pipeline;
use repro::schema::{NcuSummary, RunStatus};
use repro::stages::profile::Profile;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Runs jobs as plain child processes (no timeout handling: the scripts here end at once).
/// `elsewhere`: say the jobs run on another machine, so the stage asks a probe job for the
/// GPUs (a stand-in `repro` answers it).
struct ChildProcesses {
    elsewhere: bool,
}

impl Executor for ChildProcesses {
    fn name(&self) -> &str {
        "test-children"
    }
    fn run(&self, job: &Job, _cancel: &CancelFlag) -> anyhow::Result<JobOutcome> {
        let start = Instant::now();
        let out = Command::new(&job.argv[0])
            .args(&job.argv[1..])
            .current_dir(&job.cwd)
            .envs(&job.env)
            .stdin(Stdio::null())
            .output()?;
        if let Some(log) = &job.log {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)?;
            f.write_all(&out.stdout)?;
            f.write_all(&out.stderr)?;
        }
        let all = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = all.lines().collect();
        Ok(JobOutcome {
            exit: out
                .status
                .code()
                .map_or(ExitKind::Signal(9), ExitKind::Code),
            stdout: if job.capture_stdout {
                out.stdout
            } else {
                Vec::new()
            },
            tail: lines[lines.len().saturating_sub(20)..].join("\n"),
            node: None,
            elapsed: start.elapsed(),
        })
    }
    fn gpu_slots(&self) -> u32 {
        1
    }
    fn runs_jobs_here(&self) -> bool {
        !self.elsewhere
    }
}

/// Stands in for `repro exec --query-devices`: one H100.
const FAKE_REPRO: &str = r#"#!/bin/sh
echo '[{"index":0,"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-0","compute_capability":[9,0],"sm_count":132,"memory_bytes":85000000000,"cuda_driver_version":"13.0","driver_version":"580.159.04"}]'
"#;

const PIPELINE: &str = "version: 1
workload:
  op: sdpa_fp8
  shapes: {mission: {B: 2, H: 8, S: 512, D: 64}}
  primary: mission
kernels:
  k: {source: kernels/k.cu, entry: scale_add}
variants:
  good: {kernel: k}
  bad: {kernel: k}
control: good
gates:
  profile:
    few-registers: {metric: registers_per_thread, max: 8}
stages:
  ncu-profile: {uses: profile, targets: [control, bad, topk], clock_control: none}
";

struct Project {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
}

impl Project {
    fn new() -> Self {
        Project::of(PIPELINE)
    }

    fn of(yaml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pipeline.yaml"), yaml).unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        Project {
            pipeline: serde_yaml::from_str(yaml).unwrap(),
            dir,
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Run the stage into a fresh staging folder; returns the outcome and that folder.
    fn run(&self) -> (StageOutcome, PathBuf) {
        self.run_with(
            &ChildProcesses { elsewhere: false },
            Path::new("/nonexistent/repro"),
        )
    }

    /// [`Project::run`] through `executor`, with `repro` at `repro_exe`.
    fn run_with(&self, executor: &dyn Executor, repro_exe: &Path) -> (StageOutcome, PathBuf) {
        let staging = self
            .root()
            .join(format!(".repro/staging-{}", rand_suffix()));
        std::fs::create_dir_all(&staging).unwrap();
        let cancel = CancelFlag::default();
        let overrides = Overrides::default();
        let log = self.root().join(".repro/logs/ncu-profile.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let spec = &self.pipeline.stages["ncu-profile"];
        let config = Profile
            .configure("ncu-profile", spec, &self.pipeline)
            .unwrap();
        let peers = Configs::new(vec![("ncu-profile".into(), config.clone())]);
        let ctx = RunCtx {
            name: "ncu-profile",
            spec,
            config: &config,
            peers: &peers,
            pipeline: &self.pipeline,
            root: self.root(),
            staging: &staging,
            log: &log,
            executor,
            cancel: &cancel,
            repro_exe,
            pipeline_file: &self.root().join("pipeline.yaml"),
            overrides: &overrides,
            progress: &|_| {},
        };
        (Profile.run(&ctx).unwrap(), staging)
    }

    /// Install an executable `ncu` script in the project's bin/.
    fn fake_ncu(&self, body: &str) -> PathBuf {
        self.script("bin/ncu", &format!("#!/bin/sh\n{body}\n"))
    }

    /// Write an executable script at `rel`.
    fn script(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.root().join(rel);
        std::fs::write(&path, text).unwrap();
        let mut perm = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&path, perm).unwrap();
        path
    }

    /// Move the staged outputs in and lock their digests, as the engine does.
    fn commit(&self, staging: &Path) {
        let out = self.root().join("artifacts/ncu");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let mut outputs = Vec::new();
        for e in std::fs::read_dir(staging.join("artifacts/ncu")).unwrap() {
            let e = e.unwrap();
            let rel = format!("artifacts/ncu/{}", e.file_name().to_string_lossy());
            std::fs::copy(e.path(), self.root().join(&rel)).unwrap();
            outputs.push(rel);
        }
        lock::lock_outputs(self.root(), "ncu-profile", &outputs);
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn summary(staging: &Path) -> NcuSummary {
    let text = std::fs::read_to_string(staging.join("artifacts/ncu/summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name)
}

/// A stand-in `ncu` for kernel targets, as the stage runs it: a wrapper around
/// `repro exec --worker` (which it plays too). Each request line is appended to `requests`
/// and answered; on stdin's end (or at a `bad` variant's request, when `crash`), it writes
/// `stage_mode_launches.csv` to its `--log-file` with that capture's five launches once for
/// each answered request (IDs renumbered), as ncu writes the windows' launches in order.
fn kernel_ncu(calls: &Path, requests: &Path, crash: bool) -> String {
    let crash = if crash {
        "*'\"variant\":\"bad\"'*) emit; echo 'error: running the kernel: CUDA_ERROR_LAUNCH_FAILED' >&2; exit 9;;"
    } else {
        ""
    };
    format!(
        "case \"$*\" in *--version*) echo 'Version 2025.3.1.0'; exit 0;; esac\n\
         echo \"$*\" >> '{calls}'\n\
         log=$(printf '%s\\n' \"$@\" | sed -n '/^--log-file$/{{n;p;}}')\n\
         n=0\n\
         emit() {{ awk -v n=$n '/^\"[0-9]/ {{ rows[++r] = $0; next }} {{ print }} END {{ for (k = 0; k < n; k++) for (i = 1; i <= r; i++) {{ l = rows[i]; sub(/^\"[0-9]+\"/, \"\\\"\" (k * r + i - 1) \"\\\"\", l); print l }} }}' '{fixture}' > \"$log\"; }}\n\
         while read -r line; do\n\
           echo \"$(basename \"$log\") $line\" >> '{requests}'\n\
           id=$(printf '%s' \"$line\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/')\n\
           case \"$line\" in {crash} esac\n\
           n=$((n + 1))\n\
           printf '{{\"id\":%s,\"result\":{{\"shape\":\"mission\",\"dims\":{{}},\"seed\":0,\"warmup\":5,\"iters\":1,\"status\":\"ok\",\"correctness_pass\":true}}}}\\n' \"$id\"\n\
         done\n\
         emit",
        calls = calls.display(),
        requests = requests.display(),
        fixture = fixture("stage_mode_launches.csv").display(),
    )
}

#[test]
fn profile_stage_skips_and_fails_honestly() {
    let project = Project::new();
    let empty_path = project.root().join("no-tools");
    std::fs::create_dir_all(&empty_path).unwrap();
    std::env::remove_var("NCU");
    std::env::set_var("PATH", &empty_path);

    // 1. No ncu anywhere: skipped with the install hint, summary says so per target.
    if repro::ncu::find_ncu().is_some() {
        skip::say_skipped("this machine has ncu in a fixed location, so 'no ncu' cannot be staged");
    } else {
        let (outcome, staging) = project.run();
        match outcome {
            StageOutcome::Skipped { reason, fix } => {
                assert!(
                    reason.contains("ncu") && reason.contains("not found"),
                    "{reason}"
                );
                assert!(
                    fix.contains("install Nsight Compute") && fix.contains("NCU="),
                    "{fix}"
                );
            }
            other => panic!("expected skipped, got {other:?}"),
        }
        let s = summary(&staging);
        assert_eq!(s.clock_control, "none");
        assert_eq!(s.cache_control, "all");
        let statuses: Vec<_> = s
            .targets
            .iter()
            .map(|t| (t.target.as_str(), &t.status))
            .collect();
        let skipped = &RunStatus::Skipped;
        assert_eq!(
            statuses,
            [("control", skipped), ("bad", skipped), ("topk", skipped)]
        );
        // The stage names no tune stage in `needs`: no elite to profile, and the fix.
        assert!(s.targets[2]
            .reason
            .as_ref()
            .unwrap()
            .contains("add one to its `needs`"));
    }

    // The stand-in scripts need the usual tools.
    std::env::set_var("PATH", "/usr/bin:/bin");

    // 2. ncu refused the counters: the whole stage is skipped with NVIDIA's fix, no CSV kept.
    let ncu = project.fake_ncu(
        "case \"$1\" in --version) echo 'Version 2025.3.1.0 (build 36398880) (public-release)'; exit 0;; esac\n\
         log=$(printf '%s\\n' \"$@\" | sed -n '/^--log-file$/{n;p;}')\n\
         { echo '==PROF== Connected to process 9012 (/nonexistent/repro)'\n\
         echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0. For instructions on enabling permissions and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM'\n\
         echo '==PROF== Disconnected from process 9012'; } > \"${log:-/dev/stdout}\"\nexit 0",
    );
    std::env::set_var("NCU", &ncu);
    let (outcome, staging) = project.run();
    match outcome {
        StageOutcome::Skipped { reason, fix } => {
            assert!(
                reason.contains("ERR_NVGPUCTRPERM - The user does not have permission"),
                "{reason}"
            );
            assert!(
                fix.contains("NVreg_RestrictProfilingToAdminUsers=0"),
                "{fix}"
            );
            assert!(
                fix.contains("root")
                    && fix.contains("https://developer.nvidia.com/ERR_NVGPUCTRPERM")
            );
        }
        other => panic!("expected skipped, got {other:?}"),
    }
    assert!(!staging.join("artifacts/ncu/control.csv").exists());
    let s = summary(&staging);
    assert_eq!(
        s.ncu_version.as_deref(),
        Some("Version 2025.3.1.0 (build 36398880) (public-release)")
    );
    assert!(s.targets.iter().all(|t| t.status == RunStatus::Skipped));

    // 3. One target's program crashes: that target fails with its lines, the one before it
    //    is read from real captured output, and the stage reports the failure.
    let calls_file = project.root().join("ncu-calls.txt");
    let requests = project.root().join("ncu-requests.txt");
    project.fake_ncu(&kernel_ncu(&calls_file, &requests, true));
    let (outcome, staging) = project.run();
    assert_eq!(
        outcome,
        StageOutcome::GateFailed("ncu failed for bad".into())
    );
    let s = summary(&staging);
    let control = &s.targets[0];
    assert_eq!(
        (control.target.as_str(), &control.status),
        ("control", &RunStatus::Ok),
        "{:?}",
        control.reason
    );
    assert_eq!(control.variant, "good");
    assert_eq!(control.kernel, "scale_add");
    // The median of the five profiled launches, with their spread.
    assert_eq!(control.kernel_time_us, Some(16.576));
    assert_eq!(
        (
            control.kernel_time_us_min,
            control.kernel_time_us_max,
            control.launches
        ),
        (Some(16.48), Some(19.104), Some(5))
    );
    assert_eq!(control.registers_per_thread, Some(16.0));
    assert_eq!(
        control.metric_names["kernel_time_us"],
        "gpu__time_duration.sum"
    );
    let bad = &s.targets[1];
    assert_eq!(bad.status, RunStatus::Failed);
    let why = bad.reason.as_ref().unwrap();
    assert!(
        why.contains("exited with code 9") && why.contains("CUDA_ERROR_LAUNCH_FAILED"),
        "{why}"
    );
    assert_eq!(s.targets[2].status, RunStatus::Skipped);
    // The CSVs are ncu's output byte for byte.
    let saved = std::fs::read(staging.join("artifacts/ncu/control.csv")).unwrap();
    assert_eq!(
        saved,
        std::fs::read(fixture("stage_mode_launches.csv")).unwrap()
    );
    assert!(staging.join("artifacts/ncu/bad.csv").exists());

    // 4. A target whose cubin, GPU, driver, ncu and options are unchanged keeps its committed
    //    profile: only the rebuilt one is profiled again. Both run in one ncu process per
    //    pass: the kernel time's (`gpu__time_duration` alone), then the full profile's.
    project.fake_ncu(&kernel_ncu(&calls_file, &requests, false));
    let repro = project.script("fake-repro", FAKE_REPRO);
    std::fs::create_dir_all(project.root().join(".repro/cubins")).unwrap();
    for cubin in ["good", "bad", "reference"] {
        let path = project
            .root()
            .join(format!(".repro/cubins/{cubin}.sm_90a.cubin"));
        std::fs::write(path, cubin).unwrap();
    }
    let elsewhere = ChildProcesses { elsewhere: true };
    // ncu processes started, and the targets (requests) they ran.
    let profiled = |run: &dyn Fn() -> PathBuf| -> (usize, String, PathBuf) {
        let _ = std::fs::remove_file(&calls_file);
        let _ = std::fs::remove_file(&requests);
        let staging = run();
        let n = std::fs::read_to_string(&calls_file).map_or(0, |c| c.lines().count());
        (
            n,
            std::fs::read_to_string(&requests).unwrap_or_default(),
            staging,
        )
    };
    let run = || {
        let (outcome, staging) = project.run_with(&elsewhere, &repro);
        assert_eq!(outcome, StageOutcome::Passed);
        project.commit(&staging);
        staging
    };
    // `bad` is the fastest variant on mission by the bench: it gets the full metric list,
    // the control the one-pass list.
    let bench = project.root().join("artifacts/bench");
    std::fs::create_dir_all(&bench).unwrap();
    for (variant, p50) in [("good", 20.0), ("bad", 10.0)] {
        let mut result = repro::schema::BenchResult::blank(
            "mission",
            Default::default(),
            0,
            (1, 1),
            RunStatus::Ok,
        );
        result.p50_us = Some(p50);
        result.correctness_pass = Some(true);
        let file = serde_json::json!({
            "name": variant, "kind": "variant", "status": "ok", "defines": {},
            "results": [result], "gates": []
        });
        std::fs::write(bench.join(format!("{variant}.json")), file.to_string()).unwrap();
    }
    let (n, ran, staging) = profiled(&run);
    assert_eq!(
        n, 3,
        "one process per pass: both timed, both in one pass of counters, then bad's full \
         profile"
    );
    assert_eq!(ran.lines().count(), 5, "{ran}");
    assert!(staging.join("artifacts/ncu/bad.full.csv").exists());
    assert!(!staging.join("artifacts/ncu/control.full.csv").exists());
    let argv = std::fs::read_to_string(&calls_file).unwrap();
    // Every pass's process starts with the stage: by its CSV, one per pass.
    let mut passes: Vec<&str> = argv.lines().collect();
    passes.sort_by_key(|a| a.split("--log-file ").nth(1).unwrap_or(""));
    let turns: Vec<&str> = ran.lines().filter_map(|l| l.split(' ').next()).collect();
    let mut first_turns = turns.clone();
    first_turns.dedup();
    assert_eq!(
        first_turns,
        ["kernels-0-0.csv", "kernels-1-0.csv", "kernels-2-0.csv"],
        "each pass's requests after the pass before ended:\n{ran}"
    );
    assert!(
        passes
            .iter()
            .all(|a| a.contains("--profile-from-start off") && a.ends_with("exec --worker")),
        "a worker under ncu, which profiles only the windows:\n{argv}"
    );
    let one_pass = "--metrics gpu__time_duration.sum,sm__pipe_tensor";
    assert!(
        passes[0].contains("--metrics gpu__time_duration.sum --log-file")
            && passes[1].contains(one_pass)
            && passes[1].contains("launch__registers_per_thread")
            && !passes[1].contains("sm__throughput")
            && passes[2].contains("sm__throughput"),
        "the kernel time's pass first, then one pass of counters, then the full profile:\n{argv}"
    );
    let sets: Vec<_> = summary(&staging).targets[..2]
        .iter()
        .map(|t| t.metric_set)
        .collect();
    assert_eq!(
        sets,
        [
            Some(repro::schema::MetricSet::OnePass),
            Some(repro::schema::MetricSet::Full)
        ]
    );
    assert_eq!(
        std::fs::read(staging.join("artifacts/ncu/control.time.csv")).unwrap(),
        std::fs::read(fixture("stage_mode_launches.csv")).unwrap(),
        "the time pass's CSV beside the full profile's"
    );
    assert!(
        ran.contains("\"warmup\":5")
            && ran.contains("\"profile\":5")
            && ran.contains("\"timing\":false"),
        "after the check and 5 warm-up launches, 5 launches in the window, none timed:\n{ran}"
    );
    // The time pass checks each target; the passes after it launch what it checked, with
    // one more warm-up launch in the check's place.
    for line in ran.lines() {
        let timed = line.starts_with("kernels-0-0.csv");
        assert_eq!(!line.contains("\"check\":false"), timed, "{line}");
        let warmup = if timed {
            "\"warmup\":5,"
        } else {
            "\"warmup\":6,"
        };
        assert!(line.contains(warmup), "{line}");
    }
    // The profile gate failed on both: recorded ❌, and the stage still passed.
    let gates = summary(&staging).gates;
    let verdicts: Vec<(&str, &str, bool)> = gates
        .iter()
        .map(|g| (g.gate.as_str(), g.subject.as_str(), g.pass))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("profile.few-registers", "control", false),
            ("profile.few-registers", "bad", false)
        ]
    );
    assert_eq!(
        gates[0].detail.as_deref(),
        Some("registers_per_thread 16.00 ≤ 8 ❌")
    );
    let first = summary(&staging).targets[0].measured.clone().unwrap();
    assert!(!first.reused);
    assert_eq!(first.key["ncu"], "Version 2025.3.1.0");
    let (n, _, staging) = profiled(&run);
    assert_eq!(n, 0, "nothing changed");
    let s = summary(&staging);
    assert!(s.targets[..2]
        .iter()
        .all(|t| t.measured.as_ref().unwrap().reused));
    assert_eq!(s.targets[0].measured.as_ref().unwrap().run, first.run);
    assert_eq!(s.targets[0].kernel_time_us, Some(16.576));
    let saved = std::fs::read(staging.join("artifacts/ncu/control.csv")).unwrap();
    assert_eq!(
        saved,
        std::fs::read(fixture("stage_mode_launches.csv")).unwrap()
    );
    std::fs::write(
        project.root().join(".repro/cubins/bad.sm_90a.cubin"),
        "rebuilt",
    )
    .unwrap();
    let (n, ran, staging) = profiled(&run);
    assert_eq!(n, 3);
    assert!(
        ran.lines().count() == 3 && ran.lines().all(|l| l.contains("\"variant\":\"bad\"")),
        "only the rebuilt target, in each pass:\n{ran}"
    );
    let s = summary(&staging);
    assert!(s.targets[0].measured.as_ref().unwrap().reused);
    assert!(!s.targets[1].measured.as_ref().unwrap().reused);

    // 5. Baselines: the calls of one script in one ncu process, each call's kernels those
    //    its NVTX range names (a capture derived from real ones), a script that cannot run
    //    its calls is skipped with its reason, and an unchanged script keeps its committed
    //    profiles.
    let project = Project::of(&PIPELINE.replace(
        "targets: [control, bad, topk], clock_control: none}",
        "targets: [control], clock_control: none, baselines: {\
         torch-sdpa-best: {run: [sh, b.sh], workload: sdpa_fp8, shapes: [mission]}, \
         torch-sdpa-default: {run: [sh, b.sh], workload: sdpa_fp8, shapes: [mission]}, \
         gone: {run: [sh, gone.sh], workload: sdpa_fp8, shapes: [mission]}}}",
    ));
    project.script("b.sh", "#!/bin/sh\n");
    let calls_file = project.root().join("ncu-calls.txt");
    // Each pass's b.sh process starts with the stage, beside the kernel targets' (whose
    // stand-in waits for the first, up to 5 s), says it waits at its gate, and waits there
    // until every pass of the kernel targets has ended and the script before it too.
    let started = project.root().join("started");
    let ncu = project.fake_ncu(&format!(
        "case \"$*\" in *--version*) echo 'Version 2025.3.1.0'; exit 0;; \
         *gone.sh*) echo \"$*\" >> '{calls}'; echo 'repro-profile: skipped: PyTorch is not installed'; exit 0;; \
         *b.sh*) echo 'a script waits at its gate' >> '{calls}'; touch '{started}' \"$REPRO_PROFILE_GATE.honoured\"; \
         while [ -n \"$REPRO_PROFILE_GATE\" ] && [ ! -f \"$REPRO_PROFILE_GATE\" ]; do sleep 0.01; done; \
         echo \"gate opened after $(grep -c 'kernel pass ended' '{calls}') kernel passes\" >> '{calls}'; \
         echo \"$*\" >> '{calls}'; cat '{}'; sleep 0.2; echo 'script ended' >> '{calls}'; exit 0;; esac\n\
         for i in $(seq 500); do [ -f '{started}' ] && break; sleep 0.01; done\n\
         [ -f '{started}' ] && echo 'kernel targets beside a waiting script' >> '{calls}'\n{}\n\
         echo 'kernel pass ended' >> '{calls}'",
        fixture("baseline_calls_launches.csv").display(),
        kernel_ncu(&calls_file, &project.root().join("ncu-requests.txt"), false),
        calls = calls_file.display(),
        started = started.display(),
    ));
    std::env::set_var("NCU", &ncu);
    let repro = project.script("fake-repro", FAKE_REPRO);
    std::fs::create_dir_all(project.root().join(".repro/cubins")).unwrap();
    for cubin in ["good", "reference"] {
        let path = project
            .root()
            .join(format!(".repro/cubins/{cubin}.sm_90a.cubin"));
        std::fs::write(path, cubin).unwrap();
    }
    let calls = || {
        let calls = project.root().join("ncu-calls.txt");
        let text = std::fs::read_to_string(&calls).unwrap_or_default();
        let _ = std::fs::remove_file(&calls);
        text
    };
    let run = || {
        let (outcome, staging) = project.run_with(&elsewhere, &repro);
        assert_eq!(outcome, StageOutcome::Passed);
        project.commit(&staging);
        summary(&staging)
    };
    let s = run();
    let call = calls();
    let lines: Vec<&str> = call.lines().collect();
    let kernel_passes = lines.iter().filter(|l| **l == "kernel pass ended").count();
    let first_pass = lines
        .iter()
        .position(|l| *l == "kernel pass ended")
        .unwrap();
    assert!(
        lines[..first_pass]
            .iter()
            .filter(|l| **l == "a script waits at its gate")
            .count()
            == 2
            && call.contains("kernel targets beside a waiting script"),
        "both passes' scripts wait at their gates before the kernel targets end:\n{call}"
    );
    let opened: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("gate opened after"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(opened.len(), 2, "{call}");
    for &i in &opened {
        assert_eq!(
            lines[i],
            format!("gate opened after {kernel_passes} kernel passes"),
            "every kernel pass first:\n{call}"
        );
    }
    assert!(
        lines[opened[0]..opened[1]].contains(&"script ended"),
        "the second script's gate opens once the first has ended:\n{call}"
    );
    let b_calls: Vec<&str> = call.lines().filter(|l| l.contains("b.sh")).collect();
    assert_eq!(
        b_calls.len(),
        2,
        "one process for both calls of b.sh, per pass:\n{call}"
    );
    assert!(
        b_calls[0].contains("--metrics gpu__time_duration.sum --nvtx")
            && b_calls[1].contains("launch__registers_per_thread")
            && !b_calls[1].contains("sm__throughput"),
        "the kernel time's pass first, then one pass of counters (a baseline's call gets no \
         full profile):\n{call}"
    );
    assert!(
        b_calls[1].contains(
            "--nvtx --nvtx-include repro-profile.torch-sdpa-best.mission/ \
             --nvtx-include repro-profile.torch-sdpa-default.mission/ \
             --target-processes application-only"
        ) && b_calls[0].contains(&format!(
            "sh b.sh --warmup 5 {}{}",
            "--profile torch-sdpa-best mission repro-profile.torch-sdpa-best.mission ".repeat(5),
            "--profile torch-sdpa-default mission repro-profile.torch-sdpa-default.mission "
                .repeat(5)
                .trim_end()
        )),
        "{call}"
    );
    let record = |s: &NcuSummary, label: &str| {
        s.targets
            .iter()
            .find(|t| t.target == label)
            .unwrap_or_else(|| panic!("no {label}"))
            .clone()
    };
    let staging_csv = |label: &str| {
        std::fs::read_to_string(project.root().join(format!("artifacts/ncu/{label}.csv"))).unwrap()
    };
    for (label, time) in [
        ("torch-sdpa-best@mission", 9.760),
        ("torch-sdpa-default@mission", 9.792),
    ] {
        let torch = record(&s, label);
        assert_eq!(
            (&torch.status, torch.shape.as_deref()),
            (&RunStatus::Ok, Some("mission")),
            "{label}: {:?}",
            torch.reason
        );
        assert_eq!(torch.kernels.len(), 1, "{label}");
        assert!(
            (torch.kernel_time_us.unwrap() - time).abs() < 1e-9,
            "{label}"
        );
        // Its own CSV: ncu's lines, the header, only its launches.
        let csv = staging_csv(label);
        let alone = repro::ncu::parse::parse(&csv).unwrap();
        assert_eq!(alone.launches.len(), 5, "{label}: its five profiled calls");
        assert_eq!(torch.launches, Some(5), "{label}");
    }
    let gone = record(&s, "gone@mission");
    assert_eq!(gone.status, RunStatus::Skipped);
    assert_eq!(gone.reason.as_deref(), Some("PyTorch is not installed"));
    let s = run();
    let call = calls();
    assert!(!call.contains("b.sh") && call.contains("gone.sh"), "{call}");
    for label in ["torch-sdpa-best@mission", "torch-sdpa-default@mission"] {
        let torch = record(&s, label);
        assert!(torch.measured.as_ref().unwrap().reused, "{label}");
        assert_eq!(torch.kernels.len(), 1);
    }
    project.script("b.sh", "#!/bin/sh\n# edited\n");
    run();
    let call = calls();
    assert_eq!(
        call.lines().filter(|l| l.contains("b.sh")).count(),
        2,
        "an edited script is profiled again, both calls in one process per pass:\n{call}"
    );
}
