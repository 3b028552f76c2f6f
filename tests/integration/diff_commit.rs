//! `repro diff` and `repro commit` on temporary git repositories (tempfile + git2), through
//! the real binary.

use assert_cmd::Command;
use git2::{Repository, Signature};
use repro::engine::lockfile::LockFile;
use repro::engine::run_record;
use repro::engine::statcache::hash_file;
use std::path::Path;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report/green");

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// A repo holding the green fixture, committed once.
fn repo_with_fixture() -> (tempfile::TempDir, Repository) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(Path::new(FIXTURE), dir.path());
    std::fs::write(dir.path().join(".gitignore"), ".repro/\n").unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let mut cfg = repo.config().unwrap();
    cfg.set_str("user.name", "Test").unwrap();
    cfg.set_str("user.email", "test@example.com").unwrap();
    commit_all(&repo, "results");
    (dir, repo)
}

fn commit_all(repo: &Repository, msg: &str) {
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("Test", "test@example.com").unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
        .unwrap();
}

/// Scale every p50 of `variant` on `shape` by `factor` and set its ci95 to `ci`.
fn edit_bench(root: &Path, variant: &str, shape: &str, factor: f64, ci: f64) {
    let path = root.join(format!("artifacts/bench/{variant}.json"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        if r["shape"] == shape {
            let p = r["p50_us"].as_f64().unwrap();
            r["p50_us"] = serde_json::json!(p * factor);
            r["ci95_us"] = serde_json::json!(ci);
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn repro(root: &Path) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(root);
    cmd
}

fn diff_json(root: &Path, rev: &str) -> serde_json::Value {
    let out = repro(root).args(["diff", rev, "--json"]).output().unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

fn verdict(report: &serde_json::Value, name: &str, shape: &str) -> String {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name && r["shape"] == shape)
        .unwrap()["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn diff_verdicts_faster_slower_same_unclear() {
    let (dir, _repo) = repo_with_fixture();
    let root = dir.path();
    edit_bench(root, "stage5-ws-p1", "mission", 0.80, 0.15); // 20% faster, tight
    edit_bench(root, "stage5-ws-p2", "mission", 1.15, 0.15); // 15% slower, tight
    edit_bench(root, "stage2-baseline", "mission", 1.005, 0.15); // 0.5%: same
    edit_bench(root, "stage2-baseline", "long", 1.05, 40.0); // 5% but noise ±40 µs
    let report = diff_json(root, "HEAD");
    assert_eq!(verdict(&report, "stage5-ws-p1", "mission"), "FASTER");
    assert_eq!(verdict(&report, "stage5-ws-p2", "mission"), "SLOWER");
    assert_eq!(verdict(&report, "stage2-baseline", "mission"), "SAME");
    assert_eq!(verdict(&report, "stage2-baseline", "long"), "UNCLEAR");
    assert_eq!(verdict(&report, "torch_sdpa", "small"), "SAME");
    // A regression makes the exit status 1, and the markdown says it.
    let out = repro(root).arg("diff").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("| stage5-ws-p2 | mission |"), "{md}");
    assert!(md.contains("SLOWER"), "{md}");
}

#[test]
fn diff_reports_flipped_gates() {
    let (dir, _repo) = repo_with_fixture();
    let path = dir.path().join("artifacts/bench/stage5-ws-p1.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["results"][4]["correctness_pass"] = serde_json::json!(false);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let report = diff_json(dir.path(), "HEAD");
    let flipped = report["flipped_gates"].as_array().unwrap();
    assert_eq!(flipped.len(), 1, "{flipped:?}");
    assert_eq!(flipped[0]["gate"], "correctness stage5-ws-p1 mission/seed1");
    assert_eq!(flipped[0]["before"], true);
    assert_eq!(flipped[0]["after"], false);
}

#[test]
fn diff_names_a_missing_revision_and_a_revision_without_artifacts() {
    let (dir, repo) = repo_with_fixture();
    repro(dir.path())
        .args(["diff", "no-such-rev"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "revision `no-such-rev` not found",
        ));
    // A first commit without artifacts, then diff against it.
    let empty = tempfile::tempdir().unwrap();
    let erepo = Repository::init(empty.path()).unwrap();
    std::fs::write(empty.path().join("README"), "x").unwrap();
    commit_all(&erepo, "first");
    copy_dir(Path::new(FIXTURE), empty.path());
    repro(empty.path())
        .arg("diff")
        .assert()
        .failure()
        .stderr(predicates::str::contains("has no artifacts/bench/*.json"));
    drop(repo);
}

#[test]
fn commit_refuses_a_failed_run() {
    let (dir, _repo) = repo_with_fixture();
    let failed = run_record::Record {
        fingerprint: "later".into(),
        outcome: run_record::Outcome::Failed,
        elapsed_s: 3.0,
        message: Some("exec crashed: illegal address".into()),
    };
    run_record::record(dir.path(), "bench", &failed).unwrap();
    std::fs::write(dir.path().join("reports.txt"), "x").unwrap();
    repro(dir.path())
        .arg("commit")
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "stage `bench` failed: exec crashed: illegal address",
        ))
        .stderr(predicates::str::contains("--allow-failed"));
}

/// New results in the working tree: a report and a bench change, with the lock updated
/// to match them.
fn new_results(root: &Path) {
    std::fs::create_dir_all(root.join("reports")).unwrap();
    std::fs::write(root.join("reports/summary.md"), "# report\n").unwrap();
    edit_bench(root, "stage5-ws-p1", "mission", 0.9, 0.1);
    let mut lock = LockFile::load(root).unwrap();
    let digest = |rel: &str| hash_file(&root.join(rel)).unwrap();
    let bench = "artifacts/bench/stage5-ws-p1.json";
    let bench_outputs = &mut lock.stages.get_mut("bench").unwrap().outputs;
    bench_outputs.insert(bench.into(), digest(bench));
    let mut summarize = lock.stages["bench"].clone();
    summarize.outputs = [(
        "reports/summary.md".to_string(),
        digest("reports/summary.md"),
    )]
    .into();
    lock.stages.insert("summarize".into(), summarize);
    lock.save(root).unwrap();
}

#[test]
fn commit_takes_only_artifacts_and_reports_and_leaves_other_staged_changes() {
    let (dir, repo) = repo_with_fixture();
    let root = dir.path();
    new_results(root);
    // Another change, staged by the user, and an unstaged one.
    std::fs::write(
        root.join("pipeline.yaml"),
        std::fs::read_to_string(root.join("pipeline.yaml")).unwrap() + "# edited\n",
    )
    .unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("pipeline.yaml")).unwrap();
    index.write().unwrap();
    std::fs::write(root.join("notes.txt"), "untracked\n").unwrap();

    // The fixture's lock is not one this machine's inputs reproduce: only the folders are
    // under test here.
    repro(root)
        .args(["commit", "-m", "ws-p1: faster mission", "--allow-stale"])
        .assert()
        .success();

    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let msg = head.message().unwrap();
    assert!(msg.starts_with("ws-p1: faster mission\n"), "{msg}");
    assert!(
        msg.contains("Gates:") && msg.contains("✅ ptxas: 3/3 pass"),
        "{msg}"
    );
    assert!(msg.contains("stage5-ws-p1 (best): 31.15"), "{msg}");
    let parent = head.parent(0).unwrap();
    let diff = repo
        .diff_tree_to_tree(
            Some(&parent.tree().unwrap()),
            Some(&head.tree().unwrap()),
            None,
        )
        .unwrap();
    let mut changed: Vec<String> = diff
        .deltas()
        .map(|d| d.new_file().path().unwrap().to_string_lossy().into_owned())
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "artifacts/bench/stage5-ws-p1.json",
            "artifacts/repro.lock",
            "reports/summary.md"
        ]
    );
    // pipeline.yaml is still staged (index differs from HEAD), notes.txt untracked.
    let st = repo.status_file(Path::new("pipeline.yaml")).unwrap();
    assert!(st.contains(git2::Status::INDEX_MODIFIED), "{st:?}");
    assert!(repo
        .status_file(Path::new("notes.txt"))
        .unwrap()
        .contains(git2::Status::WT_NEW));
    // Nothing left to commit in our folders.
    repro(root)
        .args(["commit", "--allow-stale"])
        .assert()
        .success()
        .stdout(predicates::str::contains("nothing to commit"));
}

