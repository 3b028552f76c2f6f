//! `repro propose patches` over the shipped patch folders (kernels/proposals for
//! kernels/sdpa_fp8_mma.cu, kernels/proposals/ws for kernels/sdpa_fp8_ws.cu: each patch
//! applies to its kernel, alone and stacked), and `repro promote` on a project whose tune
//! artifacts name a proposed source: the source under kernels/, the entries appended with
//! pipeline.yaml's comments kept, and refusals that change nothing.

use assert_cmd::Command;
use repro::tune::proposer::answer::{Answer, CandidateAnswer};
use repro::tune::proposer::store::{apply, diff, digest, short};
use std::path::Path;

fn repro(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("repro").unwrap();
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

fn trial(n: u32, patch: Option<&str>, status: &str) -> serde_json::Value {
    serde_json::json!({"trial": n, "generation": 1, "parents": [], "config": {}, "source": null,
        "patch": patch, "note": "", "status": status, "p50_us": null, "reason": ""})
}

/// Each shipped patch folder and the kernel its patches are written against.
const PATCH_FOLDERS: [(&str, &str); 2] = [
    ("kernels/proposals", "kernels/sdpa_fp8_mma.cu"),
    ("kernels/proposals/ws", "kernels/sdpa_fp8_ws.cu"),
];

/// The shipped patches of `folder`, in name order (the order `repro propose patches` reads
/// them).
fn shipped_patches(repo: &Path, folder: &str) -> Vec<String> {
    let mut paths: Vec<_> = std::fs::read_dir(repo.join(folder))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "patch"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

fn brief(kernel: &str, lineage_patch: Option<&str>, proposals: Vec<serde_json::Value>) -> String {
    let mut best = trial(3, None, "ok");
    best["rank"] = 1.into();
    best["p50_us_by_shape"] = serde_json::json!({});
    best["registers"] = serde_json::Value::Null;
    best["spill_bytes"] = serde_json::Value::Null;
    best["lineage"] = serde_json::json!([trial(3, lineage_patch, "ok")]);
    best["diff"] = serde_json::Value::Null;
    best["ncu"] = serde_json::Value::Null;
    serde_json::json!({"repro_brief": 1, "generation": 2, "max_candidates": 8,
        "kernel": {"name": "k", "path": kernel, "entry": "f", "base_defines": {}, "source": ""},
        "space": {}, "objective": "", "elite": [best], "recent_failures": [], "proposals": proposals})
    .to_string()
}

fn candidates(stdout: &[u8]) -> Vec<CandidateAnswer> {
    let answer: Answer = serde_json::from_slice(stdout).unwrap();
    answer.entries().into_iter().map(Result::unwrap).collect()
}

#[test]
fn the_shipped_patches_apply_and_are_proposed_then_stacked() {
    for (folder, kernel) in PATCH_FOLDERS {
        proposed_then_stacked(folder, kernel);
    }
}

fn proposed_then_stacked(folder: &str, kernel_path: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let kernel = std::fs::read_to_string(repo.join(kernel_path)).unwrap();
    let out = repro(repo)
        .args(["propose", "patches", "--dir", folder])
        .write_stdin(brief(kernel_path, None, vec![]))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{folder}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = candidates(&out.stdout);
    assert_eq!(fresh.len(), shipped_patches(repo, folder).len(), "{folder}");
    assert!(fresh.len() >= 2, "{folder}: at least two patches");
    let mut stacked = kernel.clone();
    for c in &fresh {
        assert_eq!(c.parent, Some(3));
        assert!(!c.note.as_deref().unwrap().is_empty());
        let patch = c.patch.as_deref().unwrap();
        assert_ne!(apply(&kernel, patch).unwrap(), kernel, "{folder}");
        stacked = apply(&stacked, patch).unwrap();
    }
    let d: Vec<String> = fresh
        .iter()
        .map(|c| short(&digest(c.patch.as_deref().unwrap())).to_string())
        .collect();

    // Once the best carries the first, the others that passed are stacked on it, once.
    let mut tried = vec![trial(4, Some(&d[0]), "ok"), trial(5, Some(&d[1]), "ok")];
    tried.extend(
        d[2..]
            .iter()
            .zip(6..)
            .map(|(p, n)| trial(n, Some(p), "incorrect")),
    );
    let out = repro(repo)
        .args(["propose", "patches", "--dir", folder])
        .write_stdin(brief(kernel_path, Some(&d[0]), tried))
        .output()
        .unwrap();
    let stack = candidates(&out.stdout);
    assert_eq!(
        stack.len(),
        1,
        "{folder}: only the second patch passed and is not in the best's lineage"
    );
    assert_eq!(short(&digest(stack[0].patch.as_deref().unwrap())), d[1]);
}

#[test]
fn every_shipped_patch_applies_on_top_of_every_other() {
    // The proposer stacks any passed patch on any best trial's source, so each pair must apply
    // in both orders (hunks that touch the same lines would fail as proposal errors on a GPU).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (folder, kernel) in PATCH_FOLDERS {
        let kernel = std::fs::read_to_string(repo.join(kernel)).unwrap();
        let patches = shipped_patches(repo, folder);
        for (i, first) in patches.iter().enumerate() {
            let base = apply(&kernel, first).unwrap();
            for (j, second) in patches.iter().enumerate().filter(|(j, _)| *j != i) {
                let both = apply(&base, second).unwrap_or_else(|e| {
                    panic!("{folder}: patch {j} does not apply on top of patch {i}: {e}")
                });
                assert_ne!(
                    both, base,
                    "{folder}: patch {j} changed nothing on top of patch {i}"
                );
            }
        }
    }
}

#[test]
fn no_shipped_patch_touches_its_kernels_error_rules() {
    // The tune's constraints are written from the kernel's `#error` rules: a patch that
    // changed one would let its trials hit a compile error the space no longer rules out.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (folder, _) in PATCH_FOLDERS {
        for patch in shipped_patches(repo, folder) {
            let touched = patch
                .lines()
                .filter(|l| {
                    l.starts_with(['-', '+']) && !l.starts_with("---") && !l.starts_with("+++")
                })
                .find(|l| l.contains("#error"));
            assert_eq!(
                touched,
                None,
                "{folder}: {}",
                patch.lines().next().unwrap_or_default()
            );
        }
    }
}

