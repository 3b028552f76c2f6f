//! Kernel targets that are one measurement: a tune elite member that is a shipped variant
//! (the same cubin, the same defines read by the launch, the same workload and shape) has
//! the same key ([`super::reuse`]). The first is profiled; the others copy its record, saying
//! whose it is, so one kernel never shows two figures and ncu never profiles it twice.
//! A baseline call that its script says repeats another is recorded the same way
//! ([`profiled_once_as`]).

use super::targets::{Program, Target};
use super::Profiled;
use crate::reuse::Key;
use repro_schema::NcuTarget;
use std::path::Path;

/// For each target, the earlier kernel target with the same key (`None`: it is profiled, or
/// kept, on its own). Baseline calls and targets without a key have none.
pub(super) fn of(targets: &[Target], keys: &[Option<Key>]) -> Vec<Option<usize>> {
    let kernel = |i: usize| !matches!(targets[i].program, Program::Script(_));
    (0..targets.len())
        .map(|i| {
            let key = keys[i].as_ref().filter(|_| kernel(i))?;
            (0..i).find(|&j| kernel(j) && keys[j].as_ref() == Some(key))
        })
        .collect()
}

/// `twin`'s record (and CSVs) under `target`'s name, saying whose it is.
pub(super) fn copy(twin: &Profiled, target: &Target) -> Profiled {
    let (record, csv) = (&twin.record, &twin.csv);
    let why = "the same cubin, launch and shape";
    let (record, csv) = if record.status.is_ok() {
        profiled_once_as(record, csv, target, why)
    } else {
        let mut copy = relabelled(record, target);
        copy.reason = Some(match &record.reason {
            Some(failed) => format!("as {} ({why}): {failed}", record.target),
            None => format!("as {} ({why})", record.target),
        });
        (copy, csv.clone())
    };
    Profiled {
        record,
        csv,
        time_csv: twin.time_csv.clone(),
        full_csv: twin.full_csv.clone(),
    }
}

/// The profiled `record` (and its CSV) of the same kernel on the same inputs, under
/// `target`'s name, with `reason: profiled once as <record's target>, the same kernel on the
/// same inputs: <why>` (the report's note is the part before the colon).
pub(super) fn profiled_once_as(
    record: &NcuTarget,
    csv: &str,
    target: &Target,
    why: &str,
) -> (NcuTarget, String) {
    let mut copy = relabelled(record, target);
    copy.reason = Some(format!(
        "profiled once as {}, the same kernel on the same inputs: {why}",
        record.target
    ));
    (copy, csv.to_string())
}

fn relabelled(record: &NcuTarget, target: &Target) -> NcuTarget {
    NcuTarget {
        target: target.label.clone(),
        variant: target.variant.clone(),
        ..record.clone()
    }
}

/// The full-set report kept for `from` (`.repro/ncu/<label>.ncu-rep`), copied for `to`
/// when there is one.
pub(super) fn copy_report(root: &Path, from: &str, to: &str) -> std::io::Result<()> {
    let dir = root.join(".repro/ncu");
    let saved = dir.join(format!("{from}.ncu-rep"));
    if !saved.is_file() {
        return Ok(());
    }
    std::fs::copy(saved, dir.join(format!("{to}.ncu-rep"))).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::targets::status_target;
    use repro_schema::RunStatus;

    fn target(label: &str, program: Program) -> Target {
        Target {
            label: label.into(),
            variant: label.into(),
            entry: "f".into(),
            program,
            workload: "w".into(),
            shape: "s".into(),
        }
    }

    fn key(cubin: &str) -> Option<Key> {
        Some(Key::from([("cubin_sha256".to_string(), cubin.to_string())]))
    }

    #[test]
    fn a_later_kernel_target_with_an_earlier_key_is_its_twin() {
        let script = Program::Script(vec!["python3".into()]);
        let targets = [
            target("a", Program::Variant("a".into())),
            target("b", Program::Variant("b".into())),
            target("top1", Program::Variant("top1".into())),
            target("top2", Program::Variant("top2".into())),
            target("base@s", script.clone()),
            target("base2@s", script),
            target("nokey", Program::Variant("x".into())),
        ];
        let keys = [
            key("1"),
            key("2"),
            key("2"),
            key("2"),
            key("3"),
            key("3"),
            None,
        ];
        // top1 and top2 copy b; the baseline calls never pair (their script says which
        // calls repeat); a target without a key has no twin.
        assert_eq!(
            of(&targets, &keys),
            [None, None, Some(1), Some(1), None, None, None]
        );
    }

    #[test]
    fn the_copy_says_whose_profile_it_is() {
        let profiled = NcuTarget {
            kernel_time_us: Some(7.7),
            reason: None,
            ..status_target("ws", "ws", "f", RunStatus::Ok, String::new())
        };
        let top = target("top2", Program::Variant("tune-top2".into()));
        let twin = Profiled {
            record: profiled,
            csv: "csv".into(),
            time_csv: "time".into(),
            full_csv: Some("full".into()),
        };
        let Profiled {
            record: copy,
            csv,
            time_csv,
            full_csv,
        } = copy(&twin, &top);
        assert_eq!(
            (copy.target.as_str(), copy.variant.as_str()),
            ("top2", "top2")
        );
        assert_eq!(copy.kernel_time_us, Some(7.7));
        assert_eq!(csv, "csv");
        assert_eq!(time_csv, "time");
        assert_eq!(full_csv.as_deref(), Some("full"));
        assert!(copy
            .reason
            .unwrap()
            .starts_with("profiled once as ws, the same kernel on the same inputs:"));

        let failed = status_target("ws", "ws", "f", RunStatus::Failed, "ncu timed out".into());
        let failed = Profiled {
            record: failed,
            csv: String::new(),
            time_csv: String::new(),
            full_csv: None,
        };
        let copy = super::copy(&failed, &top).record;
        assert_eq!(copy.status, RunStatus::Failed);
        assert_eq!(
            copy.reason.as_deref(),
            Some("as ws (the same cubin, launch and shape): ncu timed out")
        );
    }
}
