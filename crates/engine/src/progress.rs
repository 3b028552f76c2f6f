//! What a run shows while it works: on a terminal, one line per running stage with a
//! spinner, its latest message and elapsed time (indicatif); otherwise plain lines. A
//! stage that ends leaves the live area (its line is printed above it once), so a redraw
//! costs the running stages, not every stage so far. With
//! `--quiet`, only errors: no progress, notes or `warning:` lines. The final table is
//! printed by the runner.

use super::display;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// The run's display.
pub struct Progress {
    multi: Option<MultiProgress>,
    quiet: bool,
}

/// One stage's line.
#[derive(Clone)]
pub struct Line {
    bar: Option<(ProgressBar, MultiProgress)>,
}

impl Progress {
    /// Spinners when stderr is a terminal and not `quiet`.
    pub fn new(quiet: bool) -> Progress {
        let multi = (!quiet && std::io::stderr().is_terminal())
            .then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        Progress { multi, quiet }
    }

    /// A stage starts.
    pub fn start(&self, name: &str) -> Line {
        match &self.multi {
            Some(multi) => {
                let bar = multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template(
                        "{spinner:.cyan} {prefix:.bold} {wide_msg} {elapsed:>4}",
                    )
                    .expect("valid template"),
                );
                bar.set_prefix(display::safe(name).into_owned());
                bar.set_message("starting");
                bar.enable_steady_tick(Duration::from_millis(100));
                Line {
                    bar: Some((bar, multi.clone())),
                }
            }
            None => {
                if !self.quiet {
                    display::err(&format!("▶ {name}"));
                }
                Line { bar: None }
            }
        }
    }

    /// An informational line (up-to-date stages, notes); hidden with `--quiet`.
    pub fn info(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &self.multi {
            Some(multi) => {
                let _ = multi.println(display::safe(text));
            }
            None => display::err(text),
        }
    }

    /// A warning (a stage skipped for a missing tool, a record not written); hidden with
    /// `--quiet`, like the notes: the final table still says what was skipped and why.
    pub fn warn(&self, text: &str) {
        if !self.quiet {
            self.error(text);
        }
    }

    /// A failure; always shown.
    pub fn error(&self, text: &str) {
        match &self.multi {
            Some(multi) => {
                multi.suspend(|| display::err(text));
            }
            None => display::err(text),
        }
    }
}

impl Line {
    /// The stage's latest message (`RunCtx.progress`).
    pub fn set(&self, message: &str) {
        if let Some((bar, _)) = &self.bar {
            bar.set_message(display::safe(message).into_owned());
        }
    }

    /// The stage ended: leave its line with the outcome and time.
    pub fn finish(&self, name: &str, outcome: &str, elapsed: Duration, quiet: bool) {
        let text = format!(
            "{} {name} {outcome} ({:.1}s)",
            mark(outcome),
            elapsed.as_secs_f64()
        );
        match &self.bar {
            Some((bar, multi)) => {
                bar.finish_and_clear();
                multi.remove(bar);
                let _ = multi.println(display::safe(&text));
            }
            None if !quiet => display::err(&text),
            None => {}
        }
    }
}

/// The glyph of a stage's outcome label (`passed`, `skipped: …`, `gate failed: …`).
pub fn mark(outcome: &str) -> &'static str {
    if outcome.starts_with("passed") {
        "✓"
    } else if outcome.starts_with("skipped") {
        "⏭"
    } else if outcome.starts_with("up-to-date") {
        "·"
    } else if outcome.starts_with("kept") {
        "⏸"
    } else if outcome.starts_with("not run") {
        "–"
    } else {
        "✗"
    }
}

impl Progress {
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }
}

#[cfg(test)]
mod tests {
    use super::mark;

    #[test]
    fn skipped_has_its_own_glyph() {
        assert_eq!(mark("passed"), "✓");
        assert_eq!(mark("skipped: ncu not found"), "⏭");
        assert_eq!(mark("gate failed: ptxas"), "✗");
        assert_eq!(mark("FAILED"), "✗");
        assert_eq!(
            mark("kept: measured on an H100; not re-run here: no GPU"),
            "⏸"
        );
        assert_eq!(mark("up-to-date"), "·");
        assert_eq!(mark("not run: stopped by --fail-fast"), "–");
    }
}
