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
//!   inputs drawn together; [`case`]: that case on disk for a reference command, which
//!   [`command`] runs.
//! - [`compare`]: outputs against the reference, per output; [`abi`]: the declaration
//!   against a cubin's parameter layout.
//! - [`builtin`]: `workload: {op: ...}`, the built-in workload, read as a declaration;
//!   [`Workloads`] is every workload of a pipeline, declared or built in.

pub mod abi;
pub mod accuracy;
mod blocks;
pub mod builtin;
pub mod case;
pub mod command;
pub mod compare;
pub mod dtype;
pub mod e4m3;
pub mod exprs;
pub mod generators;
pub mod inputs;
mod keystream;
pub mod limits;
pub mod problem;
pub mod spec;
pub mod tails;
pub mod validate;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use spec::Declaration;

use crate::diag::Diagnostic;
use crate::Pipeline;
use indexmap::IndexMap;
use std::path::Path;

/// Every problem with the workloads of `pipeline` (`workloads:` and the built-in
/// `workload:`), placed in `text` (the file at `file`, in project `root`).
pub fn diagnostics(pipeline: &Pipeline, text: &str, file: &Path, root: &Path) -> Vec<Diagnostic> {
    let mut problems = builtin::problems(pipeline);
    problems.extend(validate::check(pipeline, root));
    problems.extend(tails::check(pipeline));
    if problems.is_empty() {
        return Vec::new();
    }
    let locator = problem::Locator::new(file, text);
    problems.iter().map(|p| locator.diagnostic(p)).collect()
}

/// `problem` as `file:line:col: error: ...` in the pipeline file `file` (read now); a
/// problem of the built-in workload at its `workload:` key.
pub fn render(pipeline: &Pipeline, file: &Path, problem: &problem::Problem) -> String {
    let Ok(text) = std::fs::read_to_string(file) else {
        return format!("{}: error: {}", file.display(), problem.message);
    };
    let mut problem = problem.clone();
    let declared = |name: &String| pipeline.workloads.contains_key(name);
    if problem.path.first().is_some_and(|k| k == "workloads")
        && problem.path.get(1).is_some_and(|n| !declared(n))
    {
        problem.path.splice(..2, ["workload".to_string()]);
    }
    problem::Locator::new(file, &text)
        .diagnostic(&problem)
        .to_string()
}

/// Every workload of a pipeline, in order: the declared ones (`workloads:`), then the
/// built-in one (`workload:`) as a declaration.
#[derive(Debug, Clone, Default)]
pub struct Workloads {
    list: IndexMap<String, Declaration>,
    builtin: Option<String>,
}

impl Workloads {
    pub fn of(p: &Pipeline) -> Workloads {
        let mut list = p.workloads.clone();
        let builtin = builtin::declaration(p).map(|(name, decl)| {
            list.insert(name.clone(), decl);
            name
        });
        Workloads { list, builtin }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Declaration)> {
        self.list.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.keys().map(String::as_str)
    }