const PIPELINE: &str = "version: 1   # a comment that stays\nworkload:\n  op: sdpa_fp8\n  shapes:\n    small: {B: 1, H: 1, S: 32, D: 64}\n  primary: small\n\nkernels:\n  k: {source: kernels/k.cu, entry: f}   # the tuned kernel\n\nvariants:\n  base: {kernel: k, defines: {A: 1, C: 5}}\n\nstages:\n  evo-tune:\n    uses: tune\n    base: base\n    space: {A: [1, 2], B: [1, 2]}\n";
const KERNEL: &str = "// kernel\nextern \"C\" __global__ void f() {}\n";

#[test]
fn promote_writes_the_source_and_appends_entries_or_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("kernels")).unwrap();
    std::fs::create_dir_all(root.join("artifacts/tune/proposals")).unwrap();
    std::fs::write(root.join("kernels/k.cu"), KERNEL).unwrap();
    std::fs::write(root.join("pipeline.yaml"), PIPELINE).unwrap();
    let evolved = KERNEL.replace("// kernel", "// kernel, evolved");
    let s = short(&digest(&evolved)).to_string();
    // A fresh clone: no .repro/, the elite's diff in artifacts.
    std::fs::write(
        root.join(format!("artifacts/tune/proposals/{s}.patch")),
        diff(KERNEL, &evolved, "kernels/k.cu"),
    )
    .unwrap();
    let header = "trial,generation,timestamp,config,status,registers,spill_bytes,max_abs_err,max_err_over_ref_std,p50_us,correctness_pass,note,parents,source,patch\n";
    let log = format!("{header}1,0,t,\"{{\"\"A\"\":1,\"\"B\"\":2}}\",ok,,,,,10.0,true,,,,\n2,1,t,\"{{\"\"A\"\":2,\"\"B\"\":1}}\",ok,,,,,8.0,true,proposed: x,1,{s},abcd\n3,1,t,\"{{\"\"A\"\":2,\"\"B\"\":2}}\",incorrect,,,,,,false,,1,,\n");
    std::fs::write(root.join("artifacts/tune/tune_log.csv"), log).unwrap();

    repro(root)
        .args(["promote", &s[..8], "--name", "k-evo"])
        .assert()
        .success()
        .stdout(predicates::str::contains("promoted trial 2"));
    assert_eq!(
        std::fs::read_to_string(root.join("kernels/k-evo.cu")).unwrap(),
        evolved
    );
    let yaml = std::fs::read_to_string(root.join("pipeline.yaml")).unwrap();
    assert!(yaml.contains("version: 1   # a comment that stays\n"));
    assert!(yaml.contains("# the tuned kernel\n  k-evo: {source: kernels/k-evo.cu, entry: f}   # promoted from tune trial 2 (source "), "{yaml}");
    assert!(
        yaml.contains(
            "  k-evo: {kernel: k-evo, defines: {A: 2, B: 1, C: 5}}   # promoted from tune trial 2"
        ),
        "{yaml}"
    );
    repro(root).arg("status").assert().success();

    repro(root)
        .args(["promote", "1", "--name", "plain"])
        .assert()
        .success();
    let yaml = std::fs::read_to_string(root.join("pipeline.yaml")).unwrap();
    assert!(
        yaml.contains("  plain: {kernel: k, defines: {A: 1, B: 2, C: 5}}"),
        "{yaml}"
    );
    assert!(!root.join("kernels/plain.cu").exists());

    // Refusals change nothing.
    let before = std::fs::read_to_string(root.join("pipeline.yaml")).unwrap();
    for (args, says) in [
        (
            vec!["promote", "2", "--name", "k-evo"],
            "already a variant or kernel",
        ),
        (vec!["promote", "7", "--name", "x"], "no trial 7"),
        (
            vec!["promote", "3", "--name", "x"],
            "did not pass (status `incorrect`)",
        ),
        (
            vec!["promote", "zz", "--name", "x"],
            "expected a trial number",
        ),
        (
            vec!["promote", "1", "--name", "a b"],
            "not a usable variant name",
        ),
    ] {
        repro(root)
            .args(&args)
            .assert()
            .code(1)
            .stderr(predicates::str::contains(says));
    }
    std::fs::write(
        root.join("kernels/k.cu"),
        KERNEL.replace("void f()", "void f(int)"),
    )
    .unwrap();
    repro(root)
        .args(["promote", "2", "--name", "y"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("changed since the tune"));
    assert!(!root.join("kernels/y.cu").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("pipeline.yaml")).unwrap(),
        before
    );
}
