//! Nothing unmeasured reads as measured, and nothing measured churns: a fresh clone of the
//! committed project on a machine without a GPU (real nvcc, the shipped kernels and the
//! committed results), then a one-line kernel edit there. Every surface — `repro run`,
//! `status`, `diff`, `verify`, the report, the manifest and `repro commit` — must say the
//! edited kernel's results were not measured, and none may read SAME or "passed".

use crate::git;
use crate::shipped;
use crate::skip;
use crate::table;

use git::git;
use std::path::Path;
use std::process::Command;
use table::stage_line as row;

/// `repro ARGS` in `root`: exit code, stdout, stderr.
fn repro(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh clone of the committed project (sources and results), or `None` after saying why
/// the test is skipped.
fn fresh_clone(test: &str) -> Option<tempfile::TempDir> {
    shipped::pinned_nvcc(test)?;
    if repro::gpu::driver_library_loads().is_ok() {
        skip::say_skipped(&format!(
            "{test}: this machine has a CUDA driver; the test is of one that cannot measure"
        ));
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = Path::new(shipped::SOURCE_ROOT);
    if !source.join(".git").exists() {
        skip::say_skipped(&format!("{test}: the sources are not a git clone"));
        return None;
    }
    let clone = dir.path().join("clone");
    git(
        dir.path(),
        &["clone", "-q", &source.to_string_lossy(), "clone"],
    );
    for (key, value) in [("user.name", "Test"), ("user.email", "test@example.com")] {
        git(&clone, &["config", key, value]);
    }
    Some(dir)
}

#[test]
fn a_kernel_edit_on_a_machine_that_cannot_measure_reads_as_not_measured_everywhere() {
    let test = "a_kernel_edit_on_a_machine_that_cannot_measure_reads_as_not_measured_everywhere";
    let Some(dir) = fresh_clone(test) else {
        return;
    };
    let root = &dir.path().join("clone");

    // The untouched clone: the run keeps every measured result and changes no byte.
    let (code, _, err) = repro(root, &["run", "-q"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.trim(), "", "-q is quiet when nothing is wrong");
    assert_eq!(
        git(root, &["status", "--porcelain"]),
        "",
        "a fresh clone stays clean"
    );
    let (code, status, _) = repro(root, &["status", "--exit-code"]);
    assert_eq!(
        code, 0,
        "nothing is behind on an untouched clone:\n{status}"
    );
    assert!(!status.contains("dep `.repro/"), "{status}");
    assert!(
        status.contains("kept (current: only the machine differs)"),
        "{status}"
    );
    assert_eq!(
        status.matches("kept: measured on").count() + status.matches("kept: skipped on").count(),
        status.matches("  kept (").count(),
        "each kept stage says where once:\n{status}"
    );

    // An elite cubin left by an older tune (a checkout that pulled newer results) is rebuilt
    // from the committed record: the tune's results stay current.
    std::fs::write(
        root.join(".repro/cubins/tune-top1.cubin"),
        b"an older tune's",
    )
    .unwrap();
    let (code, _, err) = repro(root, &["run", "-q"]);
    assert_eq!(code, 0, "{err}");
    let (_, status, _) = repro(root, &["status"]);
    assert!(
        row(&status, "evo-tune").contains("kept (current"),
        "{status}"
    );
    assert_eq!(git(root, &["status", "--porcelain"]), "");

    // A one-line edit of the warp-specialized kernel.
    let kernel = root.join("kernels/sdpa_fp8_ws.cu");
    let text = std::fs::read_to_string(&kernel).unwrap();
    assert!(text.contains("__fdividef(vsc, l[hr])"));
    std::fs::write(
        &kernel,
        text.replace("__fdividef(vsc, l[hr])", "vsc / l[hr]"),
    )
    .unwrap();
    let (_, table, err) = repro(root, &["run", "-q"]);
    assert!(!err.contains("warning"), "-q is quiet: {err}");
    let bench = table.lines().find(|l| l.starts_with("bench ")).unwrap();
    assert!(bench.contains("NOT for these sources"), "{table}");

    let (code, status, _) = repro(root, &["status", "--exit-code"]);
    assert_eq!(code, 1, "{status}");
    assert!(
        row(&status, "bench").contains("kept (NOT measured"),
        "{status}"
    );
    assert!(
        status.contains("dep `.repro/cubins/ws-c1-x2.sm_90a.cubin` changed"),
        "{status}"
    );
    assert!(
        row(&status, "evo-tune").contains("kept (NOT measured"),
        "evo-tune tunes the edited kernel:\n{status}"
    );
    assert!(
        row(&status, "evo-tune-rmsnorm").contains("kept (current"),
        "the RMSNorm tune's kernel is another file:\n{status}"
    );
    assert!(
        row(&status, "evo-tune-mma").contains("kept (current")
            && status.contains("kept: skipped on"),
        "the skip recorded where the stage could judge (its `archs:`) stands:\n{status}"
    );

    let (code, diff, _) = repro(root, &["diff"]);
    assert_eq!(code, 1, "{diff}");
    assert!(diff.contains("not measured: run on a GPU"), "{diff}");
    let ws: Vec<&str> = diff.lines().filter(|l| l.starts_with("| ws-")).collect();
    assert!(!ws.is_empty(), "{diff}");
    assert!(
        ws.iter().all(|l| l.ends_with("| NOT MEASURED |")),
        "{ws:#?}"
    );

    let (code, verify, verify_err) = repro(root, &["verify"]);
    assert_ne!(code, 0);
    assert!(
        !format!("{verify}{verify_err}").contains("--allow-stale"),
        "verify never advises committing stale results:\n{verify}{verify_err}"
    );

    git(root, &["commit", "-qam", "ws: plain division"]);
    let (code, _, err) = repro(root, &["stage", "summarize", "--force", "-q"]);
    assert!(code <= 1, "{err}");
    let report = std::fs::read_to_string(root.join("reports/summary.md")).unwrap();
    let head: String = report.lines().take(12).collect::<Vec<_>>().join("\n");
    assert!(!report.contains("All gates passed"), "{head}");
    assert!(head.contains("not measured for these sources"), "{head}");
    assert!(head.contains("`ws-c1-x2`: measured cubin"), "{head}");
    let manifest = std::fs::read_to_string(root.join("artifacts/manifest.yaml")).unwrap();
    assert!(manifest.contains("not_measured:"), "{manifest}");

    let (code, _, refused) = repro(root, &["commit"]);
    assert_ne!(code, 0);
    assert!(
        refused.contains("not measured for these sources"),
        "{refused}"
    );
    let (code, out, err) = repro(root, &["commit", "--allow-stale"]);
    assert_eq!(code, 0, "{out}{err}");
    let message = git(root, &["log", "-1", "--format=%B"]);
    assert!(
        message.lines().next().unwrap().contains("NOT MEASURED"),
        "{message}"
    );
    assert!(message.contains("ws-c1-x2: measured cubin"), "{message}");
}

/// Write the files under `dir` of commit `rev` of `repo` into `to` (same relative paths).
fn checkout_dir(repo: &git2::Repository, rev: &str, dir: &str, to: &Path) {
    let commit = repo.revparse_single(rev).unwrap().peel_to_commit().unwrap();
    let tree = commit.tree().unwrap();
    let sub = tree
        .get_path(Path::new(dir))
        .unwrap()
        .to_object(repo)
        .unwrap()
        .peel_to_tree()
        .unwrap();
    sub.walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
        if let Ok(blob) = entry.to_object(repo).and_then(|o| o.peel_to_blob()) {
            let path = to.join(dir).join(parent).join(entry.name().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, blob.content()).unwrap();
        }
        git2::TreeWalkResult::Ok
    })
    .unwrap();
}

/// The committed results of ce59d9a and 4152475 measured the same cubins of four variants
/// on the same H100 and driver, two hours apart (`repro diff` once called 14 of their rows
/// SLOWER); 4152475 also added two variants.
#[test]
fn identical_cubins_measured_two_hours_apart_never_read_as_a_regression() {
    let (before, after) = ("ce59d9a", "4152475");
    let Ok(source) = git2::Repository::open(shipped::SOURCE_ROOT) else {
        skip::say_skipped("identical_cubins…: the sources are not a git clone");
        return;
    };
    if source.revparse_single(before).is_err() || source.revparse_single(after).is_err() {
        skip::say_skipped(&format!(
            "identical_cubins…: the history lacks {before} or {after} (a shallow clone)"
        ));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q"]);
    for (key, value) in [("user.name", "Test"), ("user.email", "test@example.com")] {
        git(root, &["config", key, value]);
    }
    for d in ["artifacts/bench", "artifacts/build"] {
        checkout_dir(&source, before, d, root);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "before"]);
    std::fs::remove_dir_all(root.join("artifacts")).unwrap();
    for d in ["artifacts/bench", "artifacts/build"] {
        checkout_dir(&source, after, d, root);
    }
    std::fs::write(root.join("pipeline.yaml"), "version: 1\nstages: {}\n").unwrap();
    let (code, out, err) = repro(root, &["diff", "HEAD", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
    let rows = report["rows"].as_array().unwrap();
    let verdicts = |name: &str| -> Vec<&str> {
        rows.iter()
            .filter(|r| r["name"] == name)
            .map(|r| r["verdict"].as_str().unwrap())
            .collect()
    };
    for same in [
        "stage2-baseline",
        "stage5-ws-p1",
        "rms-block-row",
        "rms-warp-row",
    ] {
        let v = verdicts(same);
        assert!(
            !v.is_empty() && v.iter().all(|v| *v == "SAME"),
            "{same}: {v:?}"
        );
    }
    for new in ["ws-c1-x2", "ws-c2-pp"] {
        let v = verdicts(new);
        assert!(
            !v.is_empty() && v.iter().all(|v| *v == "NEW"),
            "{new}: {v:?}"
        );
    }
    assert!(
        rows.iter().all(|r| r["verdict"] != "SLOWER"),
        "{}",
        serde_json::to_string_pretty(rows).unwrap()
    );
    assert_eq!(code, 0, "{out}");
}
