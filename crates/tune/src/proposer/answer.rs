//! What a proposer prints on stdout: `{"candidates": [...]}`, each candidate a whole
//! `source` or a unified-diff `patch`, optionally with the `parent` trial it starts from,
//! `config` overrides and a one-line `note`. The answer as a whole must parse (else the
//! call failed); each candidate is read alone, so a malformed one fails alone.

use crate::space::Config;
use serde::{Deserialize, Serialize};

/// A proposer's answer, candidates not yet read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub candidates: Vec<serde_json::Value>,
}

/// One candidate as a proposer writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateAnswer {
    /// A unified diff against the parent's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// The whole new source (instead of `patch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The trial whose source the patch applies to and whose configuration the candidate
    /// starts from (default: the best trial so far).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// Defines to change from the parent's configuration (must stay in the space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    /// One line: what the change does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Answer {
    /// Read a proposer's stdout: the whole of it as JSON, else its last non-blank line.
    pub fn parse(stdout: &str) -> Result<Answer, String> {
        let whole = serde_json::from_str::<Answer>(stdout.trim());
        let last = || {
            let line = stdout.lines().rev().find(|l| !l.trim().is_empty())?;
            serde_json::from_str::<Answer>(line.trim()).ok()
        };
        match whole {
            Ok(a) => Ok(a),
            Err(e) => last().ok_or_else(|| {
                let shown: String = stdout.trim().chars().take(120).collect();
                if shown.is_empty() {
                    "it printed nothing on stdout; expected {\"candidates\": [...]}".into()
                } else {
                    format!("its stdout is not {{\"candidates\": [...]}} ({e}): `{shown}`")
                }
            }),
        }
    }

    /// Each candidate, or why it cannot be read.
    pub fn entries(&self) -> Vec<Result<CandidateAnswer, String>> {
        self.candidates
            .iter()
            .map(|v| {
                let c: CandidateAnswer = serde_json::from_value(v.clone())
                    .map_err(|e| format!("malformed candidate: {e}"))?;
                match (&c.patch, &c.source) {
                    (Some(_), Some(_)) => Err("give `patch` or `source`, not both".into()),
                    (None, None) => Err("a candidate needs a `patch` or a `source`".into()),
                    _ => Ok(c),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_candidates_alone_and_refuses_garbage_whole() {
        let a = Answer::parse(
            r#"{"candidates": [
                {"patch": "--- a\n+++ b\n", "parent": 3, "note": "x"},
                {"source": "int k;", "config": {"TILE_M": 32}},
                {"pach": "typo"},
                {"patch": "p", "source": "s"},
                {"note": "nothing"}
            ]}"#,
        )
        .unwrap();
        let e = a.entries();
        assert_eq!(e[0].as_ref().unwrap().parent, Some(3));
        assert_eq!(
            e[1].as_ref().unwrap().config.as_ref().unwrap()["TILE_M"],
            32
        );
        assert!(e[2].as_ref().unwrap_err().contains("unknown field `pach`"));
        assert!(e[3].as_ref().unwrap_err().contains("not both"));
        assert!(e[4]
            .as_ref()
            .unwrap_err()
            .contains("needs a `patch` or a `source`"));

        let chatter = "thinking...\n{\"candidates\": []}\n";
        assert!(Answer::parse(chatter).unwrap().candidates.is_empty());
        assert!(Answer::parse("").unwrap_err().contains("printed nothing"));
        let e = Answer::parse("Sure! Here is a kernel").unwrap_err();
        assert!(e.contains("`Sure! Here is a kernel`"), "{e}");
        assert!(Answer::parse(r#"{"candidates": 3}"#).is_err());
    }
}
