//! The report's footnotes: each distinct reason something was skipped is stated once, as a
//! markdown footnote (`[^1]: no CUDA driver …`), and every row, note and section it applies
//! to cites it (`⏭ skipped [^1]`). A reason that merely wraps another one ("the tune stage
//! times kernels on a GPU: no CUDA driver …") keeps its own words and cites the inner one.
//! Footnotes are numbered in the order the report first cites them.

use serde::Serialize;
use std::cell::RefCell;

/// One footnote: its label (`1`) and the reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Footnote {
    pub label: String,
    pub text: String,
}

/// The reasons known before rendering, and those cited so far.
#[derive(Debug, Default)]
pub struct Notes {
    /// Reasons that contain no other known reason: the ones that become footnotes.
    roots: Vec<String>,
    cited: RefCell<Vec<String>>,
}

/// A reason shorter than this is never taken for the core of a longer one.
const MIN_ROOT: usize = 12;

impl Notes {
    /// Know `reasons` in advance, so that one wrapping another cites the inner one whichever
    /// is cited first.
    pub fn new(reasons: impl IntoIterator<Item = String>) -> Notes {
        let mut all: Vec<String> = reasons.into_iter().filter(|r| !r.is_empty()).collect();
        all.sort();
        all.dedup();
        let roots = all
            .iter()
            .filter(|r| !all.iter().any(|o| o != *r && is_core(o, r)))
            .cloned()
            .collect();
        Notes {
            roots,
            cited: RefCell::new(Vec::new()),
        }
    }

    /// `reason` as a citation: `[^1]`, or its own words around the reason it wraps
    /// (`the tune stage times kernels on a GPU [^1]`).
    pub fn cite(&self, reason: &str) -> String {
        let core = self
            .roots
            .iter()
            .filter(|r| is_core(r, reason))
            .max_by_key(|r| r.len());
        match core {
            Some(core) => {
                let (before, after) = reason.split_once(core.as_str()).unwrap_or(("", ""));
                let before = before.trim_end_matches([' ', ':', '(']);
                let after = after.strip_prefix(')').unwrap_or(after);
                let mark = self.mark(core);
                if before.is_empty() {
                    format!("{mark}{after}")
                } else {
                    format!("{before} {mark}{after}")
                }
            }
            None => self.mark(reason),
        }
    }

    /// The footnotes cited, in order.
    pub fn footnotes(&self) -> Vec<Footnote> {
        self.cited
            .borrow()
            .iter()
            .enumerate()
            .map(|(i, text)| Footnote {
                label: (i + 1).to_string(),
                text: text.clone(),
            })
            .collect()
    }

    fn mark(&self, text: &str) -> String {
        let mut cited = self.cited.borrow_mut();
        let n = match cited.iter().position(|c| c == text) {
            Some(i) => i + 1,
            None => {
                cited.push(text.to_string());
                cited.len()
            }
        };
        format!("[^{n}]")
    }
}

/// Whether `core` is `reason` itself or a long enough part of it.
fn is_core(core: &str, reason: &str) -> bool {
    core == reason || (core.len() >= MIN_ROOT && reason.contains(core))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVER: &str =
        "no CUDA driver (libcuda.so.1) found: libcuda.so.1: cannot open shared object file";

    #[test]
    fn each_reason_is_stated_once_and_wrappers_cite_it() {
        let tune = format!("the tune stage times kernels on a GPU: {DRIVER}");
        let build = format!("skipped: no GPU ({DRIVER})");
        let ncu = "ncu not found on PATH".to_string();
        let notes = Notes::new([tune.clone(), DRIVER.into(), ncu.clone(), build.clone()]);
        // The wrapper is cited first, yet the footnote holds the inner reason.
        assert_eq!(
            notes.cite(&tune),
            "the tune stage times kernels on a GPU [^1]"
        );
        assert_eq!(notes.cite(DRIVER), "[^1]");
        assert_eq!(notes.cite(&ncu), "[^2]");
        assert_eq!(notes.cite(&build), "skipped: no GPU [^1]");
        assert_eq!(notes.cite("a reason nobody announced"), "[^3]");
        assert_eq!(
            notes.footnotes(),
            [
                Footnote {
                    label: "1".into(),
                    text: DRIVER.into()
                },
                Footnote {
                    label: "2".into(),
                    text: ncu
                },
                Footnote {
                    label: "3".into(),
                    text: "a reason nobody announced".into()
                },
            ]
        );
    }

    #[test]
    fn nothing_cited_means_no_footnotes() {
        let notes = Notes::new([DRIVER.to_string()]);
        assert!(notes.footnotes().is_empty());
    }
}
