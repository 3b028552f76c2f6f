//! Outputs staged, backed up, committed, rolled back and recovered, on a real folder.

use super::*;

fn outs() -> Vec<PathBuf> {
    vec![PathBuf::from("out/a.txt")]
}

#[test]
fn backup_restores_previous_outputs_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("out/a.txt"), "old").unwrap();
    let guard = prepare(root, "s", &outs(), true).unwrap();
    assert!(!root.join("out/a.txt").exists());
    std::fs::write(root.join("out/a.txt"), "half").unwrap();
    guard.rollback(root).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
        "old"
    );
    assert!(!root.join(".repro/backup/s").exists());
}

#[test]
fn a_commit_of_staged_outputs_cut_short_is_undone_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("out/a.txt"), "old a").unwrap();
    std::fs::write(root.join("out/b.txt"), "old b").unwrap();
    // A kill after a.txt was swapped and while b.txt was aside: what the list and the
    // folders hold at that moment (c.txt had no previous version and came in new).
    let staging = root.join(".repro/staging");
    std::fs::create_dir_all(staging.join("s.old/out")).unwrap();
    std::fs::rename(root.join("out/a.txt"), staging.join("s.old/out/a.txt")).unwrap();
    std::fs::write(root.join("out/a.txt"), "new a").unwrap();
    std::fs::rename(root.join("out/b.txt"), staging.join("s.old/out/b.txt")).unwrap();
    std::fs::write(root.join("out/c.txt"), "new c").unwrap();
    std::fs::write(
        staging.join("s.moved"),
        "present out/a.txt\nabsent out/c.txt\npresent out/b.txt\npresent ../escape\n",
    )
    .unwrap();
    let recovery = recover(root, None, None).unwrap();
    assert_eq!(recovery.restored, ["s"]);
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    assert_eq!(read("out/a.txt").as_deref(), Some("old a"));
    assert_eq!(read("out/b.txt").as_deref(), Some("old b"));
    assert_eq!(read("out/c.txt"), None, "it had no previous version");
    assert!(!staging.exists());
}

#[test]
fn staged_outputs_move_in_only_on_commit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("out/a.txt"), "old").unwrap();
    let guard = prepare(root, "s", &outs(), false).unwrap();
    std::fs::write(guard.write_root(root).join("out/a.txt"), "new").unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
        "old"
    );
    guard.commit(root, &outs(), &[]).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
        "new"
    );
}

#[test]
fn commit_refuses_a_missing_output() {
    let dir = tempfile::tempdir().unwrap();
    let guard = prepare(dir.path(), "s", &outs(), false).unwrap();
    assert!(guard.commit(dir.path(), &outs(), &[]).is_err());
}

#[test]
fn an_optional_output_left_unwritten_removes_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("out/a.txt"), "old").unwrap();
    let guard = prepare(root, "s", &outs(), false).unwrap();
    guard.commit(root, &outs(), &outs()).unwrap();
    assert!(!root.join("out/a.txt").exists());
}

/// An output whose backup path is too long for the OS (`ENAMETOOLONG`), while the
/// output itself is not: its backup fails whoever runs the test (root included).
fn unbackupable(root: &Path) -> PathBuf {
    // The live path is 4085 bytes, its backup (under `.repro/backup/s/files/`) more
    // than PATH_MAX (4096).
    let len = 4085 - root.as_os_str().len() - 1;
    let mut rel = PathBuf::new();
    while len - rel.as_os_str().len() > 250 {
        rel.push("d".repeat(190));
    }
    rel.push("o".repeat(len - rel.as_os_str().len() - 1));
    std::fs::create_dir_all(root.join(&rel).parent().unwrap()).unwrap();
    std::fs::write(root.join(&rel), "o2").unwrap();
    rel
}

#[test]
fn a_failed_backup_puts_back_what_it_moved_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("d1")).unwrap();
    std::fs::write(root.join("d1/o1"), "o1").unwrap();
    let outputs = vec![PathBuf::from("d1/o1"), unbackupable(root)];
    let err = prepare(root, "s", &outputs, true).unwrap_err();
    assert!(
        format!("{err:#}").contains("cannot back up output"),
        "{err:#}"
    );
    assert_eq!(std::fs::read_to_string(root.join("d1/o1")).unwrap(), "o1");
    assert_eq!(
        std::fs::read_to_string(root.join(&outputs[1])).unwrap(),
        "o2"
    );
    assert!(!root.join(".repro/backup/s").exists());
    // Nothing for the next run to "restore" either.
    assert_eq!(
        recover(root, Some(Path::new("pipeline.yaml")), None).unwrap(),
        Recovery::default()
    );
    assert_eq!(
        std::fs::read_to_string(root.join(&outputs[1])).unwrap(),
        "o2"
    );
}

#[test]
fn a_run_killed_while_backing_up_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for o in ["a", "b"] {
        std::fs::write(root.join(o), o).unwrap();
    }
    // As a run killed after moving `a` aside but before moving `b` leaves it; `c` did
    // not exist and the stage never ran.
    let backup = root.join(".repro/backup/s");
    std::fs::create_dir_all(backup.join("files")).unwrap();
    std::fs::write(backup.join("outs"), "present a\npresent b\nabsent c\n").unwrap();
    std::fs::rename(root.join("a"), backup.join("files/a")).unwrap();
    let recovery = recover(root, Some(Path::new("pipeline.yaml")), None).unwrap();
    assert_eq!(recovery.restored, ["s"]);
    assert_eq!(std::fs::read_to_string(root.join("a")).unwrap(), "a");
    assert_eq!(std::fs::read_to_string(root.join("b")).unwrap(), "b");
    assert!(!backup.exists());
}

#[test]
fn recovery_refuses_paths_outside_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x"), "keep").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let backup = root.join(".repro/backup/s");
    std::fs::create_dir_all(&backup).unwrap();
    let abs = outside.path().join("x");
    std::fs::write(
        backup.join("outs"),
        format!(
            "absent {}\npresent ../x\nabsent .git\nabsent pipeline.yaml\n{}\n",
            abs.display(),
            abs.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join("pipeline.yaml"), "version: 1").unwrap();
    let recovery = recover(root, Some(Path::new("pipeline.yaml")), None).unwrap();
    assert_eq!(recovery.refused.len(), 5, "{recovery:?}");
    assert_eq!(std::fs::read_to_string(&abs).unwrap(), "keep");
    assert!(root.join(".git").exists() && root.join("pipeline.yaml").exists());
}

#[test]
fn recovers_a_backup_left_by_a_killed_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::write(root.join("out/a.txt"), "old").unwrap();
    let _guard = prepare(root, "s", &outs(), true).unwrap();
    std::fs::write(root.join("out/a.txt"), "partial").unwrap();
    assert_eq!(
        recover(root, Some(Path::new("pipeline.yaml")), None)
            .unwrap()
            .restored,
        ["s"]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/a.txt")).unwrap(),
        "old"
    );
}
