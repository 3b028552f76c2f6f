//! The correctness gates: one per output, with thresholds for every variant's precision class.

use super::{one_of, Checker};
use crate::{workload::spec::Role, workload::spec::Threshold};
use std::collections::BTreeMap;

impl<'a> Checker<'a> {
    pub(super) fn gates(&mut self) {
        let d = self.decl;
        let classes = self.classes();
        for (out, g) in &d.gates {
            let Some((_, arg)) = d.arg(out).filter(|(_, a)| a.role == Role::Output) else {
                let outs = d.outputs().map(|a| a.name.as_str());
                self.push_key(
                    &["gates", out],
                    format!("`{out}` is not an output"),
                    one_of(out, outs, "outputs"),
                );
                continue;
            };
            let numbers = [
                ("max_abs_err", g.max_abs_err),
                ("mean_abs_err", g.mean_abs_err),
                ("max_pct_bad", g.max_pct_bad),
            ];
            let normalized = [
                ("max_rel_l2_err", &g.max_rel_l2_err),
                ("max_err_over_ref_std", &g.max_err_over_ref_std),
            ];
            if numbers.iter().all(|(_, v)| v.is_none())
                && normalized.iter().all(|(_, v)| v.is_none())
            {
                self.push(&["gates", out], format!("output `{out}` has no threshold"), "give at least one of `max_abs_err`, `mean_abs_err`, `max_rel_l2_err`, `max_err_over_ref_std`");
            }
            // Every declared threshold, per class where given so. A NaN or infinite one is
            // refused here, so the rule that judges figures (`schema::verdict`) never meets
            // one from a declaration.
            let mut declared: Vec<(&str, Option<&str>, f64)> = numbers
                .iter()
                .filter_map(|&(key, v)| Some((key, None, v?)))
                .collect();
            for (key, t) in normalized {
                match t {
                    Some(Threshold::One(x)) => declared.push((key, None, *x)),
                    Some(Threshold::PerClass(map)) => {
                        declared.extend(map.iter().map(|(c, x)| (key, Some(c.as_str()), *x)))
                    }
                    None => {}
                }
            }
            for (key, class, v) in declared {
                if !(v.is_finite() && v >= 0.0) {
                    let at: Vec<&str> = ["gates", out, key].into_iter().chain(class).collect();
                    self.push(&at, format!("`{key}` must be a number at least 0"), "");
                }
            }
            if g.max_pct_bad.is_some() && g.max_abs_err.is_none() {
                self.push_key(
                    &["gates", out, "max_pct_bad"],
                    "`max_pct_bad` needs `max_abs_err` (the error that makes an element bad)"
                        .into(),
                    "add `max_abs_err`",
                );
            }
            for (key, t) in normalized {
                let Some(Threshold::PerClass(map)) = t else {
                    continue;
                };
                for (variant, class) in &classes {
                    match class {
                        Some(c) if !map.contains_key(c) => self.push(&["gates", out, key], format!("`{key}` gives no threshold for precision class `{c}`, which variant `{variant}` has"), format!("add `{c}: x`, or give one number for every class")),
                        None => self.push(&["gates", out, key], format!("`{key}` gives a threshold per precision class, but variant `{variant}` has no class"), "give its kernel a `precision:`, or the workload a default `precision:`"),
                        Some(_) => {}
                    }
                }
            }
            if let Some(n) = g.spread_dims.filter(|&n| n == 0 || n > arg.shape.len()) {
                self.push(&["gates", out, "spread_dims"], format!("`spread_dims` is {n}; `{out}` has {} dimensions", arg.shape.len()), "give how many trailing dimensions one spread covers, from 1 to the output's rank");
            }
        }
        for (i, a) in d
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.role == Role::Output)
        {
            if !d.gates.contains_key(&a.name) {
                self.push(
                    &["args", &i.to_string()],
                    format!("output `{}` has no gates", a.name),
                    format!(
                        "add `gates: {{{}: {{max_rel_l2_err: ..., max_err_over_ref_std: ...}}}}`",
                        a.name
                    ),
                );
            }
        }
    }

    /// The precision class of each of the workload's variants (its own, its kernel's, or
    /// the workload's default).
    fn classes(&self) -> BTreeMap<&'a str, Option<String>> {
        self.variants()
            .map(|(v, _)| {
                let class = self
                    .pipeline
                    .precision_of(v)
                    .map(str::to_string)
                    .or_else(|| self.decl.precision.clone());
                (v, class)
            })
            .collect()
    }
}