/// Rewrite every result of `variant` (all shapes) with `edit`.
fn edit_results(root: &Path, variant: &str, edit: impl Fn(&mut serde_json::Value)) {
    let path = root.join(format!("artifacts/bench/{variant}.json"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for r in v["results"].as_array_mut().unwrap() {
        edit(r);
    }
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn diff_calls_a_measurement_missing_now_lost_and_fails() {
    let (dir, _repo) = repo_with_fixture();
    edit_results(dir.path(), "stage5-ws-p2", |r| {
        r["status"] = serde_json::json!("skipped");
        r["p50_us"] = serde_json::Value::Null;
        r["correctness_pass"] = serde_json::Value::Null;
    });
    let report = diff_json(dir.path(), "HEAD");
    assert_eq!(verdict(&report, "stage5-ws-p2", "mission"), "LOST");
    let flipped = report["flipped_gates"].as_array().unwrap();
    assert!(
        flipped
            .iter()
            .any(|g| g["gate"] == "correctness stage5-ws-p2 mission/seed0" && g["after"].is_null()),
        "a gate that is no longer checked is reported: {flipped:?}"
    );
    let out = repro(dir.path()).arg("diff").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("✅ → not checked"), "{md}");
    // `repro commit` refuses the loss and names the flag.
    repro(dir.path())
        .args(["commit", "--allow-stale"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "measured at HEAD and not measured now",
        ))
        .stderr(predicates::str::contains("stage5-ws-p2 on `small`"))
        .stderr(predicates::str::contains("--allow-lost"));
}

#[test]
fn diff_does_not_compare_speed_across_gpu_models() {
    let (dir, _repo) = repo_with_fixture();
    for v in ["stage2-baseline", "stage5-ws-p1", "stage5-ws-p2"] {
        edit_results(dir.path(), v, |r| {
            r["device_name"] = serde_json::json!("NVIDIA L4");
        });
    }
    edit_bench(dir.path(), "stage5-ws-p1", "mission", 0.5, 0.1); // twice as fast, on an L4
    let report = diff_json(dir.path(), "HEAD");
    assert_eq!(verdict(&report, "stage5-ws-p1", "mission"), "OTHER GPU");
    assert_eq!(
        verdict(&report, "torch_sdpa", "mission"),
        "SAME",
        "same GPU: compared"
    );
    let after = report["gpus_after"].as_array().unwrap();
    assert!(after.contains(&serde_json::json!("NVIDIA L4")), "{after:?}");
    let before = report["gpus_before"].as_array().unwrap();
    assert!(!before.is_empty() && !before.contains(&serde_json::json!("NVIDIA L4")));
    let out = repro(dir.path()).arg("diff").output().unwrap();
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(
        md.contains("GPU after: ") && md.contains("NVIDIA L4"),
        "{md}"
    );
    assert!(!md.contains("FASTER |"), "{md}");
}

#[test]
fn a_performance_gate_that_moved_to_a_new_best_variant_is_not_called_unchecked() {
    let (dir, repo) = repo_with_fixture();
    let path = |variant: &str| dir.path().join(format!("artifacts/bench/{variant}.json"));
    let perf_gate = |variant: &str| {
        serde_json::json!({
            "gate": "performance.min_speedup_vs_control",
            "subject": format!("{variant} vs stage2-baseline on mission"),
            "measured": 1.2, "threshold": 1.1, "op": ">=", "pass": true
        })
    };
    let set_gate = |variant: &str, gate: Option<serde_json::Value>| {
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path(variant)).unwrap()).unwrap();
        let gates = v["gates"].as_array_mut().unwrap();
        gates.retain(|g| g["gate"] != "performance.min_speedup_vs_control");
        gates.extend(gate);
        std::fs::write(path(variant), serde_json::to_string_pretty(&v).unwrap()).unwrap();
    };
    // HEAD: stage5-ws-p1 is the best, and the performance gate judges it.
    set_gate("stage5-ws-p1", Some(perf_gate("stage5-ws-p1")));
    commit_all(&repo, "p1 is the best");
    // Now stage5-ws-p2 is the best: the gate moved to it.
    set_gate("stage5-ws-p1", None);
    set_gate("stage5-ws-p2", Some(perf_gate("stage5-ws-p2")));
    let report = diff_json(dir.path(), "HEAD");
    let flipped = report["flipped_gates"].as_array().unwrap();
    assert!(
        flipped.iter().all(|g| !g["after"].is_null()),
        "a moved gate is not unchecked: {flipped:?}"
    );
    // Gone altogether, it is.
    set_gate("stage5-ws-p2", None);
    let report = diff_json(dir.path(), "HEAD");
    let flipped = report["flipped_gates"].as_array().unwrap();
    assert!(flipped.iter().any(|g| g["after"].is_null()), "{flipped:?}");
}

