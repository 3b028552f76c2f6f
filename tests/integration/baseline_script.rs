//! The PyTorch baselines' one entry, `kernels/baselines/torch_baselines.py`. Without PyTorch
//! every baseline of every workload is written as `skipped` with the reason (in repro's
//! BenchFile schema) and the script exits 0; its profiling mode says it skipped every call.
//! With stand-ins for torch and for each workload's module (python3 alone), one process
//! serves every workload: torch is imported once, each profiling call goes to the workload
//! that owns its baseline, and a workload that cannot run leaves the others running.
//! `kernels/baselines/torch_version.py`, the stage's `torch` tool, reads the version without
//! running torch's `__init__.py`.

use crate::common;

use repro::schema::{BenchFile, RunStatus};
use std::path::Path;
use std::process::{Command, Output};

fn has_python() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        common::say_skipped("python3 is not installed");
    }
    ok
}

fn scripts() -> std::path::PathBuf {
    common::source_root().join("kernels/baselines")
}

/// Whether this machine has python3 and no torch (else say the test is skipped).
fn python_without_torch() -> bool {
    if !has_python() {
        return false;
    }
    let has_torch = Command::new("python3")
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_torch {
        common::say_skipped("PyTorch is installed here, so the no-torch path cannot be shown");
        return false;
    }
    true
}

/// `python3 kernels/baselines/torch_baselines.py ARGS` in `dir`; it must exit 0.
fn baselines(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new("python3")
        .arg(scripts().join("torch_baselines.py"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn assert_skipped(dir: &Path, name: &str, workload: &str) {
    let text = std::fs::read(dir.join(format!("baselines/{name}.json"))).unwrap();
    let file: BenchFile = serde_json::from_slice(&text).unwrap();
    assert_eq!(
        (file.name.as_str(), file.kind.as_str(), file.status),
        (name, "baseline", RunStatus::Skipped)
    );
    assert_eq!(file.workload.as_deref(), Some(workload), "{name}");
    assert!(file.reason.unwrap().contains("PyTorch is not installed"));
    assert!(file.results.is_empty());
}

fn written(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("baselines"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn without_torch_every_baseline_of_every_workload_is_skipped_with_the_reason() {
    if !python_without_torch() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    baselines(dir.path(), &["--out", "baselines"]);
    for (name, workload) in [
        ("torch-sdpa-default", "sdpa_fp8"),
        ("torch-sdpa-best", "sdpa_fp8"),
        ("torch-rmsnorm", "rmsnorm"),
    ] {
        assert_skipped(dir.path(), name, workload);
    }
    assert_eq!(
        written(dir.path()),
        [
            "torch-rmsnorm.json",
            "torch-sdpa-best.json",
            "torch-sdpa-default.json"
        ]
    );
    // numpy's and torch's bytecode may be cached; the scripts' own is not written beside them.
    assert!(!scripts().join("__pycache__").exists());
}

#[test]
fn without_torch_workload_picks_the_baselines_written() {
    if !python_without_torch() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    baselines(dir.path(), &["--out", "baselines", "--workload", "rmsnorm"]);
    assert_skipped(dir.path(), "torch-rmsnorm", "rmsnorm");
    assert_eq!(written(dir.path()), ["torch-rmsnorm.json"]);
}

#[test]
fn without_torch_the_profiling_mode_skips_every_call_and_writes_nothing() {
    if !python_without_torch() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = baselines(
        dir.path(),
        &[
            "--out",
            "baselines",
            "--profile",
            "torch-sdpa-best",
            "mission",
            "r1",
            "--profile",
            "torch-rmsnorm",
            "mission",
            "r2",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("repro-profile: skipped: PyTorch is not installed")),
        "{stdout}"
    );
    assert!(written(dir.path()).is_empty());
}

/// Stand-ins: `import_torch` counts its calls and gives a torch whose CUDA calls and NVTX
/// ranges are logged, and the wait at the profile stage's gate is logged; each workload
/// module's `profiler` (its prefetch and its calls), `run` and `unavailable` log what they
/// were asked. Then `torch_baselines.main()` with the arguments after the code.
const STAND_INS: &str = r#"
import json, sys, types
sys.dont_write_bytecode = True
import torch_baselines, torch_rmsnorm, torch_sdpa
from baselines_common import SameCall, Torch

log = []
def nvtx(kind):
    return lambda name=None: log.append([kind, name])
fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
    synchronize=lambda: None,
    nvtx=types.SimpleNamespace(range_push=nvtx("push"), range_pop=nvtx("pop"))))
imports = []
def import_torch():
    imports.append(1)
    return Torch("np", fake, "F"), None
torch_baselines.import_torch = import_torch
torch_baselines.no_gpu = lambda t: None
torch_baselines.wait_for_gate = lambda: log.append(["gate"])

def stand_in(module, unavailable=None, fails=False):
    name = module.WORKLOAD
    module.unavailable = lambda t: unavailable
    def profiler(t, args):
        assert t.torch is fake
        log.append(["profiler", name])
        def prepare(baseline, shape):
            assert baseline in module.BASELINES, baseline
            for b, s, other in scenario.get("same", []):
                if (b, s) == (baseline, shape):
                    raise SameCall(other, f"{b} runs {other}'s kernel")
            return lambda: log.append(["call", name, baseline, shape])
        return (lambda shape: log.append(["prefetch", name, shape])), prepare
    def run(t, args):
        assert t.torch is fake
        log.append(["run", name, args.out])
        if fails:
            raise RuntimeError(f"{name} broke")
        return 0
    module.profiler, module.run = profiler, run

scenario = json.loads(sys.argv[1])
stand_in(torch_sdpa, fails=scenario.get("sdpa_fails", False))
stand_in(torch_rmsnorm, unavailable=scenario.get("rmsnorm_unavailable"))
sys.argv = ["torch_baselines.py"] + sys.argv[2:]
import contextlib, io
stdout = io.StringIO()
with contextlib.redirect_stdout(stdout):
    code = torch_baselines.main()
print(json.dumps({"code": code, "imports": len(imports), "log": log,
                  "stdout": stdout.getvalue().splitlines()}))
"#;

/// [`STAND_INS`] in `dir` with `scenario` (JSON) and the script's arguments.
fn with_stand_ins(dir: &Path, scenario: &str, args: &[&str]) -> serde_json::Value {
    common::stdout_json(
        Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import sys; sys.path.insert(0, {:?})\n{STAND_INS}",
                scripts().display().to_string()
            ))
            .arg(scenario)
            .args(args)
            .current_dir(dir),
    )
}

fn words(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap_or("null").to_string())
        .collect()
}

