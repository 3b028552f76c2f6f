//! A problem with a workload declaration at a key path of pipeline.yaml, and how it
//! becomes a `file:line:column` [`Diagnostic`]: the checks stay free of positions (so the
//! ones that run later, on a cubin or after a launch, build the same problems), and one
//! [`Locator`] places them.

use crate::diag::Diagnostic;
use crate::{spans::Pos, spans::SpanIndex};
use std::path::Path;

/// What is wrong, where, and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Key path from the document root (`workloads.rmsnorm.args.2.shape.0`).
    pub path: Vec<String>,
    /// 1-based column inside the expression at `path`, when the problem is in one.
    pub col: Option<usize>,
    /// Point at the key rather than its value (a key that should not be there).
    pub at_key: bool,
    pub message: String,
    pub help: String,
}

impl Problem {
    pub fn at(path: Vec<String>, message: impl Into<String>, help: impl Into<String>) -> Problem {
        Problem {
            path,
            col: None,
            at_key: false,
            message: message.into(),
            help: help.into(),
        }
    }

    /// The same problem at column `col` of the expression at its path.
    pub fn in_expr(mut self, col: usize) -> Problem {
        self.col = Some(col);
        self
    }

    pub fn on_key(mut self) -> Problem {
        self.at_key = true;
        self
    }
}

/// `["workloads", name, rest...]` as owned strings.
pub fn path(workload: &str, rest: &[&str]) -> Vec<String> {
    ["workloads", workload]
        .iter()
        .chain(rest)
        .map(|s| s.to_string())
        .collect()
}

/// Places problems in the pipeline text.
pub struct Locator<'a> {
    file: &'a Path,
    text: &'a str,
    spans: SpanIndex,
}

impl<'a> Locator<'a> {
    pub fn new(file: &'a Path, text: &'a str) -> Locator<'a> {
        Locator {
            file,
            text,
            spans: SpanIndex::build(text),
        }
    }

    pub fn diagnostic(&self, p: &Problem) -> Diagnostic {
        let path: Vec<&str> = p.path.iter().map(String::as_str).collect();
        let value = if p.at_key {
            None
        } else {
            self.spans.value(&path)
        };
        let pos = value.unwrap_or_else(|| self.spans.locate(&path));
        let pos = match (p.col, value) {
            (Some(col), Some(at)) => self.inside_scalar(at, col),
            _ => pos,
        };
        Diagnostic {
            file: self.file.to_path_buf(),
            line: pos.line,
            col: pos.col,
            message: p.message.clone(),
            help: (!p.help.is_empty()).then(|| p.help.clone()),
        }
    }

    /// Column `col` of the scalar that starts at `at` (past its opening quote, if any).
    fn inside_scalar(&self, at: Pos, col: usize) -> Pos {
        let line = self
            .text
            .lines()
            .nth(at.line.saturating_sub(1))
            .unwrap_or("");
        let quoted = matches!(line.chars().nth(at.col.saturating_sub(1)), Some('"' | '\''));
        Pos {
            line: at.line,
            col: at.col + col - 1 + usize::from(quoted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_expression_columns_inside_plain_and_quoted_scalars() {
        let text = "workloads:\n  w:\n    grid: [rows + x, \"rows + y\"]\n";
        let loc = Locator::new(Path::new("p.yaml"), text);
        let p = |i: &str| Problem::at(path("w", &["grid", i]), "bad", "fix").in_expr(8);
        let d = loc.diagnostic(&p("0"));
        assert_eq!((d.line, d.col), (3, 19));
        let d = loc.diagnostic(&p("1"));
        assert_eq!((d.line, d.col), (3, 30));
        assert_eq!(d.to_string(), "p.yaml:3:30: error: bad\n  help: fix");
        let key = loc.diagnostic(&Problem::at(path("w", &["grid"]), "k", "").on_key());
        assert_eq!((key.line, key.col, key.help), (3, 5, None));
    }
}
