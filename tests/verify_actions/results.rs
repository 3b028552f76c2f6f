//! Results and sources that no longer match the lock: restored, committed or made again.

use super::*;

#[test]
fn an_edited_result_is_restored_from_git() {
    let repo = Repo::measured(&summarized());
    repo.verify_passes();
    repo.write("reports/r.txt", "99\n");
    repo.fixed_by(
        "`reports/r.txt` is not the file the run wrote (edited, or left from another run)",
        "restore it: `git checkout -- reports/r.txt`",
        0,
    );
    std::fs::remove_file(repo.root().join("artifacts/m.txt")).unwrap();
    repo.fixed_by(
        "`artifacts/m.txt`, which the run wrote, is missing",
        "restore it: `git checkout -- artifacts/m.txt`",
        0,
    );
}

#[test]
fn an_edited_result_git_does_not_have_is_made_again_where_its_stage_can_run() {
    let repo = Repo::measured(&summarized());
    // New results, not committed yet, on the measuring machine.
    repo.on(Machine::Measuring);
    repo.write("src/kernel.txt", "# header\nline one\nline two\n");
    repo.sh("git commit -qam kernel");
    repo.run_ok(&["run"]);
    repo.write("reports/r.txt", "99\n");
    let action = repo.verify_names(
        "`reports/r.txt` is not the file the run wrote (edited, or left from another run)",
    );
    assert_eq!(action, "run `repro run`, then `repro commit`");
    repo.step("run `repro run`");
    repo.step("`repro commit`");
    repo.on(Machine::Here);
    repo.verify_passes();
    // Again, and an edit of what this machine cannot make: it is made where it can be.
    repo.on(Machine::Measuring);
    repo.write("src/kernel.txt", "# header\nline three\n");
    repo.sh("git commit -qam kernel");
    repo.run_ok(&["run"]);
    repo.on(Machine::Here);
    repo.write("artifacts/m.txt", "edited\n");
    let what = "`artifacts/m.txt` is not the file the run wrote (edited, or left from another run)";
    let action = repo.verify_names(what);
    assert_eq!(action, MEASURE_ELSEWHERE);
    // Rerunning here would keep the edited file: the trap the issue fell into.
    repo.run_ok(&["run"]);
    repo.verify_names(what);
    repo.follow(&action, 0);
    repo.verify_passes();
}

#[test]
fn a_file_no_stage_wrote_is_deleted() {
    let repo = Repo::measured(&summarized());
    repo.write("artifacts/extra.json", "{}\n");
    repo.fixed_by(
        "`artifacts/extra.json` is in the results but no stage wrote it",
        "delete it: `rm -- artifacts/extra.json`",
        0,
    );
    repo.write("reports/old.md", "old\n");
    repo.sh("git add reports/old.md && git commit -qm old");
    repo.fixed_by(
        "`reports/old.md` is in the results but no stage wrote it",
        "delete it: `git rm -- reports/old.md`",
        0,
    );
}

#[test]
fn a_stage_that_never_ran_is_run_where_it_can_run() {
    let repo = Repo::measured(&summarized());
    let pipeline = format!("{}{}", summarized(), extra_stage("extra", false));
    repo.write("pipeline.yaml", &pipeline);
    repo.sh("git commit -qam extra");
    repo.fixed_by(
        "stage `extra` has no results in artifacts/repro.lock",
        MEASURE_ELSEWHERE,
        0,
    );
    // Gone from pipeline.yaml, its results were written by no stage.
    repo.write("pipeline.yaml", &summarized());
    repo.sh("git commit -qam 'no extra'");
    repo.fixed_by(
        "`artifacts/extra.txt` is in the results but no stage wrote it",
        "delete it: `git rm -- artifacts/extra.txt`",
        0,
    );
    // One that needs what this machine lacks is run where it is.
    repo.write(
        "pipeline.yaml",
        &(summarized() + &extra_stage("probed", true)),
    );
    repo.sh("git commit -qam probed");
    repo.fixed_by(
        "stage `probed` has no results in artifacts/repro.lock",
        MEASURE_ELSEWHERE,
        0,
    );
}

