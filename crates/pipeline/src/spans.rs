//! Where each key and value of a YAML document is, so errors found after parsing (an
//! unknown stage in `needs`, a cycle, a kind's bad option) can still name a line and
//! column. Built from yaml-rust2's marked events.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, Parser};
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

/// How deep mappings and sequences may nest in a pipeline file. A real one needs a handful
/// of levels; the typed loader gives up at 128, and a deeper document is refused before any
/// work that grows with its depth.
pub const MAX_DEPTH: usize = 64;

/// How many times over its own size a document may expand through its aliases (the typed
/// loader stops at 100).
pub const ALIAS_FACTOR: u64 = 50;

/// What every load checks before the typed parse, in one pass over the document's events:
/// keys written twice, nesting deeper than [`MAX_DEPTH`], and aliases that expand it past
/// [`ALIAS_FACTOR`] times its size (an "alias bomb").
#[derive(Debug, Default)]
pub struct Scan {
    pub duplicates: Vec<DuplicateKey>,
    /// Where the first container past [`MAX_DEPTH`] opens.
    pub too_deep: Option<Pos>,
    /// The alias at which the expansion passes the limit, and its text (`*name`).
    pub alias_bomb: Option<(Pos, String)>,
    /// The keys written in the document's top-level mapping (validation asks whether one
    /// was written at all, e.g. an empty `arch:`, without indexing positions).
    pub top_keys: Vec<String>,
}

impl Scan {
    /// Nothing to refuse: no key twice, no nesting too deep, no alias bomb.
    pub fn passed(&self) -> bool {
        self.duplicates.is_empty() && self.too_deep.is_none() && self.alias_bomb.is_none()
    }
}

impl SpanIndex {
    /// Index `text`. A document that does not parse gives what was indexed before the
    /// error (the parse error is reported by the typed loader, which has its own position).
    pub fn build(text: &str) -> SpanIndex {
        Builder::run(text, true).index
    }

