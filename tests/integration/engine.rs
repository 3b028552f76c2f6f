//! The engine's rules, each checked by running the real binary on `cmd` pipelines in a
//! temporary project.

use crate::project;
use project::{assert_gone, send_signal, Project};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn states(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// prep (dep data/in.txt) → count; other is independent (param + env).
const THREE: &str = r#"version: 1
stages:
  prep:
    uses: cmd
    run: [sh, -c, "tr a-z A-Z < data/in.txt > out/prep.txt"]
    deps: [data/in.txt]
    outs: [out/prep.txt]
  count:
    uses: cmd
    needs: [prep]
    run: "wc -c < out/prep.txt > out/count.txt"
    shell: true
    deps: [out/prep.txt]
    outs: [out/count.txt]
  other:
    uses: cmd
    run: [sh, -c, "echo $GREETING $REPRO_PARAM_n > out/other.txt"]
    params: {n: 1}
    env: {GREETING: hi}
    outs: [out/other.txt]
"#;

fn three() -> Project {
    let p = Project::new(THREE);
    p.write("data/in.txt", "hello\n");
    p
}

#[test]
fn runs_stale_stages_then_skips_up_to_date_ones() {
    let p = three();
    assert_eq!(
        p.states(),
        states(&[
            ("prep", "never-run"),
            ("count", "never-run"),
            ("other", "never-run")
        ])
    );
    let out = p.expect(&["run"], 0);
    assert!(out.contains("passed"), "{out}");
    assert_eq!(p.read("out/prep.txt"), "HELLO\n");
    assert_eq!(p.read("out/count.txt").trim(), "6");
    assert_eq!(p.read("out/other.txt"), "hi 1\n");
    let out = p.expect(&["run"], 0);
    assert!(out.contains("prep up-to-date (fingerprint"), "{out}");
    assert!(!out.contains("passed"), "{out}");
    assert_eq!(
        p.states(),
        states(&[
            ("prep", "up-to-date"),
            ("count", "up-to-date"),
            ("other", "up-to-date")
        ])
    );
}

#[test]
fn touching_a_dep_without_changing_it_is_not_stale() {
    let p = three();
    p.expect(&["run"], 0);
    let file = std::fs::File::options()
        .write(true)
        .open(p.root().join("data/in.txt"))
        .unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .unwrap();
    assert_eq!(p.states()["prep"], "up-to-date");
}

#[test]
fn editing_a_dep_makes_exactly_its_dependants_stale() {
    let p = three();
    p.expect(&["run"], 0);
    p.write("data/in.txt", "changed\n");
    assert_eq!(
        p.states(),
        states(&[
            ("prep", "stale"),
            ("count", "stale"),
            ("other", "up-to-date")
        ])
    );
    let status = p.expect(&["status"], 0);
    assert!(status.contains("dep `data/in.txt` changed"), "{status}");
    assert!(status.contains("upstream `prep` changed"), "{status}");
    let out = p.expect(&["run"], 0);
    assert!(out.contains("other up-to-date"), "{out}");
    assert_eq!(p.read("out/prep.txt"), "CHANGED\n");
}

#[test]
fn editing_a_param_or_env_makes_only_that_stage_stale_and_names_it() {
    let p = three();
    p.expect(&["run"], 0);
    p.write(
        "pipeline.yaml",
        &THREE.replace("params: {n: 1}", "params: {n: 2}"),
    );
    assert_eq!(
        p.states(),
        states(&[
            ("prep", "up-to-date"),
            ("count", "up-to-date"),
            ("other", "stale")
        ])
    );
    assert!(p
        .expect(&["status"], 0)
        .contains("param `n` changed: 1 → 2"));
    p.write(
        "pipeline.yaml",
        &THREE.replace("GREETING: hi", "GREETING: hello"),
    );
    assert!(p
        .expect(&["status"], 0)
        .contains("env `GREETING` changed: hi → hello"));
}

#[test]
fn editing_a_needed_stage_makes_its_dependants_stale() {
    let p = three();
    p.expect(&["run"], 0);
    p.write("pipeline.yaml", &THREE.replace("tr a-z A-Z", "tr a-z A-Z "));
    let status = p.expect(&["status"], 0);
    assert!(status.contains("command changed"), "{status}");
    assert_eq!(
        p.states(),
        states(&[
            ("prep", "stale"),
            ("count", "stale"),
            ("other", "up-to-date")
        ])
    );
}

#[test]
fn a_modified_output_makes_its_stage_stale() {
    let p = three();
    p.expect(&["run"], 0);
    p.write("out/other.txt", "tampered\n");
    assert!(p
        .expect(&["status"], 0)
        .contains("output `out/other.txt` modified"));
    p.expect(&["run"], 0);
    assert_eq!(p.read("out/other.txt"), "hi 1\n");
}

#[test]
fn the_lock_is_byte_identical_for_the_same_inputs() {
    let a = three();
    a.expect(&["run"], 0);
    let first = a.read("artifacts/repro.lock");
    a.expect(&["run", "--force"], 0);
    assert_eq!(a.read("artifacts/repro.lock"), first);
    let b = three();
    b.expect(&["run", "-j", "3"], 0);
    assert_eq!(
        b.read("artifacts/repro.lock"),
        first,
        "another checkout, same bytes"
    );
    let dated = first.as_bytes().windows(10).any(|w| {
        w.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
    });
    assert!(!dated, "no dates in the lock:\n{first}");
}

const FLAKY: &str = r#"version: 1
stages:
  flaky:
    uses: cmd
    run: [sh, -c, "echo partial > out.txt; echo working; if [ \"$REPRO_PARAM_mode\" = fail ]; then echo boom >&2; exit 3; fi; if [ \"$REPRO_PARAM_mode\" = hang ]; then sleep 300 & echo $! > gc.pid; wait; fi; echo good > out.txt"]
    params: {mode: ok}
    timeout: 1s
    outs: [out.txt]
  after:
    uses: cmd
    needs: [flaky]
    run: [sh, -c, "cat out.txt > after.txt"]
    deps: [out.txt]
    outs: [after.txt]
  apart:
    uses: cmd
    run: [sh, -c, "echo apart > apart.txt"]
    outs: [apart.txt]
"#;

fn flaky(mode: &str) -> Project {
    let p = Project::new(FLAKY);
    p.expect(&["run"], 0);
    assert_eq!(p.read("out.txt"), "good\n");
    p.write(
        "pipeline.yaml",
        &FLAKY.replace("mode: ok", &format!("mode: {mode}")),
    );
    p
}

#[test]
fn a_failing_stage_leaves_outputs_and_lock_and_skips_only_its_dependants() {
    let p = flaky("fail");
    p.write(
        "pipeline.yaml",
        &FLAKY
            .replace("mode: ok", "mode: fail")
            .replace("echo apart", "echo apart2"),
    );
    let lock = p.read("artifacts/repro.lock");
    let out = p.expect(&["run"], 1);
    assert!(out.contains("`sh` exited with code 3"), "{out}");
    assert!(out.contains("boom"), "the log tail is shown: {out}");
    assert!(out.contains("not run: needs `flaky`"), "{out}");
    assert_eq!(p.read("out.txt"), "good\n");
    assert_eq!(
        p.read("apart.txt"),
        "apart2\n",
        "the independent stage still ran"
    );
    let new_lock = p.read("artifacts/repro.lock");
    assert_ne!(new_lock, lock, "apart was recorded");
    assert_eq!(
        new_lock
            .split("flaky:")
            .nth(1)
            .unwrap()
            .split("apart:")
            .next(),
        lock.split("flaky:").nth(1).unwrap().split("apart:").next(),
        "flaky's entry is untouched"
    );
    assert!(p.read(".repro/logs/flaky.log").contains("boom"));
    assert_eq!(p.states()["flaky"], "failed");
    assert!(p.expect(&["status"], 0).contains("exited with code 3"));
}

#[test]
fn a_failed_stage_reads_failed_until_its_inputs_change() {
    let p = flaky("fail");
    p.expect(&["stage", "flaky"], 1);
    assert_eq!(p.states()["flaky"], "failed");
    // Back to the inputs of its last good run: up to date. New inputs, not yet run: stale
    // (the edit may be the fix), no longer failed.
    p.write("pipeline.yaml", FLAKY);
    assert_eq!(p.states()["flaky"], "up-to-date");
    p.write("pipeline.yaml", &FLAKY.replace("mode: ok", "mode: other"));
    assert_eq!(p.states()["flaky"], "stale");
    p.expect(&["stage", "flaky"], 0);
    assert_eq!(p.states()["flaky"], "up-to-date");
}

#[test]
fn fail_fast_stops_the_rest() {
    let p = flaky("fail");
    p.write(
        "pipeline.yaml",
        &FLAKY
            .replace("mode: ok", "mode: fail")
            .replace("echo apart", "echo apart2"),
    );
    let out = p.expect(&["run", "--fail-fast"], 1);
    assert!(out.contains("not run: stopped by --fail-fast"), "{out}");
    assert_eq!(p.read("apart.txt"), "apart\n");
}

#[test]
fn a_timed_out_stage_is_killed_and_leaves_outputs_intact() {
    let p = flaky("hang");
    let lock = p.read("artifacts/repro.lock");
    let out = p.expect(&["run", "--fail-fast"], 1);
    assert!(out.contains("timed out after 1s"), "{out}");
    assert_eq!(p.read("out.txt"), "good\n");
    assert_eq!(p.read("artifacts/repro.lock"), lock);
    assert_gone(p.read("gc.pid").trim());
}

fn interrupt_leaves_everything_intact(signal: i32) {
    let p = flaky("hang");
    p.write(
        "pipeline.yaml",
        &FLAKY
            .replace("mode: ok", "mode: hang")
            .replace("timeout: 1s", "timeout: 10m"),
    );
    let lock = p.read("artifacts/repro.lock");
    let child = p.spawn(&["run"]);
    p.wait_for("gc.pid");
    std::thread::sleep(Duration::from_millis(100));
    send_signal(child.id(), signal);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert_gone(p.read("gc.pid").trim());
    assert_eq!(p.read("out.txt"), "good\n");
    assert_eq!(p.read("artifacts/repro.lock"), lock);
    assert!(!p.root().join(".repro/backup/flaky").exists());
}

#[test]
fn sigint_kills_the_process_group_restores_outputs_and_exits_130() {
    interrupt_leaves_everything_intact(2);
}

#[test]
fn sigterm_does_the_same() {
    interrupt_leaves_everything_intact(15);
}

const GATED: &str = r#"version: 1
stages:
  slow:
    uses: cmd
    run: [sh, -c, "echo $$ > started; until [ -f go ]; do sleep 0.02; done; echo done > slow.txt"]
    outs: [slow.txt]
"#;

#[test]
fn a_second_run_is_refused_with_the_holder_or_waits() {
    let p = Project::new(GATED);
    let first = p.spawn(&["run"]);
    p.wait_for("started");
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("another repro is running in this project"),
        "{out}"
    );
    assert!(out.contains(&format!("pid {}", first.id())), "{out}");
    assert!(out.contains("--wait"), "{out}");
    let waiting = p.spawn(&["run", "--wait"]);
    std::thread::sleep(Duration::from_millis(300));
    p.write("go", "");
    assert!(first.wait_with_output().unwrap().status.success());
    let second = waiting.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{text}");
    assert!(text.contains("waiting for the project lock"), "{text}");
}

