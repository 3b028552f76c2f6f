//! The stage graph: topological order, cycle detection, ancestors and descendants, and
//! the `repro dag` renderings (text, Mermaid, Graphviz dot).

use std::collections::BTreeSet;
use std::fmt::Write;

/// Stages as indices in declaration order; `needs[i]` are the stages `i` needs.
#[derive(Debug, Clone)]
pub struct Dag {
    names: Vec<String>,
    needs: Vec<Vec<usize>>,
    dependants: Vec<Vec<usize>>,
    order: Vec<usize>,
}

impl Dag {
    /// Build the graph. `needs[i]` must hold valid indices. A cycle is returned as the
    /// list of stage names along it, first name repeated at the end.
    pub fn new(names: Vec<String>, needs: Vec<Vec<usize>>) -> Result<Dag, Vec<String>> {
        let n = names.len();
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
        Ok(Dag {
            names,
            needs,
            dependants,
            order,
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
        self.names.iter().position(|n| n == name)
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
