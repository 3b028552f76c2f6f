//! Text from outside repro — a stage's output, file names, a lock someone edited — on its
//! way to a terminal: control characters are shown, never sent (an escape sequence could
//! clear the screen, set the window title or hide what follows), and lines are cut to a
//! width.

/// `line` with each control character shown (`^[` for ESC, `^G` for BEL, `\u{9b}` for a
/// C1 control, a tab as a space), cut to at most `max` characters with `…` at the end.
pub fn visible_line(line: &str, max: usize) -> String {
    let mut out = String::with_capacity(line.len().min(max * 4));
    let mut shown = 0;
    let mut rest = line.chars().peekable();
    while let Some(c) = rest.next() {
        let text = match c {
            '\t' => " ".to_string(),
            '\u{7f}' => "^?".to_string(),
            c if (c as u32) < 0x20 => format!("^{}", char::from(c as u8 + 0x40)),
            c if c.is_control() => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        };
        let width = text.chars().count();
        // Room for the text, and for `…` unless this is the end.
        let needed = width + usize::from(rest.peek().is_some());
        if shown + needed > max {
            out.push('…');
            break;
        }
        out.push_str(&text);
        shown += width;
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
}
