//! The verdict line and the markdown of `repro diff`.

use super::*;

fn m(p50: f64, noise: f64) -> Option<Measure> {
    Some(Measure {
        p50_us: p50,
        noise_us: Some(noise),
    })
}

fn report(verdicts: &[Verdict]) -> DiffReport {
    DiffReport {
        rev: "HEAD~5".into(),
        commit: "abc".into(),
        gpus_before: vec!["H100".into()],
        gpus_after: vec!["H100".into()],
        min_rel_change: MIN_REL_CHANGE,
        rows: verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| Row {
                name: format!("v{i}"),
                kind: "variant".into(),
                shape: "mission".into(),
                before: m(10.0, 0.1),
                after: m(10.0, 0.1),
                change_pct: Some(0.0),
                verdict: *v,
            })
            .collect(),
        flipped_gates: vec![],
        ncu: vec![],
        lost_profiles: vec![],
    }
}

#[test]
fn a_diff_says_in_one_line_what_it_amounts_to_and_folds_rows_that_all_read_same() {
    let same = report(&[Verdict::Same; 55]);
    assert_eq!(
        same.verdict_line(),
        "**No change**: 55 SAME; no gate flipped."
    );
    let md = markdown(&same);
    assert!(md.contains("\n\n**No change**: 55 SAME"), "{md}");
    assert!(md.contains("<details><summary>Every row</summary>"), "{md}");

    let mixed = report(&[Verdict::Same, Verdict::Slower, Verdict::Faster]);
    assert_eq!(
        mixed.verdict_line(),
        "**❌ Regressed**: 1 SLOWER, 1 FASTER, 1 SAME; no gate flipped."
    );
    assert!(
        !markdown(&mixed).contains("<details>"),
        "rows that differ are shown"
    );
    let faster = report(&[Verdict::Faster, Verdict::Same]);
    assert!(faster
        .verdict_line()
        .starts_with("**✅ Faster, nothing slower**"));
}

#[test]
fn results_kept_from_another_build_are_counted_apart_and_fail_the_diff() {
    let kept = report(&[Verdict::NotMeasured, Verdict::Same, Verdict::Same]);
    assert_eq!(
        kept.verdict_line(),
        "**⏸ 1 not measured: run on a GPU**: 1 NOT MEASURED, 2 SAME; no gate flipped."
    );
    assert!(
        kept.regressed(),
        "a result that is not of this code fails the diff"
    );
    assert!(markdown(&kept).contains("| NOT MEASURED |"));
    let new = report(&[Verdict::New, Verdict::Removed]);
    assert_eq!(
        new.verdict_line(),
        "**Nothing slower**: 1 NEW, 1 REMOVED; no gate flipped."
    );
    assert!(!new.regressed());
}