    pub fn get(&self, name: &str) -> Option<&Declaration> {
        self.list.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The workload whose `kernels` list `kernel`.
    pub fn of_kernel(&self, kernel: &str) -> Option<(&str, &Declaration)> {
        self.iter()
            .find(|(_, d)| d.kernels.iter().any(|k| k == kernel))
    }

    /// The workload variant `variant` of `p` runs.
    pub fn of_variant(&self, p: &Pipeline, variant: &str) -> Option<(&str, &Declaration)> {
        self.of_kernel(&p.variants.get(variant)?.kernel)
    }

    /// The variants of `p` that run workload `name`, sorted.
    pub fn variants_of<'p>(&self, p: &'p Pipeline, name: &str) -> Vec<&'p String> {
        p.variants
            .iter()
            .filter(|(_, v)| self.of_kernel(&v.kernel).is_some_and(|(w, _)| w == name))
            .map(|(v, _)| v)
            .collect()
    }

    /// The workload a baseline file ran: the one it names; for a file that names none
    /// (written before workloads were declared), the only workload, else the one whose
    /// `dims` its results have.
    pub fn of_baseline(&self, f: &repro_schema::BenchFile) -> Option<&str> {
        if let Some(w) = &f.workload {
            return self.list.get_key_value(w).map(|(k, _)| k.as_str());
        }
        if self.len() == 1 {
            return self.names().next();
        }
        let dims = &f.results.first()?.dims;
        self.iter()
            .find(|(_, d)| {
                d.dims.len() == dims.len() && d.dims.iter().all(|n| dims.contains_key(n))
            })
            .map(|(name, _)| name)
    }

    /// The precision class of `variant`: the one it or its kernel names, else its
    /// workload's default.
    pub fn class_of(&self, p: &Pipeline, variant: &str) -> Option<String> {
        p.precision_of(variant)
            .map(str::to_string)
            .or_else(|| self.of_variant(p, variant)?.1.precision.clone())
    }

    /// The precision class of kernel `kernel`'s variants that name none of their own: the
    /// kernel's, else its workload's default.
    pub fn class_of_kernel(&self, p: &Pipeline, kernel: &str) -> Option<String> {
        p.kernels
            .get(kernel)
            .and_then(|k| k.precision.clone())
            .or_else(|| self.of_kernel(kernel)?.1.precision.clone())
    }

    /// The control of workload `name`: its own `control`, else the pipeline's when that is
    /// one of its variants.
    pub fn control_of(&self, p: &Pipeline, name: &str) -> Option<String> {
        let decl = self.get(name)?;
        decl.control.clone().or_else(|| {
            let c = p.control.as_ref()?;
            let (w, _) = self.of_variant(p, c)?;
            (w == name).then(|| c.clone())
        })
    }

    /// The name the build gives workload `name`'s reference kernel (its cubins are
    /// `.repro/cubins/<that>.<arch>.cubin`): `reference` for the built-in workload,
    /// `reference-<name>` for a declared one.
    pub fn reference_name(&self, name: &str) -> String {
        if self.builtin.as_deref() == Some(name) {
            REFERENCE.to_string()
        } else {
            format!("{REFERENCE}-{name}")
        }
    }
}

/// The name (or prefix) of the build's reference cubins; no variant may use it.
pub const REFERENCE: &str = "reference";

#[cfg(test)]
mod tests {
    use super::*;
    use repro_schema::BenchFile;
    use repro_schema::BenchResult;
    use repro_schema::RunStatus;

    fn baseline(workload: Option<&str>, dims: &[(&str, i64)]) -> BenchFile {
        let dims = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        BenchFile {
            name: "torch".into(),
            kind: "baseline".into(),
            workload: workload.map(str::to_string),
            status: RunStatus::Ok,
            reason: None,
            defines: Default::default(),
            nvcc_version: None,
            precision: None,
            arch: None,
            driver: None,
            results: vec![BenchResult::blank("small", dims, 0, (1, 1), RunStatus::Ok)],
            gates: Vec::new(),
            measured: None,
        }
    }

    /// A baseline names its workload; one written before workloads (no `workload`) is the
    /// one whose dims its results have.
    #[test]
    fn a_baseline_belongs_to_the_workload_it_names_or_whose_dims_it_has() {
        let w = Workloads::of(&testing::pipeline(testing::SHIPPED_PIPELINE));
        let bhsd = [("B", 1), ("H", 2), ("S", 3), ("D", 64)];
        assert_eq!(
            w.of_baseline(&baseline(Some("rmsnorm"), &bhsd)),
            Some("rmsnorm")
        );
        assert_eq!(w.of_baseline(&baseline(Some("gemm"), &bhsd)), None);
        assert_eq!(w.of_baseline(&baseline(None, &bhsd)), Some("sdpa_fp8"));
        let rows = [("rows", 4), ("hidden", 8)];
        assert_eq!(w.of_baseline(&baseline(None, &rows)), Some("rmsnorm"));
        assert_eq!(w.of_baseline(&baseline(None, &[("rows", 4)])), None);
    }
}