/// `git ARGS` in `root`; panics with its output when it fails.
fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "git {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// New results, a change of the user's staged beside them, and the index's bytes now.
fn staged_beside_new_results(root: &Path) -> Vec<u8> {
    new_results(root);
    std::fs::write(root.join("notes.md"), "mine, staged\n").unwrap();
    git(root, &["add", "notes.md"]);
    std::fs::read(root.join(".git/index")).unwrap()
}

fn head_id(repo: &Repository) -> git2::Oid {
    repo.head().unwrap().peel_to_commit().unwrap().id()
}

#[test]
fn commit_honours_gits_identity_and_date_variables() {
    let (dir, repo) = repo_with_fixture();
    new_results(dir.path());
    repro(dir.path())
        .args(["commit", "--allow-stale"])
        .env("GIT_AUTHOR_NAME", "Ada Author")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
        .env("GIT_COMMITTER_NAME", "Cy Committer")
        .env("GIT_COMMITTER_EMAIL", "cy@example.com")
        .assert()
        .success();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.author().name(), Some("Ada Author"));
    assert_eq!(head.author().email(), Some("ada@example.com"));
    assert_eq!(head.author().when().seconds(), 1_767_323_045);
    assert_eq!(head.committer().name(), Some("Cy Committer"));
    assert_eq!(head.committer().email(), Some("cy@example.com"));
}

