//! Text from outside repro — a stage's output, file names, a dep or a param someone wrote, a
//! lock someone edited — on its way to a terminal: control characters are shown, never sent
//! (an escape sequence could clear the screen, set the window title or hide what follows),
//! and `status` cuts lines to a width.
//!
//! Every line repro prints goes through [`out`] or [`err`] (or [`safe`], for the progress
//! spinners), so no command can forget: the safety is on the output path, not in each
//! command. They also never panic where `println!` would: a write error is returned (stdout)
//! or remembered (stderr), and a reader that went away (`repro run | head -1`) is
//! remembered in [`output_closed`], so a run can wind down and record what it finished.

use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout or stderr found its reader gone (`EPIPE`).
static CLOSED: AtomicBool = AtomicBool::new(false);

/// How control character `c` is shown: `^[` for ESC, `^G` for BEL, `^?` for DEL,
/// `\u{9b}` for a C1 control; `None` for a character that is not a control character.
fn shown(c: char) -> Option<String> {
    match c {
        '\u{7f}' => Some("^?".to_string()),
        c if (c as u32) < 0x20 => Some(format!("^{}", char::from(c as u8 + 0x40))),
        c if c.is_control() => Some(format!("\\u{{{:x}}}", c as u32)),
        _ => None,
    }
}

/// `text` with every control character but the newline and the tab shown (see [`shown`]):
/// what may go to a terminal.
pub fn safe(text: &str) -> Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t' || !c.is_control();
    if text.chars().all(keep) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match shown(c).filter(|_| !keep(c)) {
            Some(s) => out.push_str(&s),
            None => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `line` with each control character shown (a tab as a space, see [`shown`]), cut to at
/// most `max` characters with `…` at the end.
pub fn visible_line(line: &str, max: usize) -> String {
    // Most lines have nothing to show and fit (`status` prints one per stage).
    if !line.chars().any(char::is_control) && line.chars().count() <= max {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len().min(max * 4));
    let mut shown_width = 0;
    let mut rest = line.chars().peekable();
    while let Some(c) = rest.next() {
        let text = match c {
            '\t' => " ".to_string(),
            c => shown(c).unwrap_or_else(|| c.to_string()),
        };
        let width = text.chars().count();
        // Room for the text, and for `…` unless this is the end.
        let needed = width + usize::from(rest.peek().is_some());
        if shown_width + needed > max {
            out.push('…');
            break;
        }
        out.push_str(&text);
        shown_width += width;
    }
    out
}

/// Every line of `text` through [`visible_line`].
pub fn visible(text: &str, max: usize) -> String {
    text.lines()
        .map(|l| visible_line(l, max))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a write to stdout or stderr found its reader gone.
pub fn output_closed() -> bool {
    CLOSED.load(Ordering::SeqCst)
}

/// `result` of a write, with a broken pipe remembered in [`output_closed`].
fn note_closed(result: std::io::Result<()>) -> std::io::Result<()> {
    if let Err(e) = &result {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CLOSED.store(true, Ordering::SeqCst);
        }
    }
    result
}

/// Write `text` ([`safe`]) to stdout and flush it. The error names standard output;
/// [`is_broken_pipe`] tells a reader that went away from a real failure (a full disk).
pub fn out(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    note_closed(
        stdout
            .write_all(safe(text).as_bytes())
            .and_then(|()| stdout.flush()),
    )
    .map_err(|e| anyhow::Error::new(e).context("cannot write to standard output"))
}

/// [`out`] of `text` and a newline.
pub fn out_line(text: &str) -> anyhow::Result<()> {
    out(&format!("{text}\n"))
}

/// Write `text` ([`safe`]) and a newline to stderr. A failure cannot be reported anywhere,
/// so it is only remembered when the reader went away ([`output_closed`]).
pub fn err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let line = format!("{}\n", safe(text));
    let _ = note_closed(stderr.write_all(line.as_bytes()));
}

/// Whether `err` (or what caused it) is a write to a reader that went away.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_and_lines_cut() {
        assert_eq!(
            visible_line("\x1b[2J\x1b]0;owned\x07ok\tx\u{9b}", 100),
            "^[[2J^[]0;owned^Gok x\\u{9b}"
        );
        assert_eq!(visible_line("abcdef", 6), "abcdef");
        assert_eq!(visible_line("abcdefg", 6), "abcde…");
        assert_eq!(visible_line(&"x".repeat(65_545), 100).chars().count(), 100);
        assert_eq!(visible("a\x1bb\nc", 10), "a^[b\nc");
    }

    #[test]
    fn safe_text_keeps_newlines_and_tabs_and_shows_the_rest() {
        assert_eq!(safe("a\tb\nc"), "a\tb\nc");
        assert!(matches!(safe("plain"), Cow::Borrowed(_)));
        assert_eq!(
            safe("x\x1b]0;t\x07\r\u{7f}\u{9b}y\n"),
            "x^[]0;t^G^M^?\\u{9b}y\n"
        );
    }
}
