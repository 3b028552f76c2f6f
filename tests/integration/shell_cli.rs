//! `repro completions <shell>` and `repro man`: made from the command line's definitions, so
//! they name every subcommand of this binary.

use assert_cmd::Command;

fn repro(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("repro")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = repro(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for command in ["run", "status", "verify", "completions", "man"] {
            assert!(script.contains(command), "{shell} lacks `{command}`");
        }
    }
    let bad = repro(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is bad usage");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("bash"));
}

#[test]
fn the_man_page_is_roff_and_dir_writes_one_page_per_subcommand() {
    let out = repro(&["man"]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH repro 1"),
        "{page}"
    );
    assert!(page.contains("verify"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("man1");
    let out = repro(&["man", "--dir", man1.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    for page in [
        "repro.1",
        "repro-run.1",
        "repro-status.1",
        "repro-completions.1",
    ] {
        let text = std::fs::read_to_string(man1.join(page)).unwrap();
        assert!(text.contains(".TH"), "{page}");
    }
}
