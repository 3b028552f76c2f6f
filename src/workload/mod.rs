//! Workloads declared in pipeline.yaml (`workloads:`): any kernel, described by its
//! dimensions and shapes, its arguments in ABI order, how its inputs are drawn, its launch
//! geometry, a reference and per-output gates. `docs/guide/workloads.md` is the user's
//! page; `docs/ARCHITECTURE.md` places the module.
//!
//! - [`spec`]: the typed declaration; [`dtype`]: element types and their bytes.
//! - [`validate`]: the checks at load time, as [`problem::Problem`]s that
//!   [`problem::Locator`] turns into `file:line:column` errors; [`exprs`]: the
//!   expressions (extents, values, launch) parsed and evaluated; [`limits`]: what a launch
//!   may ask for.
//! - [`inputs`]: one (shape, recipe, seed)'s arguments as bytes, with [`generators`] for
//!   inputs drawn together; [`case`]: that case on disk for a reference command.
//! - [`compare`]: outputs against the reference, per output; [`abi`]: the declaration
//!   against a cubin's parameter layout.

pub mod abi;
pub mod case;
pub mod compare;
pub mod dtype;
pub mod exprs;
pub mod generators;
pub mod inputs;
pub mod limits;
pub mod problem;
pub mod spec;
pub mod validate;

#[cfg(test)]
pub(crate) mod testing;

pub use spec::Declaration;

use crate::pipeline::diag::Diagnostic;
use std::path::Path;

/// Every problem with the `workloads:` of `pipeline`, placed in `text` (the file at
/// `file`, in project `root`).
pub fn diagnostics(
    pipeline: &crate::pipeline::Pipeline,
    text: &str,
    file: &Path,
    root: &Path,
) -> Vec<Diagnostic> {
    let problems = validate::check(pipeline, root);
    if problems.is_empty() {
        return Vec::new();
    }
    let locator = problem::Locator::new(file, text);
    problems.iter().map(|p| locator.diagnostic(p)).collect()
}
