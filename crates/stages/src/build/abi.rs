//! The ABI gate: each compiled cubin's parameter layout (its `.nv.info` records) against
//! the arguments its workload declares, so a declaration that does not match the kernel's
//! signature fails the build, at the argument's `file:line:col`, before anything launches it.

use repro_pipeline::workload::abi;
use repro_pipeline::workload::Declaration;
use repro_pipeline::{workload::problem::path, workload::problem::Problem};
use repro_schema::GateResult;
use std::path::Path;

/// The gate's name in build records.
pub const GATE: &str = "abi.params";

/// Whose parameters a target's cubin must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declared {
    /// A variant of workload `.0`: the workload's `args`.
    Kernel(String),
    /// The reference kernel of workload `.0`: its `reference.args`, else the `args`.
    Reference(String),
}

/// The gate for `entry` of the cubin at `cubin`, declared by `declared` in `decl`;
/// `render` places a problem in pipeline.yaml. A cubin that cannot be read fails it too.
pub fn gate(
    declared: &Declared,
    decl: &Declaration,
    entry: &str,
    cubin: &Path,
    render: &dyn Fn(&Problem) -> String,
) -> GateResult {
    let (workload, want, list) = match declared {
        Declared::Kernel(w) => (w, abi::kernel_params(w, decl), path(w, &["args"])),
        Declared::Reference(w) => {
            let list = match decl.reference.args {
                Some(_) => path(w, &["reference", "args"]),
                None => path(w, &["args"]),
            };
            (w, abi::reference_params(w, decl), list)
        }
    };
    let problems = match std::fs::read(cubin) {
        Ok(bytes) => match abi::layout(&bytes, entry) {
            Ok(layout) => abi::check(entry, &want, &layout, list),
            Err(why) => vec![Problem::at(
                path(workload, &[]),
                format!("cannot read the parameters of `{entry}` from its cubin: {why}"),
                "",
            )],
        },
        Err(e) => vec![Problem::at(
            path(workload, &[]),
            format!("cannot read {}: {e}", cubin.display()),
            "",
        )],
    };
    let mut g = GateResult::at_most(GATE, entry, problems.len() as f64, 0.0);
    if !problems.is_empty() {
        g.detail = Some(problems.iter().map(render).collect::<Vec<_>>().join("\n"));
    }
    g
}
