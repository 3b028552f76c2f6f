//! The last test target of the `repro` package under `cargo test` (its targets run in name
//! order, and the library has no doctests to run after it; the workspace's library crates'
//! unit tests come next): one line that counts the tests skipped in this run, by what they
//! lacked, and names what runs them. Reads and clears the log `tests/support/skip.rs`
//! appends to.

#[path = "support/skip.rs"]
mod skip;

use skip::Need;

fn main() {
    let Some(path) = skip::log_path() else {
        println!("skipped: unknown (cannot locate the skip log)");
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    // Lines of other cargo runs (an interrupted one, a single `--test`) do not count.
    let run = std::os::unix::process::parent_id().to_string();
    let needs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(pid, _)| *pid == run)
        .filter_map(|(_, rest)| rest.split('\t').next())
        .collect();
    println!("{}", summary(&needs));
}

/// `skipped: 37 tests (31 need a GPU: ...; 6 need Slurm: ...)`, or `skipped: none`.
fn summary(needs: &[&str]) -> String {
    if needs.is_empty() {
        return "skipped: none (every test ran)".into();
    }
    let parts: Vec<String> = Need::ALL
        .iter()
        .filter_map(|need| {
            let n = needs.iter().filter(|x| **x == need.name()).count();
            (n > 0).then(|| need.counted(n))
        })
        .collect();
    let total = needs.len();
    format!(
        "skipped: {total} test{} ({})",
        if total == 1 { "" } else { "s" },
        parts.join("; ")
    )
}
