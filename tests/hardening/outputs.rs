//! Outputs: killed leftovers, restores and links that never lead out of the project.

use super::*;

#[test]
fn class5_a_process_a_stage_detaches_is_killed_before_its_outputs_are_sealed() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"setsid sh -c 'echo $$ > detached; sleep 2; echo late >> o' & while [ ! -s detached ]; do sleep 0.05; done; echo done > o\"], outs: [o]}\n",
    );
    p.expect(&["run"], 0);
    // Killed when the stage ended, before its output was recorded.
    assert_gone(p.read("detached").trim());
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(p.read("o"), "done\n");
    assert_eq!(p.states()["s"], "up-to-date");
}

#[test]
fn class7_a_restore_never_follows_a_symlink_out_of_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o"), "theirs").unwrap();
    std::fs::write(outside.path().join("keep"), "keep").unwrap();
    // A first run writes d/o in a real folder.
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [sh, -c, \"mkdir -p d && echo mine > d/o\"], outs: [d/o]}\n",
    );
    p.expect(&["run"], 0);
    // Now the stage swaps its output's folder for a link out of the project, then fails.
    std::fs::write(
        p.root().join("pipeline.yaml"),
        format!(
            "version: 1\nstages:\n  s: {{uses: cmd, run: [sh, -c, \"rm -rf d && ln -s {} d && exit 3\"], outs: [d/o]}}\n",
            outside.path().display()
        ),
    )
    .unwrap();
    let out = p.expect(&["run"], 1);
    assert!(out.contains("removed the symlink `d`"), "{out}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("o")).unwrap(),
        "theirs"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("keep")).unwrap(),
        "keep"
    );
    assert!(!p.root().join("d").is_symlink());
    assert_eq!(
        p.read("d/o"),
        "mine\n",
        "the previous output is back where it was"
    );
}

#[test]
fn class12_a_dangling_symlink_as_an_output_is_named() {
    let p = Project::new(
        "version: 1\nstages:\n  s: {uses: cmd, run: [ln, -s, nowhere, o], outs: [o]}\n",
    );
    let out = p.expect(&["run"], 1);
    assert!(
        out.contains("the stage's output `o` is a symlink to `nowhere`, which does not exist"),
        "{out}"
    );
    assert!(
        !p.root().join("o").is_symlink(),
        "the failed stage's output is removed"
    );
}

#[test]
fn round4_a_a_dep_resolving_to_the_whole_project_is_refused_however_it_is_written() {
    let p = Project::new("version: 1\nstages: {}\n");
    std::fs::create_dir(p.root().join(".git")).unwrap();
    let root = p.root().canonicalize().unwrap();
    let name = root.file_name().unwrap().to_str().unwrap().to_string();
    let cases = [
        (root.display().to_string(), "resolves to the project folder"),
        (format!("../{name}"), "resolves to the project folder"),
        (
            format!("{}/.git", root.display()),
            "resolves to `.git` in the project",
        ),
        ("..".to_string(), "resolves to a folder holding the project"),
    ];
    for (dep, says) in cases {
        p.write(
            "pipeline.yaml",
            &format!(
                "version: 1\nstages:\n  s: {{uses: cmd, run: [\"true\"], deps: [\"{dep}\"]}}\n"
            ),
        );
        let out = p.expect(&["run"], 2);
        assert!(
            out.contains(&format!("dep `{dep}` of stage `s` {says}")),
            "{out}"
        );
        assert!(!p.root().join("artifacts").exists(), "{dep}: something ran");
    }
    // A file of the project written by its absolute path is a dep as before.
    p.write("d", "d");
    p.write(
        "pipeline.yaml",
        &format!(
            "version: 1\nstages:\n  s: {{uses: cmd, run: [\"true\"], deps: [\"{}/d\"]}}\n",
            root.display()
        ),
    );
    p.expect(&["run"], 0);
    assert_eq!(p.states()["s"], "up-to-date");
}

#[test]
fn round4_e_links_among_the_results_are_named_never_followed() {
    let p = Project::new(
        "version: 1\nstages:\n  a: {uses: cmd, run: [sh, -c, \"mkdir -p artifacts/out && echo a > artifacts/out/a.txt\"], outs: [artifacts/out]}\n",
    );
    p.write("src.rs", "source");
    p.expect(&["run"], 0);
    for (link, target) in [
        ("artifacts/a", "."),
        ("artifacts/b", "."),
        ("artifacts/loop", ".."),
        ("artifacts/root", "/"),
        ("artifacts/out/root", "/"),
    ] {
        std::os::unix::fs::symlink(target, p.root().join(link)).unwrap();
    }
    // The output folder's walk records the link, by its target, without going to `/`.
    let status = p.expect(&["status"], 0);
    assert!(
        status.contains("output `artifacts/out/root` added"),
        "{status}"
    );
    let verify = p.expect(&["verify"], 1);
    for link in ["artifacts/a", "artifacts/loop", "artifacts/root"] {
        assert!(
            verify.contains(&format!("remove the link: `rm -- {link}`")),
            "{verify}"
        );
    }
    // Nothing through a link, nothing outside the results; the real file is not "missing".
    assert!(!verify.contains("artifacts/loop/"), "{verify}");
    assert!(!verify.contains("src.rs"), "{verify}");
    assert!(!verify.contains("is missing"), "{verify}");
}
