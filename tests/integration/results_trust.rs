//! Results you can commit: a stage that cannot run here keeps what was measured elsewhere,
//! the machine is an input, early cutoff, `repro commit`'s refusals and `repro diff`'s exit
//! codes — through the real binary, on `cmd` pipelines in temporary git repositories (no
//! GPU needed: a declared tool that fails stands in for a missing one), and early cutoff on
//! the shipped kernels (needs nvcc). `repro verify`, and the action each problem it finds
//! names: tests/verify_actions.rs.

use crate::project;
use crate::shipped;
use crate::table;

use assert_cmd::Command;
use git2::{Repository, Signature};
use project::Project;
use std::path::Path;
use std::time::Duration;
use table::stage_line;

/// A temporary project in a git repository.
struct Repo {
    project: Project,
    git: Repository,
}

impl std::ops::Deref for Repo {
    type Target = Project;
    fn deref(&self) -> &Project {
        &self.project
    }
}

impl Repo {
    fn new(pipeline: &str) -> Repo {
        let project = Project::new(pipeline);
        project.write(".gitignore", ".repro/\n");
        let git = Repository::init(project.root()).unwrap();
        let mut cfg = git.config().unwrap();
        cfg.set_str("user.name", "Test").unwrap();
        cfg.set_str("user.email", "test@example.com").unwrap();
        Repo { project, git }
    }

    fn bytes(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn commit_all(&self, msg: &str) {
        let mut index = self.git.index().unwrap();
        index
            .add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = self.git.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = Signature::now("Test", "test@example.com").unwrap();
        let parent = self.git.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.git
            .commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
            .unwrap();
    }
}

/// A "measuring" stage that needs a tool (its version command is `tool.sh`, which the test
/// makes succeed or fail) and a report stage that needs it.
const MEASURED: &str = r#"version: 1
stages:
  measure:
    uses: cmd
    run: [sh, -c, "cat src/kernel.txt | grep -v '^#' > artifacts/m.txt"]
    deps: [src/kernel.txt]
    outs: [artifacts/m.txt]
    tools:
      probe: [sh, tool.sh]
  report:
    uses: cmd
    needs: [measure]
    run: [sh, -c, "wc -l < artifacts/m.txt > reports/r.txt"]
    deps: [artifacts/m.txt]
    outs: [reports/r.txt]
"#;

fn measured_repo() -> Repo {
    let repo = Repo::new(MEASURED);
    repo.write("src/kernel.txt", "# header\nline one\n");
    repo.write("tool.sh", "echo probe 1.0\n");
    std::fs::create_dir_all(repo.root().join("reports")).unwrap();
    repo
}

#[test]
fn a_stage_that_cannot_run_here_keeps_the_results_measured_elsewhere() {
    let repo = measured_repo();
    repo.expect(&["run"], 0);
    let before = (
        repo.bytes("artifacts/m.txt"),
        repo.bytes("artifacts/repro.lock"),
    );
    // The tool disappears and the input changes: the stage cannot measure here.
    repo.write("tool.sh", "exit 3\n");
    repo.write("src/kernel.txt", "# header\nline one\nline two\n");
    let out = repo.expect(&["run"], 0);
    assert!(out.contains("kept: earlier results"), "{out}");
    assert!(out.contains("not re-run here: needs `probe`"), "{out}");
    assert_eq!(repo.bytes("artifacts/m.txt"), before.0, "output untouched");
    assert_eq!(
        repo.bytes("artifacts/repro.lock"),
        before.1,
        "lock untouched"
    );
    let status = repo.expect(&["status"], 0);
    assert!(status.contains("measure  kept"), "{status}");
    assert!(status.contains("dep `src/kernel.txt` changed"), "{status}");
    // A second run does not retry what this machine already found it cannot run.
    let again = repo.expect(&["run"], 0);
    assert!(again.contains("kept: earlier results"), "{again}");
    // Once the tool is back the stage is stale again and runs.
    repo.write("tool.sh", "echo probe 1.0\n");
    repo.expect(&["run"], 0);
    assert_eq!(repo.bytes("artifacts/m.txt"), b"line one\nline two\n");
}

/// The rule: with unchanged sources, a machine that cannot re-measure leaves the committed
/// tree as it was. Results measured and committed where the tool is, then a fresh clone
/// where it is not (a no-GPU machine): `repro run` exits 0, reruns nothing that writes —
/// the summary included — and `git status --porcelain` is empty; `repro status
/// --exit-code` and `repro verify` pass there.
#[test]
fn a_fresh_clone_that_cannot_measure_leaves_the_committed_results_byte_for_byte() {
    let pipeline = format!(
        "{}  summary:\n    uses: summarize\n    needs: [measure]\n",
        MEASURED.split("  report:").next().unwrap()
    );
    let repo = Repo::new(&pipeline);
    repo.write("src/kernel.txt", "# header\nline one\n");
    // The tool is on the measuring machine only.
    repo.write(
        "tool.sh",
        "[ -n \"$PROBE_HERE\" ] || exit 3\necho probe 1.0\n",
    );
    repo.commit_all("sources");
    let run = |root: &Path, args: &[&str], probe: bool| {
        let mut cmd = Command::cargo_bin("repro").unwrap();
        cmd.args(args).current_dir(root).env_remove("PROBE_HERE");
        if probe {
            cmd.env("PROBE_HERE", "1");
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };
    let (code, text) = run(repo.root(), &["run"], true);
    assert_eq!(code, Some(0), "{text}");
    repo.commit_all("results");

    let clone_dir = tempfile::tempdir().unwrap();
    let clone = clone_dir.path().join("clone");
    Repository::clone(repo.root().to_str().unwrap(), &clone).unwrap();
    let (code, text) = run(&clone, &["run"], false);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("kept: earlier results"), "{text}");
    let porcelain = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&clone)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&porcelain.stdout),
        "",
        "the clone changed: {text}"
    );
    let (code, status) = run(&clone, &["status", "--exit-code"], false);
    assert_eq!(code, Some(0), "kept only for want of the tool: {status}");
    assert!(status.contains("measure  kept"), "{status}");
    let (code, verdict) = run(&clone, &["verify"], false);
    assert_eq!(code, Some(0), "{verdict}");
    // A source edit is not the machine: now the kept stage is behind.
    std::fs::write(clone.join("src/kernel.txt"), "# header\nline two\n").unwrap();
    run(&clone, &["run"], false);
    let (code, status) = run(&clone, &["status", "--exit-code"], false);
    assert_eq!(code, Some(1), "{status}");
}

