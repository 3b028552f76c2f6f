//! A missing or unreadable lock, and results made outside git.

use super::*;

#[test]
fn a_missing_or_unreadable_lock_is_restored_or_the_results_are_made() {
    let repo = Repo::measured(&summarized());
    std::fs::remove_file(repo.root().join("artifacts/repro.lock")).unwrap();
    let what = "there is no artifacts/repro.lock: no results were made";
    repo.fixed_by(
        what,
        "restore the committed results: `git checkout -- artifacts reports`",
        0,
    );
    // One that is not a lock.
    repo.write("artifacts/repro.lock", "stages: [unclosed\n");
    repo.fixed_by(
        "artifacts/repro.lock is not a lock repro can read (`repro status` says why)",
        "restore the committed results: `git checkout -- artifacts reports`",
        0,
    );
    // Nothing committed to go back to.
    let fresh = Repo::sources(&summarized());
    fresh.fixed_by(
        what,
        "run `repro run` on a machine with `probe`, then `repro commit`",
        0,
    );
    let fresh = Repo::sources(&summarized());
    fresh.write("artifacts/repro.lock", "stages: [unclosed\n");
    fresh.fixed_by(
        "artifacts/repro.lock is not a lock repro can read (`repro status` says why)",
        "delete it: `rm -- artifacts/repro.lock`, then run `repro run` on a machine with `probe`, then `repro commit`",
        0,
    );
}

#[test]
fn results_made_outside_git_are_written_again_once_the_project_is_committed() {
    let repo = Repo::files(&summarized());
    repo.on(Machine::Measuring);
    repo.run_ok(&["run"]);
    repo.on(Machine::Here);
    repo.fixed_by("artifacts/manifest.yaml names no git commit", "put the project in a git repository (`git init`) and commit its sources, then write it again: `repro stage summary --force --with-deps` on a machine with `probe` (probe 1.0), then `repro commit`", 0);
}
