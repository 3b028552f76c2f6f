//! GPU test (`REPRO_GPU_TESTS=1`; otherwise it prints a "skipped:" line): on a GPU of the
//! model the committed results were measured on, a fresh clone's `repro run` measures
//! nothing that is current and changes no committed byte. `$REPRO_SOURCE_ROOT` must be a git
//! repository whose HEAD holds results committed by `repro commit` on this GPU model (as
//! benches/gpu_commit.sh leaves it); the test clones it.

mod common;
#[path = "support/git.rs"]
mod git;
#[path = "support/table.rs"]
mod table;

use common::*;
use git::git;
use table::stage_line;

#[test]
fn a_fresh_clone_on_the_gpu_the_results_came_from_changes_no_committed_byte() {
    if !gpu_tests_enabled(
        "a_fresh_clone_on_the_gpu_the_results_came_from_changes_no_committed_byte",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = source_root();
    git(
        dir.path(),
        &["clone", "-q", &source.to_string_lossy(), "clone"],
    );
    let root = dir.path().join("clone");
    let (status, out) = run_repro(&root, &["run", "-q"]);
    assert!(status.success(), "{out}");
    let changed = git(&root, &["status", "--porcelain"]);
    assert_eq!(changed, "", "the run rewrote committed files:\n{out}");
    for stage in ["bench", "evo-tune", "evo-tune-rmsnorm", "ncu-profile"] {
        let line = stage_line(&out, stage);
        assert!(line.contains("up-to-date"), "{stage} ran again:\n{out}");
    }
    let (status, out) = run_repro(&root, &["status", "--exit-code"]);
    assert!(status.success(), "{out}");
}
