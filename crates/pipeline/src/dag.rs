//! The stage graph: topological order, cycle detection, ancestors and descendants, and
//! the `repro dag` renderings (text, Mermaid, Graphviz dot).
//!
//! Every stage's ancestors are computed once, in topological order, as bitsets: "does `i`
//! need `j`, directly or not" is one bit test, so validation and scheduling never walk the
//! graph per stage (docs/PERFORMANCE.md).

use foldhash::HashMap;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Stages as indices in declaration order; `needs[i]` are the stages `i` needs.
#[derive(Debug, Clone)]
pub struct Dag {
    names: Vec<String>,
    by_name: HashMap<String, usize>,
    needs: Vec<Vec<usize>>,
    dependants: Vec<Vec<usize>>,
    order: Vec<usize>,
    /// `ancestors[i]`: every stage `i` needs, directly or not.
    ancestors: Vec<BitSet>,
}

/// A fixed-size set of stage indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(len: usize) -> BitSet {
        BitSet {
            words: vec![0; len.div_ceil(64)],
        }
    }

    pub fn insert(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
    }

    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1 << (i % 64));
    }

    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Add every member of `other` (of the same size).
    pub fn union_with(&mut self, other: &BitSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// The members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(k, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    k * 64 + bit
                })
            })
        })
    }

    /// The first member that is not in `other`.
    pub fn first_not_in(&self, other: &BitSet) -> Option<usize> {
        self.words
            .iter()
            .zip(&other.words)
            .enumerate()
            .find_map(|(k, (a, b))| {
                let rest = a & !b;
                (rest != 0).then(|| k * 64 + rest.trailing_zeros() as usize)
            })
    }
}

impl Dag {
    /// Build the graph. `needs[i]` must hold valid indices. A cycle is returned as the
    /// list of stage names along it, first name repeated at the end.
    pub fn new(names: Vec<String>, needs: Vec<Vec<usize>>) -> Result<Dag, Vec<String>> {
        let n = names.len();
        // A stage listed twice in `needs` is one edge (one set of the stages seen, cleared
        // after each stage).
        let mut seen = BitSet::new(n);
        let needs: Vec<Vec<usize>> = needs
            .into_iter()
            .map(|mut ns| {
                ns.retain(|&j| {
                    let first = !seen.contains(j);
                    seen.insert(j);
                    first
                });
                ns.iter().for_each(|&j| seen.remove(j));
                ns
            })
            .collect();
        let mut dependants = vec![Vec::new(); n];
        for (i, ns) in needs.iter().enumerate() {
            for &j in ns {
                dependants[j].push(i);
            }
        }
        // Depth-first search; colour 1 = on the current path, 2 = done.
        let mut colour = vec![0u8; n];
        let mut order = Vec::with_capacity(n);
        for start in 0..n {
            if colour[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            colour[start] = 1;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&up) = needs[node].get(*next) {
                    *next += 1;
                    match colour[up] {
                        0 => {
                            colour[up] = 1;
                            stack.push((up, 0));
                        }
                        1 => {
                            // `up` is on the path: the cycle is from `up` to `node`, then `up`.
                            let from = stack.iter().position(|&(s, _)| s == up).unwrap_or(0);
                            let mut cycle: Vec<String> = stack[from..]
                                .iter()
                                .map(|&(s, _)| names[s].clone())
                                .collect();
                            cycle.reverse(); // follow "is needed by" so it reads in run order
                            cycle.push(cycle[0].clone());
                            return Err(cycle);
                        }
                        _ => {}
                    }
                } else {
                    colour[node] = 2;
                    order.push(node);
                    stack.pop();
                }
            }
        }
        // Upstream first: each stage's ancestors are its needs and theirs, already known
        // (an empty placeholder, which allocates nothing, until then).
        let mut ancestors = vec![BitSet::new(0); n];
        for &i in &order {
            let mut set = BitSet::new(n);
            for &j in &needs[i] {
                set.insert(j);
                set.union_with(&ancestors[j]);
            }
            ancestors[i] = set;
        }
        let by_name = names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.clone(), i))
            .collect();
        Ok(Dag {
            names,
            by_name,
            needs,
            dependants,
            order,
            ancestors,
        })
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn needs(&self, i: usize) -> &[usize] {
        &self.needs[i]
    }

    pub fn dependants(&self, i: usize) -> &[usize] {
        &self.dependants[i]
    }

    /// Every stage after all the stages it needs (ties in declaration-order DFS).
    pub fn topo_order(&self) -> &[usize] {
        &self.order
    }

    /// Everything `roots` needs, directly or not (excluding `roots`).
    pub fn ancestors(&self, roots: &[usize]) -> BTreeSet<usize> {
        self.reach(roots, |i| &self.needs[i])
    }

    /// Every stage `i` needs, directly or not.
    pub fn ancestors_of(&self, i: usize) -> &BitSet {
        &self.ancestors[i]
    }

    /// Does `i` need `j`, directly or not?
    pub fn needs_transitively(&self, i: usize, j: usize) -> bool {
        self.ancestors[i].contains(j)
    }

    /// Everything that needs `roots`, directly or not (excluding `roots`).
    pub fn descendants(&self, roots: &[usize]) -> BTreeSet<usize> {
        self.reach(roots, |i| &self.dependants[i])
    }

    fn reach<'a>(
        &'a self,
        roots: &[usize],
        next: impl Fn(usize) -> &'a [usize],
    ) -> BTreeSet<usize> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<usize> = roots.to_vec();
        while let Some(i) = todo.pop() {
            for &j in next(i) {
                if seen.insert(j) {
                    todo.push(j);
                }
            }
        }
        for r in roots {
            seen.remove(r);
        }
        seen
    }

    /// One line per stage in run order: `name  (kind)  ← needs`.
    pub fn render_text(&self, kind: impl Fn(usize) -> String) -> String {
        let width = self.names.iter().map(|n| n.len()).max().unwrap_or(0);
        let kinds: Vec<String> = (0..self.len()).map(|i| format!("({})", kind(i))).collect();
        let kwidth = kinds.iter().map(|k| k.len()).max().unwrap_or(0) + 2;
        let mut out = String::new();
        for &i in &self.order {
            let ups: Vec<&str> = self.needs[i].iter().map(|&j| self.name(j)).collect();
            let line = format!(
                "{:width$}  {:kwidth$}{}",
                self.names[i],
                kinds[i],
                if ups.is_empty() {
                    String::new()
                } else {
                    format!("← {}", ups.join(", "))
                }
            );
            let _ = writeln!(out, "{}", line.trim_end());
        }
        out
    }

    /// A Mermaid flowchart (renders on GitHub). Names are written with Mermaid's entity
    /// codes for the characters that would end or break a label.
    pub fn render_mermaid(&self, kind: impl Fn(usize) -> String) -> String {
        let mut out = String::from("flowchart LR\n");
        for &i in &self.order {
            let _ = writeln!(
                out,
                "    s{i}[\"{}<br/><i>{}</i>\"]",
                mermaid_text(&self.names[i]),
                mermaid_text(&kind(i))
            );
        }
        for &i in &self.order {
            for &j in &self.needs[i] {
                let _ = writeln!(out, "    s{j} --> s{i}");
            }
        }
        out
    }

    /// Graphviz dot. Names are quoted IDs with `"` and `\` escaped.
    pub fn render_dot(&self, kind: impl Fn(usize) -> String) -> String {
        let mut out = String::from("digraph pipeline {\n    rankdir=LR;\n    node [shape=box];\n");
        for &i in &self.order {
            let name = dot_text(&self.names[i]);
            let _ = writeln!(
                out,
                "    \"{name}\" [label=\"{name}\\n({})\"];",
                dot_text(&kind(i))
            );
        }
        for &i in &self.order {
            for &j in &self.needs[i] {
                let _ = writeln!(
                    out,
                    "    \"{}\" -> \"{}\";",
                    dot_text(&self.names[j]),
                    dot_text(&self.names[i])
                );
            }
        }
        out.push_str("}\n");
        out
    }
}

