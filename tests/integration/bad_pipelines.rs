//! Every file in `tests/bad_pipelines/*.yaml` must be refused with exit code 2 and exactly
//! the message in the `.expected` file beside it, and nothing may run.

use assert_cmd::Command;
use std::path::Path;

#[test]
fn each_bad_pipeline_gets_its_expected_message() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad_pipelines");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 20, "the bad pipeline folder lost its cases");
    let mut failures = Vec::new();
    for case in &cases {
        let project = tempfile::tempdir().unwrap();
        std::fs::copy(case, project.path().join("pipeline.yaml")).unwrap();
        for command in [&["dag"][..], &["run"][..]] {
            let out = Command::cargo_bin("repro")
                .unwrap()
                .args(command)
                .current_dir(project.path())
                .output()
                .unwrap();
            let expected = std::fs::read_to_string(case.with_extension("expected")).unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.code() != Some(2) || stderr != expected {
                failures.push(format!(
                    "{} (repro {}): exit {:?}\n--- expected\n{expected}--- got\n{stderr}",
                    case.display(),
                    command[0],
                    out.status.code()
                ));
            }
        }
        let left: Vec<_> = std::fs::read_dir(project.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["pipeline.yaml"], "{}: something ran", case.display());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
