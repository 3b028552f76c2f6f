//! The kernel's arguments: names, the keys each role takes, quantization, one source per input.

use super::{init_problem, is_identifier, one_of, Checker};
use crate::{workload::spec::Arg, workload::spec::Role, workload::spec::ScalarValue};
use std::collections::BTreeMap;

impl Checker<'_> {
    pub(super) fn args(&mut self) {
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
                    Some(v) if !a.dtype.is_float() && !matches!(v, ScalarValue::Int(_)) => self
                        .push(
                            &["args", idx, "value"],
                            format!(
                                "scalar `{}` is {} but its value is not an integer",
                                a.name, a.dtype
                            ),
                            "give an integer or an integer expression, or make it fp32",
                        ),
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
}
