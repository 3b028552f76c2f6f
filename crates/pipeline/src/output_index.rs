//! Every stage's outputs in one trie of path components. "Who writes this path, or a
//! folder above it?" and "which stages write below this folder?" then cost the length of
//! the path, not the number of outputs: validation stays linear in the size of the
//! pipeline (docs/PERFORMANCE.md).

use super::dag::BitSet;
use foldhash::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// One output: the stage (its index) and which of its outputs.
pub type OutputRef = (usize, usize);

#[derive(Debug, Default)]
struct Node {
    children: HashMap<OsString, usize>,
    /// The output that is exactly this path.
    owner: Option<OutputRef>,
    /// The first output inserted at or below this node.
    first_below: Option<OutputRef>,
}

/// The outputs of a pipeline, by path.
#[derive(Debug)]
pub struct OutputIndex {
    nodes: Vec<Node>,
    stages: usize,
    /// Folder node → the stages writing below it, computed when first asked.
    writers: HashMap<usize, BitSet>,
}

impl OutputIndex {
    /// An empty index for a pipeline of `stages` stages.
    pub fn new(stages: usize) -> OutputIndex {
        OutputIndex {
            nodes: {
                // Room for the root and an output per stage without growing.
                let mut nodes = Vec::with_capacity(stages + 1);
                nodes.push(Node::default());
                nodes
            },
            stages,
            writers: HashMap::default(),
        }
    }

    /// Add `path` (clean, relative) as output `out`. When it overlaps an output already
    /// added — the same path, a folder above it, or a path inside it — nothing is added and
    /// that output is returned.
    pub fn insert(&mut self, path: &Path, out: OutputRef) -> Result<(), OutputRef> {
        let mut node = 0;
        let mut way = vec![0];
        for part in path.iter() {
            if let Some(above) = self.nodes[node].owner {
                return Err(above);
            }
            node = match self.nodes[node].children.get(part) {
                Some(&child) => child,
                None => {
                    self.nodes.push(Node::default());
                    let child = self.nodes.len() - 1;
                    self.nodes[node].children.insert(part.to_owned(), child);
                    child
                }
            };
            way.push(node);
        }
        if let Some(clash) = self.nodes[node].first_below {
            return Err(clash);
        }
        self.nodes[node].owner = Some(out);
        for n in way {
            self.nodes[n].first_below.get_or_insert(out);
        }
        self.writers.clear();
        Ok(())
    }

    /// The output that is `path` or a folder above it.
    pub fn writer_of(&self, path: &Path) -> Option<OutputRef> {
        let mut node = 0;
        for part in path.iter() {
            if let Some(owner) = self.nodes[node].owner {
                return Some(owner);
            }
            node = *self.nodes[node].children.get(part)?;
        }
        self.nodes[node].owner
    }

    /// The stages with an output strictly inside the folder `path`; `None` when there is
    /// none.
    pub fn writers_inside(&mut self, path: &Path) -> Option<&BitSet> {
        let mut node = 0;
        for part in path.iter() {
            node = *self.nodes[node].children.get(part)?;
        }
        if self.nodes[node].owner.is_some() || self.nodes[node].first_below.is_none() {
            return None;
        }
        if !self.writers.contains_key(&node) {
            let mut set = BitSet::new(self.stages);
            let mut todo = vec![node];
            while let Some(n) = todo.pop() {
                if let Some((stage, _)) = self.nodes[n].owner {
                    set.insert(stage);
                }
                todo.extend(self.nodes[n].children.values());
            }
            self.writers.insert(node, set);
        }
        self.writers.get(&node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_overlaps_writers_and_folders() {
        let mut idx = OutputIndex::new(4);
        assert_eq!(idx.insert(Path::new("out/a"), (0, 0)), Ok(()));
        assert_eq!(idx.insert(Path::new("out/b/c"), (1, 0)), Ok(()));
        assert_eq!(idx.insert(Path::new("out/a"), (2, 0)), Err((0, 0)));
        assert_eq!(idx.insert(Path::new("out/a/x"), (2, 0)), Err((0, 0)));
        assert_eq!(idx.insert(Path::new("out/b"), (2, 0)), Err((1, 0)));
        assert_eq!(idx.insert(Path::new("out2"), (3, 1)), Ok(()));
        assert_eq!(idx.writer_of(Path::new("out/a/deep/x")), Some((0, 0)));
        assert_eq!(idx.writer_of(Path::new("out/b/c")), Some((1, 0)));
        assert_eq!(idx.writer_of(Path::new("out/b")), None);
        assert_eq!(idx.writer_of(Path::new("elsewhere")), None);
        let inside: Vec<usize> = idx
            .writers_inside(Path::new("out"))
            .unwrap()
            .iter()
            .collect();
        assert_eq!(inside, [0, 1]);
        let root: Vec<usize> = idx.writers_inside(Path::new("")).unwrap().iter().collect();
        assert_eq!(root, [0, 1, 3]);
        assert!(
            idx.writers_inside(Path::new("out/a")).is_none(),
            "an output, not a folder"
        );
        assert!(idx.writers_inside(Path::new("nothing")).is_none());
    }
}
