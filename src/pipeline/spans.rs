//! Where each key and value of a YAML document is, so errors found after parsing (an
//! unknown stage in `needs`, a cycle, a kind's bad option) can still name a line and
//! column. Built from yaml-rust2's marked events.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A path of mapping keys and sequence indices (as decimal strings) from the document root.
pub type KeyPath = Vec<String>;

/// 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

/// Positions of every mapping key and every value in a document.
#[derive(Debug, Default, Clone)]
pub struct SpanIndex {
    keys: HashMap<KeyPath, Pos>,
    values: HashMap<KeyPath, Pos>,
    duplicates: Vec<DuplicateKey>,
}

/// A key written twice in one mapping (YAML parsers keep one of them silently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// The path of the key (the mapping's path, then the key).
    pub path: KeyPath,
    pub first: Pos,
    pub second: Pos,
}

impl SpanIndex {
    /// Index `text`. A document that does not parse gives an empty index (the parse error
    /// is reported by the typed loader, which has its own position).
    pub fn build(text: &str) -> SpanIndex {
        let mut builder = Builder::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut builder, false).is_err() {
            return SpanIndex::default();
        }
        builder.index
    }

    /// Every key written more than once in the same mapping, in document order.
    pub fn duplicates(&self) -> &[DuplicateKey] {
        &self.duplicates
    }

    /// Position of the key at `path` (where `name:` is written).
    pub fn key(&self, path: &[&str]) -> Option<Pos> {
        self.keys.get(&owned(path)).copied()
    }

    /// Position of the value at `path` (a scalar, or the start of a list or mapping).
    pub fn value(&self, path: &[&str]) -> Option<Pos> {
        self.values.get(&owned(path)).copied()
    }

    /// The best position for `path`: its key, else its value, else the nearest ancestor's.
    pub fn locate(&self, path: &[&str]) -> Pos {
        let mut path = owned(path);
        loop {
            if let Some(p) = self.keys.get(&path).or_else(|| self.values.get(&path)) {
                return *p;
            }
            if path.pop().is_none() {
                return Pos { line: 1, col: 1 };
            }
        }
    }
}

/// `file:line:col` of the key at `path` in the pipeline file `file` (the nearest ancestor's
/// when it is absent, `file:1:1` when the file cannot be read), for errors found while a
/// stage runs, long after loading.
pub fn position_of(file: &std::path::Path, path: &[&str]) -> String {
    let pos = std::fs::read_to_string(file)
        .map(|text| SpanIndex::build(&text).locate(path))
        .unwrap_or(Pos { line: 1, col: 1 });
    format!("{}:{}:{}", file.display(), pos.line, pos.col)
}

fn owned(path: &[&str]) -> KeyPath {
    path.iter().map(|s| s.to_string()).collect()
}

enum Frame {
    Map {
        path: KeyPath,
        key: Option<String>,
        seen: HashMap<String, Pos>,
    },
    Seq {
        path: KeyPath,
        next: usize,
    },
}

#[derive(Default)]
struct Builder {
    index: SpanIndex,
    stack: Vec<Frame>,
}

impl Builder {
    /// The path of the next value in the current container, and whether the event is a
    /// mapping key rather than a value.
    fn next_slot(&mut self) -> (KeyPath, bool) {
        match self.stack.last_mut() {
            None => (Vec::new(), false),
            Some(Frame::Map { path, key, .. }) => match key.take() {
                None => (path.clone(), true),
                Some(k) => {
                    let mut p = path.clone();
                    p.push(k);
                    (p, false)
                }
            },
            Some(Frame::Seq { path, next }) => {
                let mut p = path.clone();
                p.push(next.to_string());
                *next += 1;
                (p, false)
            }
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let pos = Pos {
            line: mark.line(),
            col: mark.col() + 1,
        };
        match ev {
            Event::Scalar(text, ..) => {
                let (mut path, is_key) = self.next_slot();
                if is_key {
                    path.push(text.clone());
                    if let Some(Frame::Map { key, seen, .. }) = self.stack.last_mut() {
                        if let Some(&first) = seen.get(&text) {
                            self.index.duplicates.push(DuplicateKey {
                                path: path.clone(),
                                first,
                                second: pos,
                            });
                        } else {
                            seen.insert(text.clone(), pos);
                            self.index.keys.insert(path, pos);
                        }
                        *key = Some(text);
                    }
                } else {
                    self.index.values.insert(path, pos);
                }
            }
            Event::Alias(_) => {
                let (path, is_key) = self.next_slot();
                if is_key {
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some("*alias".into());
                    }
                } else {
                    self.index.values.insert(path, pos);
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let (mut path, is_key) = self.next_slot();
                if is_key {
                    // A complex (non-scalar) key: give it a placeholder name.
                    path.push("?".into());
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some("?".into());
                    }
                }
                self.index.values.insert(path.clone(), pos);
                self.stack.push(if matches!(ev, Event::MappingStart(..)) {
                    Frame::Map {
                        path,
                        key: None,
                        seen: HashMap::new(),
                    }
                } else {
                    Frame::Seq { path, next: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "version: 1\nstages:\n  a:\n    uses: cmd\n    needs: [b, c]\n";

    #[test]
    fn finds_keys_values_and_list_items() {
        let idx = SpanIndex::build(DOC);
        assert_eq!(idx.key(&["stages", "a"]), Some(Pos { line: 3, col: 3 }));
        assert_eq!(
            idx.value(&["stages", "a", "uses"]),
            Some(Pos { line: 4, col: 11 })
        );
        assert_eq!(
            idx.value(&["stages", "a", "needs", "1"]),
            Some(Pos { line: 5, col: 16 })
        );
    }

    #[test]
    fn finds_duplicate_keys_at_any_depth() {
        let doc = "version: 1\nstages:\n  a: {uses: cmd, env: {X: 1, X: 2}}\n  a:\n    uses: cmd\n";
        let idx = SpanIndex::build(doc);
        let dups: Vec<(String, Pos, Pos)> = idx
            .duplicates()
            .iter()
            .map(|d| (d.path.join("."), d.first, d.second))
            .collect();
        assert_eq!(
            dups,
            [
                (
                    "stages.a.env.X".to_string(),
                    Pos { line: 3, col: 24 },
                    Pos { line: 3, col: 30 }
                ),
                (
                    "stages.a".to_string(),
                    Pos { line: 3, col: 3 },
                    Pos { line: 4, col: 3 }
                ),
            ]
        );
        // The first one keeps its position.
        assert_eq!(idx.key(&["stages", "a"]), Some(Pos { line: 3, col: 3 }));
    }

    #[test]
    fn falls_back_to_the_nearest_ancestor() {
        let idx = SpanIndex::build(DOC);
        assert_eq!(
            idx.locate(&["stages", "a", "space", "TILE_M"]),
            Pos { line: 3, col: 3 }
        );
    }
}
