//! The checks a workload declaration needs beyond its types, run when pipeline.yaml loads:
//! names that must exist, every input drawn exactly once, expressions that parse and
//! evaluate to sensible extents on every shape, launches within CUDA's limits for every
//! (shape, variant), a reference that can run, gates for every output. Each problem is a
//! [`Problem`] at the key at fault; `pipeline::load` places them in the file.

use super::exprs::{Bindings, Compiled, Number};
use super::generators::GeneratorKind;
use super::limits::Limits;
use super::problem::{path, Problem};
use super::spec::{Arg, Declaration, Init, RefArg, Role, Threshold};
use crate::pipeline::diag::{did_you_mean, quoted_list};
use crate::pipeline::{define_value, Pipeline};
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

    fn dims_and_shapes(&mut self) {
        let d = self.decl;
        if d.dims.is_empty() {
            self.push(
                &["dims"],
                "`dims` is empty".into(),
                "name the workload's dimensions, e.g. `dims: [rows, hidden]`",
            );
        }
        for (i, dim) in d.dims.iter().enumerate() {
            let at = ["dims", &i.to_string()];
            if !is_identifier(dim) {
                self.push(
                    &at,
                    format!("dimension `{dim}` is not a name expressions can use"),
                    "use letters, digits and `_`, starting with a letter",
                );
            } else if d.dims[..i].contains(dim) {
                self.push(
                    &at,
                    format!("dimension `{dim}` is listed twice"),
                    "list each dimension once",
                );
            }
        }
        if d.shapes.is_empty() {
            self.push(
                &["shapes"],
                "`shapes` is empty".into(),
                "declare at least one shape",
            );
        }
        for (shape, values) in &d.shapes {
            for dim in &d.dims {
                if !values.contains_key(dim) {
                    self.push(
                        &["shapes", shape],
                        format!("shape `{shape}` gives no value for dimension `{dim}`"),
                        format!("add `{dim}: N` to the shape"),
                    );
                }
            }
            for (dim, v) in values {
                if !d.dims.contains(dim) {
                    let help = one_of(dim, d.dims.iter().map(String::as_str), "dimensions");
                    self.push_key(
                        &["shapes", shape, dim],
                        format!("`{dim}` is not a dimension of the workload"),
                        help,
                    );
                } else if *v < 1 {
                    self.push(
                        &["shapes", shape, dim],
                        format!("dimension `{dim}` is {v}"),
                        "a dimension is a positive integer",
                    );
                }
            }
        }
        for clash in self.define_names().iter().filter(|n| d.dims.contains(n)) {
            self.push(
                &["dims"],
                format!("dimension `{clash}` has the name of a define of this workload's variants"),
                "rename the dimension: in launch expressions the two would be one name",
            );
        }
        if !d.shapes.contains_key(&d.primary) {
            let help = one_of(&d.primary, d.shapes.keys().map(String::as_str), "shapes");
            self.push(
                &["primary"],
                format!("the primary shape `{}` is not under `shapes`", d.primary),
                help,
            );
        }
        if d.seeds.is_empty() {
            self.push(
                &["seeds"],
                "`seeds` is empty".into(),
                "give at least one seed, e.g. `seeds: [0]`",
            );
        }
    }

    fn args(&mut self) {
        let d = self.decl;
        if d.args.is_empty() {
            self.push(
                &["args"],
                "`args` is empty".into(),
                "list the kernel's parameters in order",
            );
        }
        for (i, a) in d.args.iter().enumerate() {
            let idx = i.to_string();
            if !is_identifier(&a.name) {
                self.push(
                    &["args", &idx, "name"],
                    format!("argument name `{}` is not a name", a.name),
                    "use letters, digits and `_`, starting with a letter",
                );
            } else if d.args[..i].iter().any(|b| b.name == a.name) {
                self.push(
                    &["args", &idx, "name"],
                    format!("argument `{}` is listed twice", a.name),
                    "give every argument its own name",
                );
            }
            self.arg_keys(&idx, a);
        }
        self.sources();
    }

    /// The keys each role takes.
    fn arg_keys(&mut self, idx: &str, a: &Arg) {
        let article = if a.role == Role::Scalar { "a" } else { "an" };
        let role = a.role.name();
        let not_for = |key: &str| format!("{article} {role} argument takes no `{key}`");
        let mut unwanted = Vec::new();
        match a.role {
            Role::Scalar => {
                if !a.shape.is_empty() {
                    unwanted.push(("shape", "scalars are passed by value: remove `shape`"));
                }
                if a.init.is_some() {
                    unwanted.push(("init", "give a scalar its `value` instead"));
                }
                if a.quantize.is_some() {
                    unwanted.push(("quantize", "only FP8 inputs are quantized"));
                }
                match &a.value {
                    None => self.push(
                        &["args", idx],
                        format!("scalar `{}` has no `value`", a.name),
                        "add `value:` (a number, or an expression over the dims)",
                    ),
                    Some(v)
                        if !a.dtype.is_float()
                            && !matches!(v, super::spec::ScalarValue::Int(_)) =>
                    {
                        self.push(
                            &["args", idx, "value"],
                            format!(
                                "scalar `{}` is {} but its value is not an integer",
                                a.name, a.dtype
                            ),
                            "give an integer or an integer expression, or make it fp32",
                        )
                    }
                    Some(_) => {}
                }
            }
            Role::Input | Role::Output => {
                if a.shape.is_empty() {
                    self.push(
                        &["args", idx],
                        format!("{role} `{}` has no `shape`", a.name),
                        "give its extents, e.g. `shape: [rows, hidden]`",
                    );
                }
                if a.value.is_some() {
                    unwanted.push((
                        "value",
                        "a buffer's values come from `init` (inputs) or the kernel (outputs)",
                    ));
                }
                if a.role == Role::Output {
                    if a.init.is_some() {
                        unwanted.push((
                            "init",
                            "outputs are filled with a NaN sentinel before the kernel runs",
                        ));
                    }
                    if a.quantize.is_some() {
                        unwanted.push(("quantize", "only inputs are quantized"));
                    }
                }
            }
        }
        for (key, help) in unwanted {
            self.push_key(&["args", idx, key], not_for(key), help);
        }
        if let Some(why) = a.init.as_ref().and_then(init_problem) {
            self.push(
                &["args", idx, "init"],
                format!("the `init` of `{}`: {why}", a.name),
                "",
            );
        }
        if let Some(q) = &a.quantize {
            if !a.dtype.is_fp8() {
                self.push_key(
                    &["args", idx, "quantize"],
                    format!(
                        "`{}` is {}: only FP8 inputs (e4m3, e5m2) are quantized",
                        a.name, a.dtype
                    ),
                    "remove `quantize`, or make the input e4m3 or e5m2",
                );
            }
            if q.block.len() > a.shape.len() {
                self.push(
                    &["args", idx, "quantize", "block"],
                    format!(
                        "the block has {} extents but `{}` has {} dimensions",
                        q.block.len(),
                        a.name,
                        a.shape.len()
                    ),
                    "give the block's extent in the trailing dimensions",
                );
            }
            match self.decl.arg(&q.scales) {
                None => {
                    let help = one_of(&q.scales, self.arg_names(), "arguments");
                    self.push(&["args", idx, "quantize", "scales"], format!("no argument `{}` to hold the scales", q.scales), help);
                }
                Some((_, s)) if s.role != Role::Input || !s.dtype.is_float() || s.dtype.is_fp8() => self.push(
                    &["args", idx, "quantize", "scales"],
                    format!("the scales go to `{}`, a {} {}; they need a float input (fp32, fp16 or bf16)", s.name, s.dtype, s.role.name()),
                    "declare the scales as an fp32 input",
                ),
                Some(_) => {}
            }
        }
    }

    /// Every input is drawn exactly once: by its `init`, a generator, or as the scales
    /// of a quantized input.
    fn sources(&mut self) {
        let d = self.decl;
        let mut sources: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for a in d.args.iter().filter(|a| a.role == Role::Input) {
            let list = sources.entry(a.name.as_str()).or_default();
            if a.init.is_some() {
                list.push("its `init`".into());
            }
        }
        for (g, spec) in &d.generators {
            for arg in &spec.args {
                sources
                    .entry(arg.as_str())
                    .or_default()
                    .push(format!("generator `{g}`"));
            }
        }
        for a in &d.args {
            if let Some(q) = &a.quantize {
                sources
                    .entry(q.scales.as_str())
                    .or_default()
                    .push(format!("the quantization of `{}`", a.name));
            }
        }
        for (i, a) in d
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.role == Role::Input)
        {
            let list = &sources[a.name.as_str()];
            let idx = i.to_string();
            match list.len() {
                0 => self.push(&["args", &idx], format!("input `{}` has no values", a.name), "give it an `init` (`{normal: {}}`, `{uniform: {low, high}}`, `{constant: x}`), or list it under a generator"),
                1 => {}
                _ => self.push(&["args", &idx], format!("input `{}` is drawn twice: by {}", a.name, list.join(" and ")), "keep one of them"),
            }
        }
    }

    fn generators(&mut self) {
        let d = self.decl;
        for (g, spec) in &d.generators {
            let Some(kind) = GeneratorKind::parse(&spec.kind) else {
                let help = one_of(
                    &spec.kind,
                    GeneratorKind::NAMES.iter().copied(),
                    "generator kinds",
                );
                self.push(
                    &["generators", g, "kind"],
                    format!("unknown generator kind `{}`", spec.kind),
                    help,
                );
                continue;
            };
            if spec.args.len() != kind.parts().len() {
                self.push(
                    &["generators", g, "args"],
                    format!(
                        "generator `{g}` ({}) fills {} inputs, {}; {} are listed",
                        spec.kind,
                        kind.parts().len(),
                        kind.parts().join(", "),
                        spec.args.len()
                    ),
                    format!(
                        "list the inputs it fills, in the order {}",
                        kind.parts().join(", ")
                    ),
                );
            }
            for (i, arg) in spec.args.iter().enumerate() {
                match d.arg(arg) {
                    Some((_, a)) if a.role == Role::Input && a.dtype.is_float() => {}
                    Some((_, a)) => self.push(
                        &["generators", g, "args", &i.to_string()],
                        format!(
                            "generator `{g}` fills `{arg}`, a {} {}",
                            a.dtype,
                            a.role.name()
                        ),
                        "generators fill float inputs",
                    ),
                    None => {
                        let help = one_of(arg, self.arg_names(), "arguments");
                        self.push(
                            &["generators", g, "args", &i.to_string()],
                            format!("generator `{g}` names `{arg}`, which is not an argument"),
                            help,
                        );
                    }
                }
            }
        }
    }

    fn recipes(&mut self) {
        let d = self.decl;
        for (r, spec) in &d.recipes {
            for (g, recipe) in &spec.generators {
                let Some(gen) = d.generators.get(g) else {
                    let help = one_of(g, d.generators.keys().map(String::as_str), "generators");
                    self.push_key(
                        &["recipes", r, "generators", g],
                        format!("recipe `{r}` sets generator `{g}`, which is not declared"),
                        help,
                    );
                    continue;
                };
                if let Some(kind) = GeneratorKind::parse(&gen.kind) {
                    if !kind.recipes().contains(&recipe.as_str()) {
                        let help = one_of(
                            recipe,
                            kind.recipes().iter().copied(),
                            "recipes of this generator",
                        );
                        self.push(
                            &["recipes", r, "generators", g],
                            format!("generator `{g}` ({}) has no recipe `{recipe}`", gen.kind),
                            help,
                        );
                    }
                }
            }
            for (arg, init) in &spec.init {
                if let Some(why) = init_problem(init) {
                    self.push(
                        &["recipes", r, "init", arg],
                        format!("recipe `{r}` draws `{arg}` badly: {why}"),
                        "",
                    );
                }
                let own = d
                    .arg(arg)
                    .is_some_and(|(_, a)| a.role == Role::Input && a.init.is_some());
                if !own {
                    self.push_key(&["recipes", r, "init", arg], format!("recipe `{r}` redraws `{arg}`, which is not an input with its own `init`"), "a recipe replaces the `init` of an input; a generator's inputs change through `generators:`");
                }
            }
        }
        let names = d.recipe_names();
        for (shape, list) in &d.inputs {
            if !d.shapes.contains_key(shape) {
                let help = one_of(shape, d.shapes.keys().map(String::as_str), "shapes");
                self.push_key(
                    &["inputs", shape],
                    format!("`inputs` names `{shape}`, which is not a shape"),
                    help,
                );
            }
            for (i, r) in list.iter().enumerate() {
                let at = ["inputs", shape.as_str(), &i.to_string()];
                if !names.contains(&r.as_str()) {
                    let help = one_of(r, names.iter().copied(), "recipes");
                    self.push(&at, format!("no recipe `{r}`"), help);
                } else if list[..i].contains(r) {
                    self.push(
                        &at,
                        format!("recipe `{r}` is listed twice for shape `{shape}`"),
                        "list each recipe once",
                    );
                }
            }
        }
    }

    fn reference(&mut self, root: &Path) {
        let r = &self.decl.reference;
        let kernel =
            r.source.is_some() || r.entry.is_some() || r.launch.is_some() || r.args.is_some();
        match (kernel, &r.run) {
            (true, Some(_)) => self.push(&["reference", "run"], "the reference is a kernel (`source`) or a command (`run`), not both".into(), "keep one of them"),
            (false, None) => self.push(&["reference"], "the reference names neither a kernel nor a command".into(), "give `source`, `entry` and `launch` of a reference kernel, or `run: [command, ...]`"),
            (false, Some(run)) if run.is_empty() => self.push(&["reference", "run"], "`run` is empty".into(), "give the command and its arguments"),
            _ => {}
        }
        if kernel {
            for key in ["source", "entry", "launch"] {
                let missing = match key {
                    "source" => r.source.is_none(),
                    "entry" => r.entry.is_none(),
                    _ => r.launch.is_none(),
                };
                if missing {
                    self.push(
                        &["reference"],
                        format!("the reference kernel has no `{key}`"),
                        format!("add `{key}:`"),
                    );
                }
            }
            if let Some(source) = &r.source {
                if !root.join(source).is_file() {
                    self.push(
                        &["reference", "source"],
                        format!("reference source `{source}` does not exist"),
                        "give the .cu file's path relative to the folder of pipeline.yaml",
                    );
                }
            }
        }
        for (i, a) in r.args.iter().flatten().enumerate() {
            let at = ["reference", "args", &i.to_string()];
            match a {
                RefArg::Name(n) if self.decl.arg(n).is_none() => {
                    let help = one_of(n, self.arg_names(), "arguments");
                    self.push(
                        &at,
                        format!("the reference takes `{n}`, which is not an argument"),
                        help,
                    );
                }
                RefArg::Extra(a) if a.role != Role::Scalar || a.value.is_none() => {
                    self.push(
                        &at,
                        format!(
                            "the reference's own argument `{}` must be a scalar with a `value`",
                            a.name
                        ),
                        "buffers come from the workload's arguments: name them instead",
                    );
                }
                _ => {}
            }
        }
        for (out, dtype) in &r.outputs {
            let is_output = self
                .decl
                .arg(out)
                .is_some_and(|(_, a)| a.role == Role::Output);
            if !is_output {
                let outs = self.decl.outputs().map(|a| a.name.as_str());
                self.push_key(
                    &["reference", "outputs", out],
                    format!("`{out}` is not an output"),
                    one_of(out, outs, "outputs"),
                );
            } else if !dtype.is_float() {
                self.push(
                    &["reference", "outputs", out],
                    format!("the reference writes `{out}` as {dtype}"),
                    "write reference outputs as fp32 (or another float type)",
                );
            }
        }
    }

    fn gates(&mut self) {
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

    /// Parse the expressions, then evaluate them on every shape (and variant).
    fn evaluate(&mut self) {
        let define_names = self.define_names();
        let names: Vec<&str> = define_names.iter().map(String::as_str).collect();
        let compiled = match Compiled::new(self.name, self.decl, &names) {
            Ok(c) => c,
            Err(problems) => {
                self.out.extend(problems);
                return;
            }
        };
        for shape in self.decl.shapes.keys() {
            let dims = compiled.dims(shape).expect("a declared shape");
            let what = format!("shape `{shape}`");
            if let Err(p) = self.buffers(&compiled, &dims, &what) {
                self.out.push(p);
                continue;
            }
            // A launch that reads the cubin's globals is checked once the kernel is built.
            if self.decl.launch.globals.is_empty() {
                for (variant, defines) in self.variants() {
                    let what = format!("shape `{shape}` with variant `{variant}`");
                    self.launch(compiled.launch(&dims, &defines, &what), &["launch"], &what);
                }
            }
            let reference_globals = self
                .decl
                .reference
                .launch
                .as_ref()
                .is_some_and(|l| !l.globals.is_empty());
            if let Some(g) = compiled
                .reference_launch(&dims, &what)
                .filter(|_| !reference_globals)
            {
                self.launch(g, &["reference", "launch"], &what);
            }
        }
    }

    /// Extents, blocks and values on one shape.
    fn buffers(&self, c: &Compiled, dims: &Bindings, what: &str) -> Result<(), Problem> {
        let d = self.decl;
        for (i, a) in d.args.iter().enumerate() {
            let idx = i.to_string();
            let at = |rest: &[&str]| {
                let mut p = vec!["args", idx.as_str()];
                p.extend(rest);
                path(self.name, &p)
            };
            if a.role == Role::Scalar {
                if let (Number::Int(v), Some(range)) = (c.scalar(i, dims, what)?, int_range(a)) {
                    if !range.contains(&v) {
                        return Err(Problem::at(
                            at(&["value"]),
                            format!("scalar `{}` is {v} for {what}, outside {}", a.name, a.dtype),
                            "use int64, or smaller dimensions",
                        ));
                    }
                }
                continue;
            }
            let extents = c.extents(i, dims, what)?;
            let bytes = extents
                .iter()
                .try_fold(a.dtype.size(), |n, &e| n.checked_mul(e));
            if bytes.is_none_or(|b| b > isize::MAX as usize) {
                return Err(Problem::at(
                    at(&["shape"]),
                    format!("`{}` does not fit in memory for {what}", a.name),
                    "check the extents",
                ));
            }
            if let Some(q) = &a.quantize {
                let block = c.block(i, dims, what)?;
                let trailing = &extents[extents.len() - block.len()..];
                if let Some((j, (e, b))) = trailing
                    .iter()
                    .zip(&block)
                    .enumerate()
                    .find(|(_, (e, b))| *e % *b != 0)
                {
                    return Err(Problem::at(
                        at(&["quantize", "block", &j.to_string()]),
                        format!(
                            "the block extent {b} does not divide `{}`'s extent {e} for {what}",
                            a.name
                        ),
                        "quantization blocks tile the tensor exactly",
                    ));
                }
                let blocks = extents.iter().product::<usize>() / block.iter().product::<usize>();
                let (s, _) = d.arg(&q.scales).expect("checked by `structure`");
                let scales = c.extents(s, dims, what)?.iter().product::<usize>();
                if scales != blocks {
                    return Err(Problem::at(
                        at(&["quantize", "scales"]),
                        format!(
                            "`{}` has {blocks} blocks for {what} but `{}` holds {scales} scales",
                            a.name, q.scales
                        ),
                        "give the scales one element per block",
                    ));
                }
            }
        }
        for (g, spec) in &d.generators {
            let shapes: Vec<Vec<usize>> = spec
                .args
                .iter()
                .map(|n| c.extents(d.arg(n).expect("checked").0, dims, what))
                .collect::<Result<_, _>>()?;
            if shapes.iter().any(|s| s != &shapes[0] || s.len() < 2) {
                return Err(Problem::at(path(self.name, &["generators", g, "args"]), format!("generator `{g}` needs inputs of one shape `[..., S, D]`; for {what} they are {shapes:?}"), "give its inputs the same extents"));
            }
        }
        for (i, a) in d.reference.args.iter().flatten().enumerate() {
            if matches!(a, RefArg::Extra(_)) {
                c.reference_scalar(i, dims, what)?;
            }
        }
        Ok(())
    }

    /// A launch's evaluation, checked against CUDA's architectural limits.
    fn launch(&mut self, g: Result<super::exprs::Geometry, Problem>, at: &[&str], what: &str) {
        let g = match g {
            Ok(g) => g,
            Err(p) => return self.out.push(p),
        };
        for e in Limits::ARCHITECTURAL.check(&g) {
            let mut p: Vec<&str> = at.to_vec();
            p.push(e.key);
            let index = e.index.map(|i| i.to_string());
            let declared = match e.key {
                "grid" => self.decl_launch(at).grid.len(),
                "block" => self.decl_launch(at).block.len(),
                _ => 1,
            };
            // An extent that is not written (z of a 2-D grid) is 1: point at the key.
            if let Some(i) = index
                .as_deref()
                .filter(|_| e.index.is_some_and(|i| i < declared))
            {
                p.push(i);
            }
            self.push(&p, format!("the launch for {what} is beyond CUDA's limits: {}", e.message), "make the extent smaller (grid.x goes up to 2³¹−1; y and z to 65535), or change the shape");
        }
    }

    fn decl_launch(&self, at: &[&str]) -> &'a super::spec::Launch {
        match at {
            ["reference", ..] => self.decl.reference.launch.as_ref().expect("evaluated"),
            _ => &self.decl.launch,
        }
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

/// The values an integer scalar can hold.
fn int_range(a: &Arg) -> Option<std::ops::RangeInclusive<i64>> {
    match a.dtype {
        super::dtype::Dtype::Int32 => Some(i64::from(i32::MIN)..=i64::from(i32::MAX)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
