//! How inputs are drawn: the generators and the recipes that vary them per shape.

use super::{init_problem, one_of, Checker};
use crate::workload::generators::GeneratorKind;
use crate::workload::spec::Role;

impl Checker<'_> {
    pub(super) fn generators(&mut self) {
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

    pub(super) fn recipes(&mut self) {
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
}