#[test]
fn a_lock_left_by_a_killed_run_is_taken_over_and_its_outputs_restored() {
    let p = Project::new(GATED);
    p.write("go", "");
    p.expect(&["run"], 0);
    std::fs::remove_file(p.root().join("go")).unwrap();
    std::fs::remove_file(p.root().join("started")).unwrap();
    p.write("pipeline.yaml", &GATED.replace("echo done", "echo again"));
    let first = p.spawn(&["run"]);
    p.wait_for("started");
    send_signal(first.id(), 9);
    first.wait_with_output().unwrap();
    let stage_pid = p.read("started");
    send_signal(stage_pid.trim().parse().unwrap(), 9);
    assert!(
        !p.root().join("slow.txt").exists(),
        "the killed run had moved the output aside"
    );
    let out = p.expect(&["status"], 0);
    assert!(out.contains("slow"), "{out}");
    p.write("pipeline.yaml", GATED);
    let out = p.expect(&["run"], 0);
    assert!(out.contains("took over the project lock"), "{out}");
    assert!(
        out.contains("restored the previous outputs of stage `slow`"),
        "{out}"
    );
    assert_eq!(p.read("slow.txt"), "done\n");
    assert!(out.contains("slow up-to-date"), "{out}");
}

#[test]
fn an_output_through_a_symlink_out_of_the_project_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [touch, link/x], outs: [link/x]}\n",
    );
    std::os::unix::fs::symlink(outside.path(), p.root().join("link")).unwrap();
    let out = p.expect(&["run"], 2);
    assert!(
        out.contains("pipeline.yaml:3:47: error: output `link/x` of stage `a` leads outside the project directory through the symlink `link`"),
        "{out}"
    );
    assert!(!outside.path().join("x").exists());
}

