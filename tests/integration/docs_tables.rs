//! `repro docs [--check]`: generated tables in the docs are rewritten from the committed
//! artifacts, `--check` fails on a stale one, and the repository's own docs are current.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn source_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The green report fixture with a doc holding a table of each kind.
fn project(doc: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &source_root().join("tests/fixtures/report/green"),
        dir.path(),
    );
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/results.md"), doc).unwrap();
    dir
}

fn docs(root: &Path, check: bool) -> assert_cmd::assert::Assert {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.arg("-f").arg(root.join("pipeline.yaml")).arg("docs");
    if check {
        cmd.arg("--check");
    }
    cmd.assert()
}

const DOC: &str = "# Results\n\n<!-- repro:table variants -->\nstage5-ws-p1 mission 99.99 µs\n<!-- /repro:table -->\n\n\
<!-- repro:table tune -->\n<!-- /repro:table -->\n\n<!-- repro:table results/harness_vs_ncu.md -->\n<!-- /repro:table -->\n";

#[test]
fn check_fails_on_a_stale_table_and_regenerating_fixes_it() {
    let dir = project(DOC);
    docs(dir.path(), true).code(1).stdout(
        predicate::str::contains("docs/results.md: variants")
            .and(predicate::str::contains("run `repro docs`")),
    );
    // --check changed nothing.
    let before = std::fs::read_to_string(dir.path().join("docs/results.md")).unwrap();
    assert_eq!(before, DOC);

    docs(dir.path(), false).success();
    let after = std::fs::read_to_string(dir.path().join("docs/results.md")).unwrap();
    assert!(!after.contains("99.99"), "{after}");
    // The fixture's stage5-ws-p1 on mission: p50s 34.4716 / 34.61 / 34.7484 → median 34.61;
    // the control's 41.28 / 34.61 = 1.193 (a ratio of medians).
    assert!(
        after.contains("| stage5-ws-p1 | mission | 34.61 |") && after.contains("1.193×"),
        "{after}"
    );
    assert!(
        after.contains("16 trials (1 compile_error, 1 failed, 1 incorrect, 11 ok, 2 ptxas_gate)"),
        "{after}"
    );
    assert!(
        after.contains("`benches/results/harness_vs_ncu.md` is written by `benches/evidence.sh`"),
        "{after}"
    );
    docs(dir.path(), true)
        .success()
        .stdout(predicate::str::contains("3 generated tables; 3 current"));
}

#[test]
fn a_results_file_is_inlined_once_committed() {
    let dir = project(DOC);
    std::fs::create_dir_all(dir.path().join("benches/results")).unwrap();
    std::fs::write(
        dir.path().join("benches/results/harness_vs_ncu.md"),
        "- command: `x`\n\n| a |\n|---|\n| 1 |\n",
    )
    .unwrap();
    docs(dir.path(), false).success();
    let after = std::fs::read_to_string(dir.path().join("docs/results.md")).unwrap();
    assert!(
        after.contains("From `benches/results/harness_vs_ncu.md`:\n\n- command: `x`\n\n| a |"),
        "{after}"
    );
}

/// The fixture's tune elite is the fastest correct kernel on every shape, by the harness;
/// ncu's profiles there record no GPU, so none counts.
#[test]
fn the_dispatch_table_ranks_each_shape_of_the_committed_records() {
    let dir = project("<!-- repro:table dispatch -->\n<!-- /repro:table -->\n");
    docs(dir.path(), false).success();
    let after = std::fs::read_to_string(dir.path().join("docs/results.md")).unwrap();
    assert!(
        after.contains("`sdpa_fp8`, on NVIDIA H100 80GB HBM3:"),
        "{after}"
    );
    assert!(
        after.contains("| mission | `tune-top1` 30.90 (30.65–31.15, n=3) | n/a: no profile counts (listed below) | n/a | +1.9% (`tune-top2`) |"),
        "{after}"
    );
    assert!(
        after.contains("ncu profiles not counted:\n\n- `stage2-baseline` on `mission`: its ncu profile does not record the GPU\n"),
        "{after}"
    );
    docs(dir.path(), true).success();
}

#[test]
fn a_malformed_marker_names_file_and_line() {
    let dir = project("x\n<!-- repro:table nope -->\n<!-- /repro:table -->\n");
    docs(dir.path(), true)
        .code(2)
        .stderr(predicate::str::contains(
            "docs/results.md:2: unknown table \"nope\"",
        ));
}

#[test]
fn the_repositorys_docs_are_current_with_its_committed_results() {
    docs(&source_root(), true)
        .success()
        .stdout(predicate::str::contains("current"));
}