/// Text inside a dot double-quoted string: `\` and `"` escaped, line breaks as `\n`.
fn dot_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Text inside a Mermaid `["..."]` label: characters that end the label or read as HTML
/// become entity codes (`#quot;`).
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '<' | '>' | '&' | '#' | '[' | ']' | '`' => {
                let _ = write!(out, "#{};", c as u32);
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(edges: &[(&str, &[&str])]) -> Result<Dag, Vec<String>> {
        let names: Vec<String> = edges.iter().map(|(n, _)| n.to_string()).collect();
        let needs = edges
            .iter()
            .map(|(_, ns)| {
                ns.iter()
                    .map(|n| names.iter().position(|x| x == n).unwrap())
                    .collect()
            })
            .collect();
        Dag::new(names, needs)
    }

    #[test]
    fn orders_upstream_first() {
        let d = dag(&[("c", &["b"]), ("b", &["a"]), ("a", &[])]).unwrap();
        let order: Vec<&str> = d.topo_order().iter().map(|&i| d.name(i)).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(d.descendants(&[2]), [0, 1].into_iter().collect());
        assert_eq!(d.ancestors(&[0]), [1, 2].into_iter().collect());
        assert!(d.needs_transitively(0, 2) && !d.needs_transitively(2, 0));
        assert_eq!(d.ancestors_of(0).iter().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(d.index("b"), Some(1));
    }

    #[test]
    fn ancestor_bitsets_match_a_graph_walk() {
        // 150 stages (three words per set), each needing a few earlier ones.
        let n = 150;
        let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let needs: Vec<Vec<usize>> = (0..n)
            .map(|i| (1..4).filter(|k| i >= k * 7).map(|k| i - k * 7).collect())
            .collect();
        let d = Dag::new(names, needs).unwrap();
        for i in 0..n {
            let walked: Vec<usize> = d.ancestors(&[i]).into_iter().collect();
            assert_eq!(d.ancestors_of(i).iter().collect::<Vec<_>>(), walked, "s{i}");
        }
    }

    #[test]
    fn renderings_escape_names() {
        let d = dag(&[("a\"b\\", &[]), ("x<y>#[z]", &["a\"b\\"])]).unwrap();
        let dot = d.render_dot(|_| "cmd".into());
        assert!(dot.contains(r#""a\"b\\" -> "x<y>#[z]";"#), "{dot}");
        assert!(
            dot.contains(r#""a\"b\\" [label="a\"b\\\n(cmd)"];"#),
            "{dot}"
        );
        let mermaid = d.render_mermaid(|_| "cmd".into());
        assert!(
            mermaid.contains(r#"s0["a#34;b\<br/><i>cmd</i>"]"#),
            "{mermaid}"
        );
        assert!(
            mermaid.contains(r#"s1["x#60;y#62;#35;#91;z#93;<br/><i>cmd</i>"]"#),
            "{mermaid}"
        );
    }

    #[test]
    fn reports_the_cycle_path() {
        let err = dag(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"]), ("d", &[])]).unwrap_err();
        assert_eq!(err, ["b", "c", "a", "b"].map(String::from));
    }
}
