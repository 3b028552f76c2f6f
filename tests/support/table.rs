//! Reading `repro run`'s and `repro status`'s tables.
#![allow(dead_code)]

/// The line of `table` for `stage` (its name first); panics, showing the table, when there
/// is none.
pub fn stage_line<'a>(table: &'a str, stage: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(stage))
        .unwrap_or_else(|| panic!("no line for `{stage}`:\n{table}"))
}
