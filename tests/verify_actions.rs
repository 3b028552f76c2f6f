//! Every problem `repro verify` reports names the action that fixes it, and that action
//! works on the machine where verify ran. Each test makes one kind of problem in a `cmd`
//! pipeline in a temporary git repository, checks that verify exits 1 naming it, follows
//! the action the message names — literally: it runs the commands the message quotes, on
//! the machine the message names — and sees verify pass.
//!
//! Two machines share the checkout: this one, where the `probe` tool that `measure`
//! declares is missing (as a GPU is on a machine without one), and a measuring one that
//! has it. Moving between them drops `.repro/` (the machine-local state, tool versions
//! included), as a fresh clone on the other machine would have it.

#[path = "support/project.rs"]
mod project;

use project::Project;
use std::cell::Cell;
use std::path::Path;

const GIT_INIT: &str =
    "git init -q && git config user.name T && git config user.email t@example.com";
/// Commits everything but the results.
const COMMIT_SOURCES: &str = "git add -A -- . ':!artifacts' ':!reports' && git commit -qm sources";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Machine {
    /// No `probe`; its `build` stand-in writes other machine-local bytes (another toolchain).
    Here,
    /// Has `probe`.
    Measuring,
}

struct Repo {
    project: Project,
    machine: Cell<Machine>,
}

/// `prep` → `measure` (needs `probe`) → `report` → `summary`.
const PIPELINE: &str = r#"version: 1
stages:
  prep:
    uses: cmd
    run: [sh, -c, "cp src/input.txt artifacts/p.txt"]
    deps: [src/input.txt]
    outs: [artifacts/p.txt]
  measure:
    uses: cmd
    needs: [prep]
    run: [sh, -c, "grep -v '^#' src/kernel.txt | cat - artifacts/p.txt > artifacts/m.txt"]
    deps: [src/kernel.txt, artifacts/p.txt]
    outs: [artifacts/m.txt]
    env: {MODE: fast}
    tools:
      probe: [sh, tool.sh]
  report:
    uses: cmd
    needs: [measure]
    run: [sh, src/report.sh]
    deps: [src/report.sh, artifacts/m.txt]
    outs: [reports/r.txt]
"#;

/// The stage that writes the manifest.
const SUMMARY: &str = "  summary:\n    uses: summarize\n    needs: [report]\n";

/// A `build` whose machine-local output (a cubin's stand-in) differs between the two
/// machines, as nvcc's cubins do where its headers differ, feeding `measure`.
const BUILT: &str = r#"version: 1
stages:
  build:
    uses: cmd
    run: [sh, -c, "printf '%s%s' \"$(cat src/kernel.txt)\" \"$TOOLCHAIN\" > .repro/cubins/k.bin && grep -c . src/kernel.txt > artifacts/b.txt"]
    deps: [src/kernel.txt]
    outs: [.repro/cubins/k.bin, artifacts/b.txt]
  measure:
    uses: cmd
    needs: [build]
    run: [sh, -c, "wc -c < .repro/cubins/k.bin > artifacts/m.txt"]
    deps: [.repro/cubins/k.bin]
    outs: [artifacts/m.txt]
    tools:
      probe: [sh, tool.sh]
  summary:
    uses: summarize
    needs: [measure]
"#;

/// A `cmd` stage named `name` after `prep`, declaring `probe` when `probed`.
fn extra_stage(name: &str, probed: bool) -> String {
    let mut text = format!(
        "  {name}:\n    uses: cmd\n    needs: [prep]\n    run: [sh, -c, \"cp artifacts/p.txt artifacts/{name}.txt\"]\n    outs: [artifacts/{name}.txt]\n"
    );
    if probed {
        text.push_str("    tools:\n      probe: [sh, tool.sh]\n");
    }
    text
}

impl Repo {
    /// Sources committed, results measured on the measuring machine and committed; this
    /// machine checks them out.
    fn measured(pipeline: &str) -> Repo {
        let repo = Repo::sources(pipeline);
        repo.on(Machine::Measuring);
        repo.run_ok(&["run"]);
        repo.run_ok(&["commit", "-m", "results"]);
        repo.on(Machine::Here);
        repo
    }

    /// Sources committed; nothing run.
    fn sources(pipeline: &str) -> Repo {
        let repo = Repo::files(pipeline);
        repo.sh(GIT_INIT);
        repo.sh("git add -A && git commit -qm sources");
        repo
    }

    /// The project's files, outside git.
    fn files(pipeline: &str) -> Repo {
        let repo = Repo {
            project: Project::new(pipeline),
            machine: Cell::new(Machine::Here),
        };
        repo.write(".gitignore", ".repro/\n");
        repo.write("src/input.txt", "input\n");
        repo.write("src/kernel.txt", "# header\nline one\n");
        repo.write("src/report.sh", "wc -l < artifacts/m.txt > reports/r.txt\n");
        repo.write(
            "tool.sh",
            "[ -n \"$PROBE_HERE\" ] || exit 3\necho probe 1.0\n",
        );
        std::fs::create_dir_all(repo.root().join("reports")).unwrap();
        std::fs::create_dir_all(repo.root().join(".repro/cubins")).unwrap();
        repo
    }

