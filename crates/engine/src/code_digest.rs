//! The digest of a C/C++/CUDA source as the compiler sees it: comments removed, runs of
//! spaces and tabs folded, blank lines dropped. A comment-only or layout-only edit leaves it
//! unchanged, so a stage that compiles the source itself (the tuner compiles every
//! configuration it tries) is not made stale by it — early cutoff where no cubin exists to
//! compare. Line structure is kept (a preprocessor directive ends at its line), and a source
//! that can see its own line numbers (`__LINE__`, `assert`) is digested byte for byte.

use sha2::{Digest, Sha256};

/// Tokens whose expansion depends on where in the file they stand.
const POSITION_DEPENDENT: [&str; 2] = ["__LINE__", "assert"];

/// `code:<sha256>` of the normalized text, or `raw:<sha256>` of the bytes when the source
/// uses a position-dependent token (or is not UTF-8).
pub fn code_digest(bytes: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return format!("raw:{}", repro_base::tools::hex(&Sha256::digest(bytes)));
    };
    let normalized = normalize(text);
    if normalized
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|word| POSITION_DEPENDENT.contains(&word))
    {
        return format!("raw:{}", repro_base::tools::hex(&Sha256::digest(bytes)));
    }
    format!(
        "code:{}",
        repro_base::tools::hex(&Sha256::digest(normalized.as_bytes()))
    )
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Code,
    LineComment,
    BlockComment,
    Literal(char),
}

/// The source without comments, one non-blank line per line, spaces folded outside string
/// and character literals.
fn normalize(text: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut mode = Mode::Code;
    let mut chars = text.chars().peekable();
    let end_line = |line: &mut String, lines: &mut Vec<String>| {
        let trimmed = line.trim();
        if !trimmed.is_empty() {
            lines.push(trimmed.to_string());
        }
        line.clear();
    };
    while let Some(c) = chars.next() {
        match mode {
            Mode::Code => match c {
                '/' if chars.peek() == Some(&'/') => {
                    chars.next();
                    mode = Mode::LineComment;
                }
                '/' if chars.peek() == Some(&'*') => {
                    chars.next();
                    mode = Mode::BlockComment;
                    // A comment separates tokens like one space.
                    line.push(' ');
                }
                '"' | '\'' => {
                    line.push(c);
                    mode = Mode::Literal(c);
                }
                '\n' => end_line(&mut line, &mut lines),
                c if c.is_whitespace() => {
                    if !line.ends_with(' ') {
                        line.push(' ');
                    }
                }
                c => line.push(c),
            },
            Mode::LineComment => {
                if c == '\n' {
                    end_line(&mut line, &mut lines);
                    mode = Mode::Code;
                }
            }
            Mode::BlockComment => {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    mode = Mode::Code;
                }
            }
            Mode::Literal(quote) => {
                line.push(c);
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        line.push(next);
                    }
                } else if c == quote || c == '\n' {
                    mode = Mode::Code;
                }
            }
        }
    }
    end_line(&mut line, &mut lines);
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str =
        "#define TILE 64 // rows\n__global__ void k(float* o) {\n  o[0] = TILE; /* one */\n}\n";

    #[test]
    fn comments_and_layout_do_not_change_the_digest() {
        let edited = "// A new header comment.\n#define TILE 64   // rows per block\n\n__global__ void k(float* o) {\n    o[0] = TILE; /* one,\n spanning lines */\n}\n";
        assert_eq!(
            code_digest(SOURCE.as_bytes()),
            code_digest(edited.as_bytes())
        );
        assert!(code_digest(SOURCE.as_bytes()).starts_with("code:"));
    }

    #[test]
    fn code_changes_do() {
        let edited = SOURCE.replace("TILE 64", "TILE 32");
        assert_ne!(
            code_digest(SOURCE.as_bytes()),
            code_digest(edited.as_bytes())
        );
        // Joining two lines changes what a directive covers.
        let joined = SOURCE.replacen("// rows\n", "", 1);
        assert_ne!(
            code_digest(SOURCE.as_bytes()),
            code_digest(joined.as_bytes())
        );
    }

    #[test]
    fn comment_markers_inside_literals_are_code() {
        let a = "const char* s = \"a // b\";\n";
        let b = "const char* s = \"a // c\";\n";
        assert_ne!(code_digest(a.as_bytes()), code_digest(b.as_bytes()));
        let escaped = "const char* s = \"q\\\" // x\";\n";
        let other = "const char* s = \"q\\\" // y\";\n";
        assert_ne!(
            code_digest(escaped.as_bytes()),
            code_digest(other.as_bytes())
        );
    }

    #[test]
    fn a_source_that_sees_its_line_numbers_is_digested_byte_for_byte() {
        let a = "__device__ void f() { assert(1); }\n";
        let b = "// moved down a line\n__device__ void f() { assert(1); }\n";
        assert!(code_digest(a.as_bytes()).starts_with("raw:"));
        assert_ne!(code_digest(a.as_bytes()), code_digest(b.as_bytes()));
        // static_assert is evaluated at compile time and does not see the line.
        assert!(code_digest(b"static_assert(1, \"x\");\n").starts_with("code:"));
    }
}