#[test]
fn dry_run_plans_and_changes_nothing() {
    let p = three();
    p.expect(&["run"], 0);
    p.write("data/in.txt", "changed\n");
    let before = p.snapshot();
    let out = p.expect(&["run", "--dry-run"], 0);
    assert!(
        out.contains("run   prep   dep `data/in.txt` changed"),
        "{out}"
    );
    assert!(
        out.contains("run   count  upstream `prep` changed"),
        "{out}"
    );
    assert!(out.contains("skip  other  up-to-date"), "{out}");
    assert_eq!(p.snapshot(), before);
}

#[test]
fn stage_refuses_a_stale_upstream_unless_with_deps() {
    let p = three();
    p.expect(&["run"], 0);
    p.write("data/in.txt", "changed\n");
    let out = p.expect(&["stage", "count"], 1);
    assert!(
        out.contains("stage `count` needs `prep`, which is stale (dep `data/in.txt` changed)"),
        "{out}"
    );
    assert!(out.contains("--with-deps"), "{out}");
    p.expect(&["stage", "count", "--with-deps"], 0);
    assert_eq!(p.read("out/count.txt").trim(), "8");
    assert_eq!(p.states()["other"], "up-to-date");
}

#[test]
fn stage_force_and_downstream() {
    let p = three();
    p.expect(&["run"], 0);
    let out = p.expect(&["stage", "prep", "--force", "--downstream"], 0);
    assert!(out.contains("prep") && out.contains("count"), "{out}");
    assert!(!out.contains("other"), "{out}");
    let out = p.expect(&["stage", "prep", "--force"], 0);
    assert!(out.contains("passed"), "{out}");
    let out = p.expect(&["stage", "cuont"], 2);
    assert!(
        out.contains("no stage named `cuont`") && out.contains("did you mean `count`?"),
        "{out}"
    );
}