    /// The checks of [`Scan`], without indexing positions.
    pub fn scan(text: &str) -> Scan {
        if let Some(pos) = deep_flow(text) {
            return Scan {
                too_deep: Some(pos),
                ..Scan::default()
            };
        }
        let b = Builder::run(text, false);
        let limit = b.events.saturating_mul(ALIAS_FACTOR);
        let alias_bomb = (b.jumps > limit)
            .then(|| b.aliases.iter().find(|(_, total)| *total > limit))
            .flatten()
            .map(|(pos, _)| (*pos, alias_text(text, *pos)));
        Scan {
            duplicates: b.index.duplicates,
            too_deep: b.too_deep,
            alias_bomb,
            top_keys: b.top_keys,
        }
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

/// Brackets nested this deep are refused before the YAML scanner sees them: it looks
/// ahead over a whole flow collection before its first event, at a cost that grows with
/// the square of the nesting, so the event-level limit would come too late.
const FLOW_GUARD: usize = 1000;

/// Where `[` and `{` (outside quotes and comments) first nest past [`MAX_DEPTH`], when they
/// go on to nest past [`FLOW_GUARD`]. A character scan, linear in the text: a quote counts
/// only where a scalar may start, as in YAML.
fn deep_flow(text: &str) -> Option<Pos> {
    let (mut line, mut col) = (1, 0);
    let (mut depth, mut first_too_deep) = (0usize, None);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            (line, col, comment) = (line + 1, 0, false);
        }
        match quote {
            _ if comment => {}
            Some('"') if c == '\\' => {
                chars.next();
                col += 1;
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '#' if prev.is_whitespace() => comment = true,
                '"' | '\'' if prev.is_whitespace() || "[{,:".contains(prev) => quote = Some(c),
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH && first_too_deep.is_none() {
                        first_too_deep = Some(Pos { line, col });
                    }
                    if depth > FLOW_GUARD {
                        return first_too_deep;
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    None
}

/// The alias written at `pos` (`*name`).
fn alias_text(text: &str, pos: Pos) -> String {
    let line = text.lines().nth(pos.line.saturating_sub(1)).unwrap_or("");
    line.chars()
        .skip(pos.col.saturating_sub(1))
        .take_while(|c| !c.is_whitespace() && !",[]{}".contains(*c))
        .take(80)
        .collect()
}

enum Container {
    Map {
        key: Option<String>,
        seen: HashMap<String, Pos>,
    },
    Seq {
        next: usize,
    },
}

struct Frame {
    /// This container's key or index in its parent (none for the document's root).
    segment: Option<String>,
    container: Container,
    /// Its anchor id (0: none).
    anchor: usize,
    /// Alias dereferences inside it, its aliases' own expansions included.
    jumps: u64,
}

#[derive(Default)]
struct Builder {
    /// Index every key and value position (else only duplicates and the limits).
    full: bool,
    index: SpanIndex,
    stack: Vec<Frame>,
    too_deep: Option<Pos>,
    events: u64,
    /// Anchor id → alias dereferences inside its node.
    anchors: HashMap<usize, u64>,
    /// Alias dereferences in the whole document, as the typed loader will make them.
    jumps: u64,
    /// The keys of the document's top-level mapping, in order.
    top_keys: Vec<String>,
    /// Each alias, with the document's dereferences up to and including it.
    aliases: Vec<(Pos, u64)>,
}

impl Builder {
    /// Feed `text`'s events one by one (not the parser's recursive `load`, whose depth
    /// follows the document's), stopping at a syntax error or past [`MAX_DEPTH`].
    fn run(text: &str, full: bool) -> Builder {
        let mut b = Builder {
            full,
            ..Builder::default()
        };
        let mut parser = Parser::new_from_str(text);
        while let Ok((ev, mark)) = parser.next_token() {
            if ev == Event::StreamEnd {
                break;
            }
            b.on_event(ev, mark);
            if b.too_deep.is_some() {
                break;
            }
        }
        b
    }

    /// The key path of the current container.
    fn path(&self) -> KeyPath {
        self.stack
            .iter()
            .filter_map(|f| f.segment.clone())
            .collect()
    }

    /// The segment of the next node in the current container, and whether it is a
    /// mapping key rather than a value.
    fn next_slot(&mut self) -> (Option<String>, bool) {
        match self.stack.last_mut().map(|f| &mut f.container) {
            None => (None, false),
            Some(Container::Map { key, .. }) => match key.take() {
                None => (None, true),
                Some(k) => (Some(k), false),
            },
            Some(Container::Seq { next }) => {
                *next += 1;
                (Some((*next - 1).to_string()), false)
            }
        }
    }

    /// The full path of a node at `segment` of the current container.
    fn path_to(&self, segment: &Option<String>) -> KeyPath {
        let mut path = self.path();
        path.extend(segment.clone());
        path
    }

    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.events += 1;
        let pos = Pos {
            line: mark.line(),
            col: mark.col() + 1,
        };
        match ev {
            Event::Scalar(text, _, anchor, _) => {
                if anchor != 0 {
                    self.anchors.insert(anchor, 0);
                }
                let (segment, is_key) = self.next_slot();
                if is_key {
                    if self.stack.len() == 1 {
                        self.top_keys.push(text.clone());
                    }
                    // The key path is built only where it is kept: for a duplicate, or in
                    // the full index (the scan of every load indexes nothing).
                    let first = match self.stack.last_mut().map(|f| &mut f.container) {
                        Some(Container::Map { seen, .. }) => match seen.get(&text) {
                            Some(&first) => Some(first),
                            None => {
                                seen.insert(text.clone(), pos);
                                None
                            }
                        },
                        _ => None,
                    };
                    if first.is_some() || self.full {
                        let mut path = self.path();
                        path.push(text.clone());
                        match first {
                            Some(first) => self.index.duplicates.push(DuplicateKey {
                                path,
                                first,
                                second: pos,
                            }),
                            None => {
                                self.index.keys.insert(path, pos);
                            }
                        }
                    }
                    if let Some(Frame {
                        container: Container::Map { key, .. },
                        ..
                    }) = self.stack.last_mut()
                    {
                        *key = Some(text);
                    }
                } else if self.full {
                    let path = self.path_to(&segment);
                    self.index.values.insert(path, pos);
                }
            }
            Event::Alias(anchor) => {
                let jumps = 1 + self.anchors.get(&anchor).copied().unwrap_or(0);
                self.jumps = self.jumps.saturating_add(jumps);
                self.aliases.push((pos, self.jumps));
                if let Some(top) = self.stack.last_mut() {
                    top.jumps = top.jumps.saturating_add(jumps);
                }
                let (segment, is_key) = self.next_slot();
                if is_key {
                    if let Some(Frame {
                        container: Container::Map { key, .. },
                        ..
                    }) = self.stack.last_mut()
                    {
                        *key = Some("*alias".into());
                    }
                } else if self.full {
                    let path = self.path_to(&segment);
                    self.index.values.insert(path, pos);
                }
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                if self.stack.len() >= MAX_DEPTH {
                    self.too_deep = Some(pos);
                    return;
                }
                let (mut segment, is_key) = self.next_slot();
                if is_key {
                    // A complex (non-scalar) key: give it a placeholder name.
                    segment = Some("?".into());
                    if let Some(Frame {
                        container: Container::Map { key, .. },
                        ..
                    }) = self.stack.last_mut()
                    {
                        *key = Some("?".into());
                    }
                }
                if self.full {
                    let path = self.path_to(&segment);
                    self.index.values.insert(path, pos);
                }
                let container = if matches!(ev, Event::MappingStart(..)) {
                    Container::Map {
                        key: None,
                        seen: HashMap::new(),
                    }
                } else {
                    Container::Seq { next: 0 }
                };
                self.stack.push(Frame {
                    segment,
                    container,
                    anchor,
                    jumps: 0,
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if let Some(done) = self.stack.pop() {
                    if done.anchor != 0 {
                        self.anchors.insert(done.anchor, done.jumps);
                    }
                    if let Some(parent) = self.stack.last_mut() {
                        parent.jumps = parent.jumps.saturating_add(done.jumps);
                    }
                }
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
