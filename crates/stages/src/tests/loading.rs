//! Reading a pipeline without validating it, against loading it with the built-in kinds.

/// [`repro_pipeline::load::parse`] is the first half of [`crate::load`]: the same errors
/// where the text does not parse, and none for what only validation refuses (a dep that
/// does not exist).
#[test]
fn parse_fails_as_load_does_on_text_and_leaves_the_checks_to_load() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipeline.yaml");
    let absent_dep = "version: 1\nstages:\n  a: {uses: cmd, run: [\"true\"], deps: [absent.txt]}\n";
    std::fs::write(&file, absent_dep).unwrap();
    assert!(repro_pipeline::load::parse(&file)
        .unwrap()
        .stages
        .contains_key("a"));
    let refused = crate::load(&file).err().expect("a dep that does not exist");
    assert!(
        refused
            .to_string()
            .contains("dep `absent.txt` of stage `a` does not exist"),
        "{refused}"
    );
    std::fs::write(&file, "version: 1\nstage: {}\n").unwrap();
    let parsed = repro_pipeline::load::parse(&file)
        .expect_err("an unknown key")
        .to_string();
    assert_eq!(parsed, crate::load(&file).err().unwrap().to_string());
    assert!(
        parsed.contains("pipeline.yaml:2:1: error: unknown key `stage`"),
        "{parsed}"
    );
}