#[test]
fn one_process_serves_every_baseline_call_each_by_its_workload() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--warmup", "2"];
    for call in [
        ["torch-sdpa-best", "mission", "r.best.mission"],
        ["torch-rmsnorm", "mission", "r.rms.mission"],
        ["torch-sdpa-default", "long", "r.default.long"],
        ["torch-naive", "mission", "r.naive.mission"],
    ] {
        args.push("--profile");
        args.extend(call);
    }
    let seen = with_stand_ins(dir.path(), "{}", &args);
    assert_eq!(seen["code"], 0, "{seen}");
    assert_eq!(seen["imports"], 1, "torch imported once: {seen}");
    let log: Vec<Vec<String>> = seen["log"].as_array().unwrap().iter().map(words).collect();
    // Before the gate, each workload's profiler is made once and reads each shape asked of
    // it; after, each call is a trial, two warm-up calls, then one call inside its own range.
    let step = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<String>>();
    let call = |w: &str, b: &str, s: &str| vec!["call".to_string(), w.into(), b.into(), s.into()];
    let mut want: Vec<Vec<String>> = vec![
        step(&["profiler", "sdpa_fp8"]),
        step(&["prefetch", "sdpa_fp8", "mission"]),
        step(&["profiler", "rmsnorm"]),
        step(&["prefetch", "rmsnorm", "mission"]),
        step(&["prefetch", "sdpa_fp8", "long"]),
        step(&["gate"]),
    ];
    let profiled = |want: &mut Vec<Vec<String>>, c: Vec<String>, range: &str| {
        want.extend(std::iter::repeat_n(c.clone(), 3));
        want.push(vec!["push".into(), range.into()]);
        want.push(c);
        want.push(vec!["pop".into(), "null".into()]);
    };
    profiled(
        &mut want,
        call("sdpa_fp8", "torch-sdpa-best", "mission"),
        "r.best.mission",
    );
    profiled(
        &mut want,
        call("rmsnorm", "torch-rmsnorm", "mission"),
        "r.rms.mission",
    );
    profiled(
        &mut want,
        call("sdpa_fp8", "torch-sdpa-default", "long"),
        "r.default.long",
    );
    assert_eq!(log, want, "{seen}");
    // A baseline no workload owns is one skipped call, named by its range.
    let stdout = words(&seen["stdout"]);
    assert_eq!(stdout.len(), 1, "{stdout:?}");
    assert!(
        stdout[0].starts_with("repro-profile: call r.naive.mission skipped: `torch-naive` is not a baseline of this script (torch-sdpa-default, torch-sdpa-best, torch-rmsnorm)"),
        "{stdout:?}"
    );
}

