//! The reference: a kernel or a command, its arguments and the outputs it writes.

use super::{one_of, Checker};
use crate::{workload::spec::RefArg, workload::spec::Role};
use std::path::Path;

impl Checker<'_> {
    pub(super) fn reference(&mut self, root: &Path) {
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
}