#[test]
fn a_stage_that_never_measured_records_its_skip_and_is_not_retried() {
    let repo = measured_repo();
    let only_measure = MEASURED.split("  report:").next().unwrap();
    repo.write("pipeline.yaml", only_measure);
    repo.write("tool.sh", "exit 3\n");
    let out = repo.expect(&["run"], 0);
    assert!(out.contains("skipped: needs `probe`"), "{out}");
    assert!(!repo.root().join("artifacts/m.txt").exists());
    let lock = String::from_utf8(repo.bytes("artifacts/repro.lock")).unwrap();
    assert!(lock.contains("skipped: needs `probe`"), "{lock}");
    let again = repo.expect(&["run"], 0);
    assert!(
        again
            .lines()
            .any(|l| l.starts_with("measure") && l.contains("up-to-date")),
        "{again}"
    );
}

#[test]
fn tool_versions_and_the_gpu_are_inputs_of_the_stages_that_declare_them() {
    let repo = measured_repo();
    repo.expect(&["run"], 0);
    let lock = String::from_utf8(repo.bytes("artifacts/repro.lock")).unwrap();
    assert!(lock.contains("probe: probe 1.0"), "{lock}");
    // A new version (a new binary, so the cached answer does not apply) makes it stale.
    repo.write("tool.sh", "echo probe 2.0 # new\n");
    let status = repo.expect(&["status"], 0);
    assert!(
        status.contains("tool `probe` changed: probe 1.0 → probe 2.0"),
        "{status}"
    );
    // `gpu: true` records this machine's GPUs (here: that there is none) as the hardware.
    let gpu = Repo::new(
        "version: 1\nstages:\n  g:\n    uses: cmd\n    run: [sh, -c, \"echo x > o\"]\n    outs: [o]\n    gpu: true\n",
    );
    let out = gpu.expect(&["status", "--json"], 0);
    assert!(out.contains("never-run"), "{out}");
    let bad = Repo::new(
        "version: 1\nstages:\n  g:\n    uses: cmd\n    run: [sh, -c, \"echo x > o\"]\n    outs: [o]\n    gpu: maybe\n",
    );
    let err = bad.expect(&["status"], 2);
    assert!(err.contains("`gpu` must be true or false"), "{err}");
}

#[test]
fn a_rerun_with_byte_identical_outputs_leaves_what_needs_it_up_to_date() {
    let repo = measured_repo();
    repo.expect(&["run"], 0);
    // A comment-only edit: `measure` reruns, writes the same bytes; `report` does not rerun.
    repo.write("src/kernel.txt", "# a new comment\nline one\n");
    let out = repo.expect(&["run"], 0);
    assert!(out.contains("measure  "), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("report") && l.contains("up-to-date")),
        "report must be up to date:\n{out}"
    );
    // A real change reaches it.
    repo.write("src/kernel.txt", "# a new comment\nline one\nline two\n");
    let out = repo.expect(&["run"], 0);
    assert!(
        out.lines()
            .any(|l| l.starts_with("report") && l.contains("passed")),
        "{out}"
    );
}