/// `timed` writes new bytes each run (like a benchmark); `fixed` the same bytes (like a
/// build); neither dependant declares the file as a dep: the engine follows the results.
const RERUNS: &str = r#"version: 1
stages:
  timed:
    uses: cmd
    run: [sh, -c, "date +%s%N > out/timed.txt"]
    outs: [out/timed.txt]
  fixed:
    uses: cmd
    run: [sh, -c, "echo same > out/fixed.txt"]
    outs: [out/fixed.txt]
  report-timed:
    uses: cmd
    needs: [timed]
    run: [sh, -c, "cp out/timed.txt out/report-timed.txt"]
    outs: [out/report-timed.txt]
  report-fixed:
    uses: cmd
    needs: [fixed]
    run: [sh, -c, "cp out/fixed.txt out/report-fixed.txt"]
    outs: [out/report-fixed.txt]
"#;

#[test]
fn a_forced_rerun_with_new_results_makes_its_dependants_stale() {
    let p = Project::new(RERUNS);
    p.expect(&["run"], 0);
    p.expect(&["stage", "timed", "fixed", "--force"], 0);
    let st = p.states();
    assert_eq!(st["report-timed"], "stale", "{st:?}");
    assert_eq!(st["report-fixed"], "up-to-date", "{st:?}");
    let out = p.expect(&["status"], 0);
    assert!(out.contains("upstream `timed` changed"), "{out}");
    p.expect(&["run"], 0);
    assert_eq!(p.read("out/report-timed.txt"), p.read("out/timed.txt"));
    assert!(p.states().values().all(|s| s == "up-to-date"));
}

