//! How a test that cannot run here says so. libtest hides what a passing test prints with
//! `eprintln!`, so this writes to stderr directly and the line reaches the test log (CI's
//! too): a skipped test never passes silently.

pub fn say_skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}