    fn root(&self) -> &Path {
        self.project.root()
    }

    /// `git clone --depth DEPTH` of `origin`, checked out on this machine.
    fn shallow_clone(origin: &Repo, depth: u32) -> Repo {
        let project = Project::new("");
        std::fs::remove_file(project.root().join("pipeline.yaml")).unwrap();
        let clone = Repo {
            project,
            machine: Cell::new(Machine::Here),
        };
        clone.sh(&format!(
            "git clone -q --depth {depth} file://{} . && git config user.name T && git config user.email t@example.com",
            origin.root().display()
        ));
        clone
    }

    fn write(&self, rel: &str, text: &str) {
        self.project.write(rel, text)
    }

    /// Move to `machine`: its own machine-local state, none of the other's.
    fn on(&self, machine: Machine) {
        if self.machine.replace(machine) != machine {
            let _ = std::fs::remove_dir_all(self.root().join(".repro"));
            std::fs::create_dir_all(self.root().join(".repro/cubins")).unwrap();
        }
    }

    /// `repro ARGS` on the current machine: exit code and output.
    fn repro(&self, args: &[&str]) -> (i32, String) {
        let mut cmd = self.project.command(args);
        cmd.env_remove("PROBE_HERE");
        match self.machine.get() {
            Machine::Measuring => cmd.env("PROBE_HERE", "1").env("TOOLCHAIN", "a"),
            Machine::Here => cmd.env("TOOLCHAIN", "b"),
        };
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    }

    fn run_ok(&self, args: &[&str]) -> String {
        let (code, text) = self.repro(args);
        assert_eq!(
            code,
            0,
            "repro {args:?} on {:?}:\n{text}",
            self.machine.get()
        );
        text
    }

    /// A shell command in the project; it must succeed.
    fn sh(&self, line: &str) {
        let out = std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(self.root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn verify_passes(&self) {
        let (code, text) = self.repro(&["verify"]);
        assert_eq!(code, 0, "{text}");
        assert!(text.starts_with("verified: "), "{text}");
    }

    /// Verify exits 1 and reports `what`; the action it names for it.
    fn verify_names(&self, what: &str) -> String {
        let (code, text) = self.repro(&["verify"]);
        assert_eq!(code, 1, "{text}");
        let head = format!("  - {what}: ");
        let line = text
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no `{what}` in\n{text}"));
        line[head.len()..].to_string()
    }

    /// Verify exits 1 naming `what` with `action`; following alternative `which` of it
    /// makes verify pass.
    fn fixed_by(&self, what: &str, action: impl AsRef<str>, which: usize) {
        let action = action.as_ref();
        assert_eq!(self.verify_names(what), action);
        self.follow(action, which);
        self.verify_passes();
    }

    /// Do what alternative `which` (0-based, alternatives are `; or `-separated) of
    /// `action` says, step by step (`, then `-separated), on the machine it names.
    fn follow(&self, action: &str, which: usize) {
        let alternatives: Vec<&str> = action.split("; or ").collect();
        let chosen = alternatives
            .get(which)
            .unwrap_or_else(|| panic!("no alternative {which} in `{action}`"));
        for step in chosen.split(", then ") {
            self.step(step);
        }
        self.on(Machine::Here);
    }

    fn step(&self, step: &str) {
        if step.contains(" on a machine with ") {
            self.on(Machine::Measuring);
        }
        let quoted: Vec<&str> = step.split('`').skip(1).step_by(2).collect();
        if let Some(file) = step.strip_prefix("commit `") {
            let file = &file[..file.find('`').unwrap()];
            self.sh(&format!(
                "git add -- {file} && git commit -qm 'commit {file}'"
            ));
        } else if step.starts_with("commit (or remove) the changes `git status` lists")
            || step == "commit the change"
        {
            self.sh(COMMIT_SOURCES);
        } else if step.starts_with("put the project in a git repository (`git init`)") {
            self.sh(GIT_INIT);
            self.sh(COMMIT_SOURCES);
        } else if step.starts_with("make stage ") {
            // What to change in the stage is the test's to do, before it follows the rest.
        } else if step.starts_with("add a stage that writes it to pipeline.yaml, under `stages:`") {
            let pipeline = std::fs::read_to_string(self.root().join("pipeline.yaml")).unwrap();
            self.write("pipeline.yaml", &format!("{pipeline}  {}\n", quoted[1]));
        } else {
            let commands: Vec<&str> = quoted
                .into_iter()
                .filter(|q| ["repro ", "git ", "rm "].iter().any(|c| q.starts_with(c)))
                .collect();
            assert!(!commands.is_empty(), "nothing to do in `{step}`");
            for command in commands {
                match command.strip_prefix("repro ") {
                    Some(args) => {
                        self.run_ok(&args.split(' ').collect::<Vec<_>>());
                    }
                    None => self.sh(command),
                }
            }
        }
    }
}

/// [`PIPELINE`] with its summary.
fn summarized() -> String {
    format!("{PIPELINE}{SUMMARY}")
}

const MEASURE_ELSEWHERE: &str =
    "run `repro run` on a machine with `probe` (probe 1.0), then `repro commit`";
const GO_BACK: &str = "go back to the committed results: `git checkout -- artifacts reports`";

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