#[test]
fn independent_stages_run_in_parallel_with_jobs() {
    // Each stage waits for the other's marker: this finishes only if both run at once.
    let p = Project::new(
        r#"version: 1
stages:
  a: {uses: cmd, run: [sh, -c, "touch A; until [ -f B ]; do sleep 0.02; done; touch a.out"], outs: [a.out], timeout: 20s}
  b: {uses: cmd, run: [sh, -c, "touch B; until [ -f A ]; do sleep 0.02; done; touch b.out"], outs: [b.out], timeout: 20s}
"#,
    );
    p.expect(&["run", "-j", "2"], 0);
    assert!(p.root().join("a.out").exists() && p.root().join("b.out").exists());
}

#[test]
fn cmd_stages_see_repro_bin_and_root_and_log_their_output() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"echo $REPRO_BIN > bin.txt; echo $REPRO_ROOT > root.txt; echo to-log\"], outs: [bin.txt, root.txt]}\n",
    );
    p.expect(&["run"], 0);
    assert!(p.read("bin.txt").trim().ends_with("repro"));
    assert_eq!(
        Path::new(p.read("root.txt").trim()).canonicalize().unwrap(),
        p.root().canonicalize().unwrap()
    );
    assert_eq!(p.read(".repro/logs/a.log"), "to-log\n");
}

#[test]
fn a_missing_declared_output_fails_the_stage() {
    let p =
        Project::new("version: 1\nstages:\n  a: {uses: cmd, run: [echo, hi], outs: [never.txt]}\n");
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("did not write its declared output `never.txt`"),
        "{out}"
    );
    assert!(!p.root().join("artifacts/repro.lock").exists());
}

#[test]
fn dag_renders_text_mermaid_and_dot() {
    let p = three();
    let text = p.expect(&["dag"], 0);
    assert!(text.contains("count  (cmd)  ← prep"), "{text}");
    let mermaid = p.expect(&["dag", "--mermaid"], 0);
    assert!(
        mermaid.starts_with("flowchart LR") && mermaid.contains("s0 --> s1"),
        "{mermaid}"
    );
    let dot = p.expect(&["dag", "--dot"], 0);
    assert!(dot.contains("\"prep\" -> \"count\";"), "{dot}");
}

#[test]
fn build_and_tune_need_their_stage_kind() {
    let p = three();
    let out = p.expect(&["build"], 2);
    assert!(out.contains("has no stage with `uses: build`"), "{out}");
    let out = p.expect(&["tune", "--budget", "3"], 2);
    assert!(out.contains("has no stage with `uses: tune`"), "{out}");
}

#[test]
fn ctrl_c_while_waiting_for_the_lock_exits_130() {
    let p = Project::new(GATED);
    let first = p.spawn(&["run"]);
    p.wait_for("started");
    let waiting = p.spawn(&["run", "--wait"]);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(waiting.id(), 2);
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p.write("go", "");
    assert!(first.wait_with_output().unwrap().status.success());
}