#[test]
fn a_changed_source_is_restored_or_committed_and_measured_where_it_can_be() {
    let repo = Repo::measured(&summarized());
    let what = "stage `measure`: `src/kernel.txt` changed since its results were made";
    repo.write("src/kernel.txt", "# header\nline two\n");
    let action = repo.verify_names(what);
    assert_eq!(
        action,
        format!("restore it: `git checkout -- src/kernel.txt`; or commit `src/kernel.txt`, then {MEASURE_ELSEWHERE}")
    );
    // Rerunning here keeps the old results: verify would fail the same way.
    repo.run_ok(&["run"]);
    repo.verify_names(what);
    repo.follow(&action, 0);
    repo.verify_passes();
    repo.write("src/kernel.txt", "# header\nline two\n");
    repo.follow(&repo.verify_names(what), 1);
    repo.verify_passes();
    // Committed, it can only be measured again; `prep`'s rerun reaches `measure` too.
    repo.write("src/input.txt", "other input\n");
    repo.sh("git commit -qam input");
    repo.fixed_by(
        "stage `prep`: `src/input.txt` changed since its results were made",
        MEASURE_ELSEWHERE,
        0,
    );
    // A stage this machine can run, with all that follows it, reruns here.
    repo.write("src/report.sh", "wc -c < artifacts/m.txt > reports/r.txt\n");
    repo.sh("git commit -qam report");
    repo.fixed_by(
        "stage `report`: `src/report.sh` changed since its results were made",
        MEASURE_ELSEWHERE,
        0,
    );
}

#[test]
fn a_changed_spec_is_restored_or_committed_and_run_where_it_can_be() {
    let repo = Repo::measured(&summarized());
    repo.write(
        "pipeline.yaml",
        &summarized().replace("MODE: fast", "MODE: slow"),
    );
    repo.fixed_by("stage `measure`: its `env` changed since its results were made", format!("restore `pipeline.yaml`: `git checkout -- pipeline.yaml`; or commit `pipeline.yaml`, then {MEASURE_ELSEWHERE}"), 0);
    repo.write(
        "pipeline.yaml",
        &summarized().replace("[sh, src/report.sh]", "[sh, -e, src/report.sh]"),
    );
    let what = "stage `report`: its spec in pipeline.yaml changed since its results were made";
    repo.fixed_by(what, format!("restore `pipeline.yaml`: `git checkout -- pipeline.yaml`; or commit `pipeline.yaml`, then {MEASURE_ELSEWHERE}"), 1);
}

#[test]
fn results_made_from_other_upstream_results_are_restored_or_measured_again() {
    let repo = Repo::measured(BUILT);
    repo.verify_passes();
    // This machine's toolchain builds other bytes: a run here rebuilds (it has no cubin
    // yet) and keeps `measure`.
    repo.run_ok(&["run"]);
    let upstream = "stage `measure` was made from other results of `build` than those committed";
    let action = repo.verify_names(upstream);
    assert_eq!(action, format!("{MEASURE_ELSEWHERE}; or {GO_BACK}"));
    let cubin = "stage `measure` used a `.repro/cubins/k.bin` that `build` did not record";
    assert_eq!(repo.verify_names(cubin), action);
    repo.follow(&action, 1);
    repo.verify_passes();
    repo.run_ok(&["run"]);
    repo.follow(&repo.verify_names(upstream), 0);
    repo.verify_passes();
    // After a committed source change the committed results are not the sources' either:
    // going back to them is not offered.
    repo.write("src/kernel.txt", "# header\nline two\n");
    repo.sh("git commit -qam kernel");
    repo.run_ok(&["run"]);
    repo.fixed_by(upstream, MEASURE_ELSEWHERE, 0);
}
