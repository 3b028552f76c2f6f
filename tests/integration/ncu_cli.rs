//! `repro ncu parse` on real captured exports, run through the binary.

use assert_cmd::Command;
use predicates::str::contains;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ncu")
        .join(name)
}

fn repro() -> Command {
    Command::cargo_bin("repro").unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = repro()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

#[test]
fn parse_raw_export_as_json() {
    let file = fixture("stage_mode.csv");
    insta::assert_snapshot!(stdout_of(&[
        "ncu",
        "parse",
        file.to_str().unwrap(),
        "--json"
    ]));
}

#[test]
fn parse_two_kernels_as_table() {
    let file = fixture("two_kernels.csv");
    insta::assert_snapshot!(stdout_of(&["ncu", "parse", file.to_str().unwrap()]));
}

#[test]
fn parse_details_export_as_table() {
    let file = fixture("details_full.csv");
    insta::assert_snapshot!(stdout_of(&["ncu", "parse", file.to_str().unwrap()]));
}

#[test]
fn damaged_export_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture("two_kernels.csv")).unwrap();
    let cut = dir.path().join("cut.csv");
    std::fs::write(&cut, &text[..text.len() - 3000]).unwrap();
    repro()
        .args(["ncu", "parse", cut.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(contains("cut.csv"))
        .stderr(contains("line 12"))
        .stderr(contains("truncated"));
}

#[test]
fn output_without_csv_says_what_ncu_said() {
    repro()
        .args([
            "ncu",
            "parse",
            fixture("no_kernel_matched.txt").to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(contains("No kernels were profiled"));
}

#[test]
fn a_missing_file_is_named_and_is_a_usage_error() {
    repro()
        .args(["ncu", "parse", "/nonexistent/x.csv"])
        .assert()
        .code(2)
        .stderr(contains("cannot read /nonexistent/x.csv"));
}
