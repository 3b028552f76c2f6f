//! The committed reports: correctness labels that name the record, where it was measured.

use super::*;
use repro::schema::RunStatus;

/// On the committed results, a "❌ correctness" label never stands bare: it names each
/// failing record, the threshold it exceeded and whether the timed records pass.
#[test]
fn the_committed_reports_correctness_labels_say_which_record_failed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let md = render_in(root, &pipeline, &configs, root).unwrap().markdown;
    let labels: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with('|') && l.contains("❌ correctness"))
        .collect();
    for line in &labels {
        assert!(
            line.contains("❌ correctness: ") && line.contains(" seed ") && line.contains(" > "),
            "{line}"
        );
    }
    eprintln!("{}", labels.join("\n"));
}

/// The committed report names the GPU in its first lines, says why a baseline's ❌ fails
/// no gate, lists the runs a baseline skipped inside a file that ran, explains an L2 hit
/// rate above 100 %, and its "no profile" note names only rows of its table.
#[test]
fn the_committed_report_says_where_it_was_measured_and_what_it_does_not_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(root).unwrap();
    let md = render_in(root, &pipeline, &configs, root).unwrap().markdown;
    let third = md.lines().nth(2).unwrap_or_default();
    assert!(third.starts_with("Measured on NVIDIA"), "{third}");

    let baseline_fails = md
        .lines()
        .any(|l| l.contains(" (baseline) |") && l.contains("❌"));
    assert_eq!(
        baseline_fails,
        md.contains("a baseline's correctness is shown, not gated"),
        "a baseline's ❌ is explained exactly when one is shown"
    );

    let skipped_runs: Vec<(String, String)> = artifacts
        .baselines
        .iter()
        .flatten()
        .flat_map(|f| {
            f.results
                .iter()
                .filter(|r| r.status == RunStatus::Skipped)
                .map(|r| (f.name.clone(), r.shape.clone()))
        })
        .collect();
    for (name, shape) in &skipped_runs {
        assert!(
            md.contains(&format!("baseline `{name}` on `{shape}`")),
            "{name} on {shape} is not in Skipped"
        );
    }
    if !skipped_runs.is_empty() {
        assert!(!md.contains("Nothing was skipped."));
    }

    let over_100 = artifacts
        .ncu
        .iter()
        .flat_map(|n| &n.targets)
        .any(|t| t.l2_hit_rate_pct.is_some_and(|p| p > 100.0));
    assert_eq!(over_100, md.contains("L2 hit % above 100 ("));

    for note in md.lines().filter_map(|l| {
        l.strip_prefix("TC util / Occupancy / DRAM: no profile of the primary shape for ")
    }) {
        for name in note.split(", ") {
            assert!(
                md.lines().any(|l| l.starts_with(&format!("| {name} "))
                    || l.starts_with(&format!("| **{name}**"))),
                "{name} is named by the profile note but has no row"
            );
        }
    }
}
