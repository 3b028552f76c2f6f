//! The manifest: written again when it names no commit, another commit or is not YAML.

use super::*;

#[test]
fn a_manifest_of_uncommitted_sources_is_written_again_once_they_are_committed() {
    let repo = Repo::measured(&summarized());
    let what = "artifacts/manifest.yaml says the results were made from uncommitted sources (git.dirty is not false)";
    for which in [0, 1] {
        repo.write("notes.txt", &format!("draft {which}\n"));
        repo.run_ok(&["stage", "summary", "--force", "--with-deps"]);
        let action = repo.verify_names(what);
        assert_eq!(
            action,
            format!("commit (or remove) the changes `git status` lists outside artifacts/ and reports/, then write it again: `repro stage summary --force --with-deps` on a machine with `probe` (probe 1.0), then `repro commit`; or {GO_BACK}")
        );
        repo.follow(&action, which);
        repo.verify_passes();
    }
}

#[test]
fn a_manifest_naming_another_commit_than_the_sources_is_written_again() {
    let repo = Repo::measured(&summarized());
    // Measured before the source was committed, committed with the results afterwards.
    repo.on(Machine::Measuring);
    repo.write("src/kernel.txt", "# header\nline two\n");
    repo.run_ok(&["run"]);
    repo.sh("git commit -qam 'kernel and results'");
    repo.on(Machine::Here);
    let action = repo.verify_names("artifacts/manifest.yaml says the results were made from uncommitted sources (git.dirty is not false)");
    let rewrite = "write it again: `repro stage summary --force --with-deps` on a machine with `probe` (probe 1.0), then `repro commit`";
    assert_eq!(action, rewrite);
    let mismatch = repo.verify_names(&format!(
        "artifacts/manifest.yaml names commit {}, but there `src/kernel.txt` is not the file the results were made from",
        &manifest_commit(&repo)[..10]
    ));
    assert_eq!(mismatch, rewrite);
    repo.follow(&mismatch, 0);
    repo.verify_passes();
    // The commit it names rewritten: no longer in HEAD's history.
    repo.on(Machine::Measuring);
    repo.write("src/kernel.txt", "# header\nline three\n");
    repo.sh("git commit -qam kernel");
    repo.run_ok(&["run"]);
    repo.sh("git add -A && git commit -q --amend --no-edit");
    repo.on(Machine::Here);
    repo.fixed_by(
        &format!(
            "artifacts/manifest.yaml names commit {}: that commit is not in the history of HEAD",
            &manifest_commit(&repo)[..10]
        ),
        rewrite,
        0,
    );
}

fn manifest_commit(repo: &Repo) -> String {
    let text = std::fs::read_to_string(repo.root().join("artifacts/manifest.yaml")).unwrap();
    let manifest: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    manifest["git"]["sha"].as_str().unwrap().to_string()
}

#[test]
fn a_pipeline_that_writes_no_manifest_gets_a_summary_stage() {
    let repo = Repo::measured(PIPELINE);
    repo.fixed_by("there is no artifacts/manifest.yaml, and no stage writes one", "add a stage that writes it to pipeline.yaml, under `stages:` (`summary: {uses: summarize, needs: [report]}`), then commit `pipeline.yaml`, then run `repro run` on a machine with `probe` (probe 1.0), then `repro commit`", 0);
}

#[test]
fn a_manifest_that_is_not_yaml_is_written_again_by_its_stage_once_that_is_fixed() {
    let manifest_stage = "  manifest:\n    uses: cmd\n    needs: [report]\n    run: [sh, manifest.sh]\n    deps: [manifest.sh]\n    outs: [artifacts/manifest.yaml]\n";
    let repo = Repo::files(&format!("{PIPELINE}{manifest_stage}"));
    repo.write(
        "manifest.sh",
        "echo 'git: [unclosed' > artifacts/manifest.yaml\n",
    );
    repo.sh(GIT_INIT);
    repo.sh("git add -A && git commit -qm sources");
    repo.on(Machine::Measuring);
    repo.run_ok(&["run"]);
    repo.run_ok(&["commit", "-m", "results"]);
    repo.on(Machine::Here);
    let action = repo.verify_names(
        "artifacts/manifest.yaml, which stage `manifest` wrote, is not readable YAML",
    );
    assert_eq!(
        action,
        "make stage `manifest` write YAML there (a summarize stage renders its `manifest_template`), then commit the change, then write it again: `repro stage manifest --force --with-deps` on a machine with `probe` (probe 1.0), then `repro commit`"
    );
    // The change the first step asks for.
    repo.write(
        "manifest.sh",
        "printf 'git:\\n  sha: \"%s\"\\n  dirty: false\\n' \"$(git rev-parse HEAD)\" > artifacts/manifest.yaml\n",
    );
    repo.follow(&action, 0);
    repo.verify_passes();
}

/// The default checkout of GitHub Actions (`--depth 1`) lacks the sources' commit, just
/// below the results': verify says so and how to fetch it, never a re-summarize.
#[test]
fn a_shallow_clone_without_the_sources_commit_is_told_to_fetch_it() {
    let origin = Repo::measured(&summarized());
    origin.verify_passes();
    let clone = Repo::shallow_clone(&origin, 1);
    let what = format!(
        "artifacts/manifest.yaml names commit {}, which this shallow clone's history does not reach",
        &manifest_commit(&origin)[..10]
    );
    let action = clone.verify_names(&what);
    assert!(!action.contains("repro stage"), "{action}");
    clone.fixed_by(
        &what,
        "fetch the history it is in: `git fetch --deepen=1` (a clone with `--depth 2` has it; in GitHub Actions, `fetch-depth: 2`), then `repro verify` again",
        0,
    );
    Repo::shallow_clone(&origin, 2).verify_passes();
}