#[test]
fn commit_refuses_stale_results_and_dirty_sources_and_names_the_flag() {
    let repo = measured_repo();
    repo.commit_all("sources");
    repo.expect(&["run"], 0);
    // A source edited and not rerun: stale, and dirty against HEAD.
    repo.write("src/kernel.txt", "# header\nline one\nline two\n");
    let out = repo.expect(&["commit"], 1);
    assert!(out.contains("stage `measure` is stale"), "{out}");
    assert!(out.contains("(override: --allow-stale)"), "{out}");
    assert!(
        out.contains("`src/kernel.txt`, an input of the results, differs from HEAD"),
        "{out}"
    );
    assert!(out.contains("(override: --allow-dirty)"), "{out}");
    // Rerun: no longer stale, but the source is still uncommitted.
    repo.expect(&["run"], 0);
    let out = repo.expect(&["commit"], 1);
    assert!(!out.contains("--allow-stale"), "{out}");
    assert!(out.contains("--allow-dirty"), "{out}");
    // Commit the source first: then the results go in.
    let mut index = repo.git.index().unwrap();
    index.add_path(Path::new("src/kernel.txt")).unwrap();
    index.write().unwrap();
    let tree = repo.git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("Test", "test@example.com").unwrap();
    let head = repo.git.head().unwrap().peel_to_commit().unwrap();
    repo.git
        .commit(Some("HEAD"), &sig, &sig, "kernel", &tree, &[&head])
        .unwrap();
    repo.expect(&["commit", "-m", "results"], 0);
}

#[test]
fn commit_refuses_results_kept_from_another_machine() {
    let repo = measured_repo();
    repo.commit_all("sources");
    repo.expect(&["run"], 0);
    repo.expect(&["commit", "-m", "measured"], 0);
    repo.write("tool.sh", "exit 3\n");
    repo.write("src/kernel.txt", "# header\nline one\nline two\n");
    repo.commit_all("new kernel");
    repo.expect(&["run"], 0);
    let out = repo.expect(&["commit"], 1);
    assert!(
        out.contains("stage `measure` was not re-run on this machine"),
        "{out}"
    );
    assert!(out.contains("--allow-stale"), "{out}");
}

#[test]
fn diff_of_a_revision_that_does_not_exist_is_bad_usage() {
    let repo = measured_repo();
    repo.commit_all("sources");
    let out = repo.expect(&["diff", "no-such-rev"], 2);
    assert!(out.contains("revision `no-such-rev` not found"), "{out}");
}

#[test]
fn a_comment_only_kernel_edit_reruns_nothing_and_leaves_the_lock_as_it_was() {
    let test = "a_comment_only_kernel_edit_reruns_nothing_and_leaves_the_lock_as_it_was";
    if shipped::pinned_nvcc(test).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    shipped::copy_project(root);
    let run = |args: &[&str]| -> String {
        let out = Command::cargo_bin("repro")
            .unwrap()
            .args(args)
            .current_dir(root)
            .timeout(Duration::from_secs(600))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    run(&["run", "-q"]);
    let lock = std::fs::read(root.join("artifacts/repro.lock")).unwrap();
    let kernel = root.join("kernels/sdpa_fp8.cu");
    let text = std::fs::read_to_string(&kernel).unwrap();
    std::fs::write(&kernel, format!("// A comment-only edit.\n{text}")).unwrap();
    let table = run(&["run", "-q"]);
    assert_eq!(
        std::fs::read(root.join("artifacts/repro.lock")).unwrap(),
        lock,
        "the lock records the kernel by its code"
    );
    for stage in ["build", "bench", "evo-tune", "ncu-profile"] {
        assert!(
            stage_line(&table, stage).contains("up-to-date"),
            "{stage}:\n{table}"
        );
    }
}

#[test]
fn a_failure_on_other_inputs_is_forgotten_once_the_stage_is_up_to_date_again() {
    let repo = Repo::new(
        "version: 1\nstages:\n  s:\n    uses: cmd\n    run: [sh, -c, \"grep -qv bad d && cp d o\"]\n    deps: [d]\n    outs: [o]\n",
    );
    repo.write("d", "good\n");
    repo.expect(&["run"], 0);
    repo.write("d", "bad\n");
    repo.expect(&["run"], 1);
    let outcome = || {
        repro::engine::run_record::load(repo.root(), ["s"])
            .get("s")
            .map(|r| r.outcome)
    };
    assert_eq!(outcome(), Some(repro::engine::run_record::Outcome::Failed));
    // Back to the inputs of the recorded run: up to date, and the failure no longer stands.
    repo.write("d", "good\n");
    repo.expect(&["run"], 0);
    assert_ne!(
        outcome(),
        Some(repro::engine::run_record::Outcome::Failed),
        "the failed record of other inputs is gone"
    );
}