#[test]
fn a_call_listed_in_a_row_is_warmed_up_once_and_profiled_each_time() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["--warmup", "2"];
    for range in ["r.best", "r.best", "r.best", "r.rms", "r.best"] {
        let (baseline, shape) = match range {
            "r.rms" => ("torch-rmsnorm", "mission"),
            _ => ("torch-sdpa-best", "mission"),
        };
        args.extend(["--profile", baseline, shape, range]);
    }
    let seen = with_stand_ins(dir.path(), "{}", &args);
    assert_eq!(seen["code"], 0, "{seen}");
    let log: Vec<Vec<String>> = seen["log"].as_array().unwrap().iter().map(words).collect();
    let gate = log
        .iter()
        .position(|l| l == &["gate"])
        .expect("waited at the gate");
    assert_eq!(
        log[..gate]
            .iter()
            .filter(|l| l[0] == "prefetch")
            .collect::<Vec<_>>(),
        [
            &["prefetch", "sdpa_fp8", "mission"],
            &["prefetch", "rmsnorm", "mission"]
        ],
        "each shape read once, all before the gate: {log:?}"
    );
    let after: Vec<String> = log[gate + 1..]
        .iter()
        .map(|l| match l[0].as_str() {
            "call" => format!("call {}", l[2]),
            _ => l.join(" "),
        })
        .collect();
    let profiled = |b: &str, r: &str| [format!("push {r}"), format!("call {b}"), "pop null".into()];
    let mut want: Vec<String> = vec!["call torch-sdpa-best".into(); 3];
    for _ in 0..3 {
        want.extend(profiled("torch-sdpa-best", "r.best"));
    }
    want.extend(vec!["call torch-rmsnorm".to_string(); 3]);
    want.extend(profiled("torch-rmsnorm", "r.rms"));
    // Not in a row with the first three: warmed up again.
    want.extend(vec!["call torch-sdpa-best".to_string(); 3]);
    want.extend(profiled("torch-sdpa-best", "r.best"));
    assert_eq!(after, want);
}

#[test]
fn a_call_that_repeats_another_is_named_and_not_run() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--warmup",
        "1",
        "--profile",
        "torch-sdpa-best",
        "mission",
        "r.best.mission",
        "--profile",
        "torch-sdpa-default",
        "mission",
        "r.default.mission",
    ];
    let scenario = r#"{"same": [["torch-sdpa-default", "mission", "torch-sdpa-best"]]}"#;
    let seen = with_stand_ins(dir.path(), scenario, &args);
    assert_eq!(seen["code"], 0, "{seen}");
    let log: Vec<Vec<String>> = seen["log"].as_array().unwrap().iter().map(words).collect();
    assert!(
        !log.iter()
            .any(|l| l.contains(&"torch-sdpa-default".to_string())
                || l.contains(&"r.default.mission".to_string())),
        "the repeated call ran: {log:?}"
    );
    assert!(
        log.contains(&vec!["push".to_string(), "r.best.mission".to_string()]),
        "{log:?}"
    );
    assert_eq!(
        words(&seen["stdout"]),
        ["repro-profile: call r.default.mission same as torch-sdpa-best: torch-sdpa-default runs torch-sdpa-best's kernel"]
    );
}

