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

mod lock;
mod manifest;
mod results;

#[path = "../support/project.rs"]
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