#[test]
fn a_hook_that_rejects_the_commit_is_a_refusal_naming_its_output_and_the_index_is_kept() {
    let (dir, repo) = repo_with_fixture();
    let root = dir.path();
    let index = staged_beside_new_results(root);
    let before = head_id(&repo);
    let hook = root.join(".git/hooks/pre-commit");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'lint: results need a review first' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    repro(root)
        .args(["commit", "--allow-stale"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "refusing to commit: `git commit` refused",
        ))
        .stderr(predicates::str::contains(
            "lint: results need a review first",
        ))
        .stderr(predicates::str::contains("the git index is as it was"));
    assert_eq!(head_id(&repo), before);
    assert!(
        std::fs::read(root.join(".git/index")).unwrap() == index,
        "the index changed"
    );
}

#[test]
fn a_refusing_filter_or_signer_leaves_the_index_as_it_was() {
    for (setting, value, attributes) in [
        ("commit.gpgsign", "true", None),
        (
            "filter.bad.clean",
            "false",
            Some("reports/*.md filter=bad\n"),
        ),
    ] {
        let (dir, repo) = repo_with_fixture();
        let root = dir.path();
        git(root, &["config", setting, value]);
        git(root, &["config", "gpg.program", "false"]);
        git(root, &["config", "filter.bad.required", "true"]);
        if let Some(text) = attributes {
            std::fs::write(root.join(".gitattributes"), text).unwrap();
        }
        let index = staged_beside_new_results(root);
        let before = head_id(&repo);
        let out = repro(root)
            .args(["commit", "--allow-stale"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{setting}: {err}");
        assert!(
            err.contains("refusing to commit: `git "),
            "{setting}: {err}"
        );
        assert!(
            err.contains("the git index is as it was"),
            "{setting}: {err}"
        );
        assert_eq!(head_id(&repo), before, "{setting}");
        assert!(
            std::fs::read(root.join(".git/index")).unwrap() == index,
            "{setting}: the index changed"
        );
    }
}

/// A clean filter (what Git LFS is) applies as `git add` applies it: the commit holds the
/// cleaned file, and `git status` finds nothing modified after it.
#[test]
fn commit_applies_clean_filters_as_git_add_does() {
    let (dir, repo) = repo_with_fixture();
    let root = dir.path();
    git(root, &["config", "filter.upper.clean", "tr a-z A-Z"]);
    git(root, &["config", "filter.upper.smudge", "cat"]);
    std::fs::write(root.join(".gitattributes"), "reports/*.md filter=upper\n").unwrap();
    git(root, &["add", ".gitattributes"]);
    git(root, &["commit", "-q", "-m", "attributes"]);
    new_results(root);
    repro(root)
        .args(["commit", "--allow-stale"])
        .assert()
        .success();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let entry = head
        .tree()
        .unwrap()
        .get_path(Path::new("reports/summary.md"))
        .unwrap();
    let blob = repo.find_blob(entry.id()).unwrap();
    assert_eq!(blob.content(), b"# REPORT\n");
    assert_eq!(
        git(
            root,
            &["status", "--porcelain", "--", "artifacts", "reports"]
        ),
        ""
    );
}

#[test]
fn commit_refuses_while_another_repro_holds_the_project_lock() {
    let (dir, repo) = repo_with_fixture();
    let root = dir.path();
    new_results(root);
    let before = head_id(&repo);
    let held = repro::engine::project_lock::acquire(
        root,
        false,
        &std::sync::atomic::AtomicBool::new(false),
        |_| {},
    )
    .unwrap();
    repro(root)
        .args(["commit", "--allow-stale"])
        .assert()
        .failure()
        .stderr(predicates::str::contains(
            "refusing to commit: another repro is running in this project",
        ))
        .stderr(predicates::str::contains(format!(
            "pid {}",
            std::process::id()
        )))
        .stderr(predicates::str::contains("half-written"));
    assert_eq!(head_id(&repo), before);
    drop(held);
    repro(root)
        .args(["commit", "--allow-stale"])
        .assert()
        .success();
    assert_ne!(head_id(&repo), before);
}

/// A malformed record in the revision compared with is that revision's, named by the
/// revision and its path there; the working tree's good file is not blamed.
#[test]
fn diff_names_a_malformed_record_by_the_revision_that_has_it() {
    let (dir, repo) = repo_with_fixture();
    let root = dir.path();
    let rel = "artifacts/bench/stage5-ws-p2.json";
    let good = std::fs::read(root.join(rel)).unwrap();
    std::fs::write(
        root.join(rel),
        "{\"name\": \"stage5-ws-p2\", \"results\": [oops]}\n",
    )
    .unwrap();
    commit_all(&repo, "a malformed record");
    std::fs::write(root.join(rel), good).unwrap();
    let short = &head_id(&repo).to_string()[..10];
    let out = repro(root).args(["diff", "HEAD"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("HEAD:{rel}:1:")), "{err}");
    assert!(err.contains(&format!("commit {short} (`HEAD`)")), "{err}");
    assert!(
        err.contains(&format!("`git log --oneline -- {rel}`")),
        "{err}"
    );
    assert!(!err.contains("rerun the stage"), "{err}");
}