#[test]
fn a_workload_that_cannot_run_skips_only_its_own_baselines() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = r#"{"rmsnorm_unavailable": "torch 2.3.0 has no torch.nn.functional.rms_norm (2.4 or later)"}"#;
    // Measuring: attention runs, RMSNorm's file says why it did not.
    let seen = with_stand_ins(dir.path(), scenario, &["--out", "baselines"]);
    assert_eq!(seen["code"], 0, "{seen}");
    assert_eq!(seen["imports"], 1, "{seen}");
    let log: Vec<Vec<String>> = seen["log"].as_array().unwrap().iter().map(words).collect();
    assert_eq!(log, [["run", "sdpa_fp8", "baselines"]], "{seen}");
    assert_eq!(written(dir.path()), ["torch-rmsnorm.json"]);
    let file: BenchFile = serde_json::from_slice(
        &std::fs::read(dir.path().join("baselines/torch-rmsnorm.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(file.status, RunStatus::Skipped);
    assert_eq!(file.workload.as_deref(), Some("rmsnorm"));
    assert!(file
        .reason
        .unwrap()
        .contains("no torch.nn.functional.rms_norm"));
    // Profiling: its calls are skipped with the reason, attention's still run.
    let seen = with_stand_ins(
        dir.path(),
        scenario,
        &[
            "--warmup",
            "0",
            "--profile",
            "torch-rmsnorm",
            "mission",
            "r.rms",
            "--profile",
            "torch-sdpa-best",
            "mission",
            "r.best",
        ],
    );
    let stdout = words(&seen["stdout"]);
    assert_eq!(
        stdout,
        ["repro-profile: call r.rms skipped: torch 2.3.0 has no torch.nn.functional.rms_norm (2.4 or later)"],
        "{seen}"
    );
    let pushed: Vec<String> = seen["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[0] == "push")
        .map(|e| e[1].as_str().unwrap().to_string())
        .collect();
    assert_eq!(pushed, ["r.best"], "{seen}");
}

#[test]
fn a_workload_that_fails_leaves_the_others_measured_and_the_exit_nonzero() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seen = with_stand_ins(dir.path(), r#"{"sdpa_fails": true}"#, &["--out", "o"]);
    assert_eq!(seen["code"], 1, "{seen}");
    let log: Vec<Vec<String>> = seen["log"].as_array().unwrap().iter().map(words).collect();
    assert_eq!(
        log,
        [["run", "sdpa_fp8", "o"], ["run", "rmsnorm", "o"]],
        "{seen}"
    );
}

/// The `torch` tool of the baselines stage: torch's version without running its
/// `__init__.py` (a stand-in package whose `__init__.py` exits 3 if run), from the literal
/// its version.py assigns; no torch at all is a failure, as `import torch` is.
#[test]
fn the_torch_tool_reads_the_version_without_importing_torch() {
    if !has_python() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let torch = dir.path().join("site/torch");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::write(torch.join("__init__.py"), "raise SystemExit(3)\n").unwrap();
    let version_py = "from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n\
                      __version__ = '2.11.0+cu130'\ndebug = False\n\
                      cuda: Optional[str] = '13.0'\ngit_version = 'abc'\n";
    std::fs::write(torch.join("version.py"), version_py).unwrap();
    let tool = |python_args: &[&str], pythonpath: &Path| {
        Command::new("python3")
            .args(python_args)
            .arg(scripts().join("torch_version.py"))
            .env("PYTHONPATH", pythonpath)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap()
    };
    let out = tool(&[], &dir.path().join("site"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2.11.0+cu130\n");
    // No torch: `-S` leaves site-packages off the path, and PYTHONPATH names none.
    let out = tool(&["-S"], &dir.path().join("empty"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no module named 'torch'"));
}
