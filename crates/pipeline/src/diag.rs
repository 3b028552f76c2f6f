//! Errors about `pipeline.yaml` that point at a place in it: `FILE:LINE:COL: error: ...`
//! followed by a `help:` line saying how to fix it.

use std::fmt;
use std::path::PathBuf;

/// One problem in the pipeline file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: PathBuf,
    /// 1-based; 0 when the problem has no position (then only the file is named).
    pub line: usize,
    /// 1-based.
    pub col: usize,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: error: {}", self.file.display(), self.message)?;
        } else {
            write!(
                f,
                "{}:{}:{}: error: {}",
                self.file.display(),
                self.line,
                self.col,
                self.message
            )?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// Everything wrong with a pipeline file; nothing runs while there is any.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct PipelineError(pub Vec<Diagnostic>);

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// `did you mean `x`?` for the closest candidate, if one is close enough to be a typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!("did you mean `{c}`?"))
}

/// `a`, `b`, `c` — for "expected one of" lists.
pub fn quoted_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items
        .into_iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("bnech", ["bench", "build", "cmd"]).as_deref(),
            Some("did you mean `bench`?")
        );
        assert_eq!(did_you_mean("zzz", ["bench", "build"]), None);
    }

    #[test]
    fn renders_position_and_help() {
        let d = Diagnostic {
            file: "pipeline.yaml".into(),
            line: 3,
            col: 5,
            message: "unknown key `outz`".into(),
            help: Some("did you mean `outs`?".into()),
        };
        assert_eq!(
            d.to_string(),
            "pipeline.yaml:3:5: error: unknown key `outz`\n  help: did you mean `outs`?"
        );
    }
}
