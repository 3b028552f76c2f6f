//! The checks a workload declaration needs beyond its types, run when pipeline.yaml loads:
//! names that must exist, every input drawn exactly once, expressions that parse and
//! evaluate to sensible extents on every shape, launches within CUDA's limits for every
//! (shape, variant), a reference that can run, gates for every output. Each problem is a
//! [`Problem`] at the key at fault; `pipeline::load` places them in the file.

mod args;
mod evaluate;
mod gates;
mod recipes;
mod reference;
mod shapes;

use super::exprs::Bindings;
use super::problem::{path, Problem};
use super::spec::{Declaration, Init};
use crate::{define_value, Pipeline};
use crate::{diag::did_you_mean, diag::quoted_list};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every problem with the `workloads:` of `p`, whose files live under `root`.
pub fn check(p: &Pipeline, root: &Path) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, decl) in &p.workloads {
        let mut c = Checker {
            name,
            decl,
            pipeline: p,
            out: Vec::new(),
        };
        c.structure(root);
        for (i, k) in decl.kernels.iter().enumerate() {
            if let Some(first) = owner.insert(k, name) {
                c.push(
                    &["kernels", &i.to_string()],
                    format!("kernel `{k}` is already in workload `{first}`"),
                    "a kernel computes one workload: list it under one of them",
                );
            }
        }
        if c.out.is_empty() {
            c.evaluate();
        }
        out.extend(c.out);
    }
    // One problem per place: a launch beyond the limits on five shapes is one fix.
    let mut seen = BTreeSet::new();
    out.retain(|p| seen.insert(p.path.clone()));
    out
}

struct Checker<'a> {
    name: &'a str,
    decl: &'a Declaration,
    pipeline: &'a Pipeline,
    out: Vec<Problem>,
}

/// `[A-Za-z_][A-Za-z0-9_]*`: a name an expression (or a file name) can hold.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn one_of<'s>(word: &str, names: impl Iterator<Item = &'s str> + Clone, what: &str) -> String {
    did_you_mean(word, names.clone())
        .unwrap_or_else(|| format!("the {what} are {}", quoted_list(names)))
}

impl<'a> Checker<'a> {
    fn push(&mut self, rest: &[&str], message: String, help: impl Into<String>) {
        self.out
            .push(Problem::at(path(self.name, rest), message, help));
    }

    fn push_key(&mut self, rest: &[&str], message: String, help: impl Into<String>) {
        self.out
            .push(Problem::at(path(self.name, rest), message, help).on_key());
    }

    fn arg_names(&self) -> impl Iterator<Item = &'a str> + Clone {
        self.decl.args.iter().map(|a| a.name.as_str())
    }

    /// The checks of names and keys; expressions are evaluated only when these pass.
    fn structure(&mut self, root: &Path) {
        let d = self.decl;
        let w = self.name;
        if !w
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || w.is_empty()
        {
            self.push_key(
                &[],
                format!("workload name `{w}` is not a word"),
                "name workloads with letters, digits, `-` and `_` (they become folder names)",
            );
        }
        for (i, k) in d.kernels.iter().enumerate() {
            if !self.pipeline.kernels.contains_key(k) {
                let known = self.pipeline.kernels.keys().map(String::as_str);
                self.push(
                    &["kernels", &i.to_string()],
                    format!("workload `{w}` names kernel `{k}`, which is not under `kernels:`"),
                    one_of(k, known, "kernels"),
                );
            }
        }
        if let Some(c) = &d.control {
            match self.pipeline.variants.get(c) {
                None => {
                    let known = self.pipeline.variants.keys().map(String::as_str);
                    self.push(
                        &["control"],
                        format!("the control `{c}` is not a variant"),
                        one_of(c, known, "variants"),
                    );
                }
                Some(v) if !d.kernels.contains(&v.kernel) => self.push(
                    &["control"],
                    format!(
                        "the control `{c}` builds kernel `{}`, which workload `{w}` does not list",
                        v.kernel
                    ),
                    "name a variant of one of the workload's kernels",
                ),
                Some(_) => {}
            }
        }
        self.dims_and_shapes();
        self.args();
        self.generators();
        self.recipes();
        self.reference(root);
        self.gates();
    }

    /// The variants of the workload's kernels, with their integer defines.
    fn variants(&self) -> impl Iterator<Item = (&'a str, Bindings)> + 'a {
        let kernels = &self.decl.kernels;
        self.pipeline
            .variants
            .iter()
            .filter(|(_, v)| kernels.contains(&v.kernel))
            .map(|(name, v)| {
                let defines = v
                    .defines
                    .iter()
                    .filter_map(|(k, value)| {
                        Some((k.clone(), define_value(value).ok()?.parse().ok()?))
                    })
                    .collect();
                (name.as_str(), defines)
            })
    }

    /// Every integer define a variant of the workload sets.
    fn define_names(&self) -> BTreeSet<String> {
        self.variants().flat_map(|(_, d)| d.into_keys()).collect()
    }
}

/// Why `init` cannot draw values, if it cannot.
fn init_problem(init: &Init) -> Option<&'static str> {
    match init {
        Init::Normal(n) if !(n.mean.is_finite() && n.std.is_finite() && n.std >= 0.0) => {
            Some("`normal` needs a finite `mean` and a finite `std` of at least 0")
        }
        Init::Uniform(u) if !(u.low.is_finite() && u.high.is_finite() && u.low < u.high) => {
            Some("`uniform` needs finite `low` < `high`")
        }
        Init::Constant(x) if !x.is_finite() => Some("`constant` must be finite"),
        _ => None,
    }
}
