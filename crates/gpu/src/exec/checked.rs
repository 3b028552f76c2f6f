//! One checked launch: every output judged against its gates, the outputs never written
//! named at their argument in pipeline.yaml.

use super::project::{Project, Resolved};
use super::ready::{ready, Ready};
use crate::harness::Session;
use crate::{warm::Reference, warm::Warm};
use anyhow::Context as _;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::problem::Problem;
use repro_pipeline::workload::Declaration;
use repro_pipeline::{workload::compare::check_case, workload::compare::OutputCheck};
use std::path::Path;

/// One checked run: every output judged against its gates, and the outputs the kernel
/// never wrote (each rendered at its argument in pipeline.yaml).
#[derive(Debug, Clone)]
pub struct Checked {
    pub checks: Vec<OutputCheck>,
    pub never_written: Vec<String>,
}

impl Checked {
    pub fn pass(&self) -> bool {
        self.never_written.is_empty() && self.checks.iter().all(OutputCheck::pass)
    }
}

/// Launch `ready` once with its outputs filled with the sentinel, and judge them.
pub(crate) fn check(
    session: &Session,
    project: &Project,
    r: &Resolved,
    ready: &Ready,
) -> anyhow::Result<Checked> {
    let written = session.run_checked(&ready.launch(), &ready.device_case)?;
    let never_written = never_written(&r.workload, &r.decl, &written, &r.target)
        .iter()
        .map(|p| project.render(p))
        .collect();
    let outputs: Vec<Vec<f64>> = written
        .iter()
        .zip(r.decl.outputs())
        .map(|(bytes, a)| a.dtype.decode(bytes))
        .collect();
    let case = &ready.prepared.case;
    let expected = (ready.prepared.expected.as_deref())
        .context("the case was made ready without the reference's outputs, for an unchecked run")?;
    let checks = check_case(&r.decl, case, &outputs, expected, r.class.as_deref());
    Ok(Checked {
        checks,
        never_written,
    })
}

/// A cubin of a workload on one case, checked without timing: what `repro exec
/// --no-timing` does for a cubin, for callers that hold the declaration (the GPU tests).
pub struct Run<'a> {
    /// The pipeline file problems are placed in.
    pub file: &'a Path,
    pub workload: &'a str,
    pub decl: &'a Declaration,
    pub cubin: &'a Path,
    pub entry: &'a str,
    /// The integer defines the cubin was compiled with (its launch may read them).
    pub defines: Bindings,
    pub reference: Reference,
    pub shape: &'a str,
    pub recipe: &'a str,
    pub seed: u64,
    pub class: Option<&'a str>,
}

/// Check `run` on the session of `warm` (keeping its case and reference outputs there).
pub fn check_run(warm: &mut Warm, run: &Run) -> anyhow::Result<Checked> {
    let project = Project::load(run.file)?;
    let dims = run
        .decl
        .shape_dims(run.shape)
        .with_context(|| format!("no shape `{}` in workload `{}`", run.shape, run.workload))?;
    let resolved = Resolved {
        workload: run.workload.to_string(),
        decl: run.decl.clone(),
        cubin: run.cubin.to_path_buf(),
        entry: run.entry.to_string(),
        defines: run.defines.clone(),
        target: format!("cubin `{}`", run.cubin.display()),
        reference: run.reference.clone(),
        shape: run.shape.to_string(),
        dims,
        recipe: run.recipe.to_string(),
        class: run.class.map(str::to_string),
    };
    let ready = ready(warm, &project, &resolved, run.seed, true)?;
    check(warm.session(), &project, &resolved, &ready)
}

/// The outputs `target` never wrote (every element still the sentinel), each a problem at
/// its argument in pipeline.yaml.
fn never_written(
    workload: &str,
    decl: &Declaration,
    written: &[Vec<u8>],
    target: &str,
) -> Vec<Problem> {
    decl.args
        .iter()
        .enumerate()
        .filter(|(_, a)| a.role == repro_pipeline::workload::spec::Role::Output)
        .zip(written)
        .filter(|((_, a), bytes)| {
            let n = bytes.len() / a.dtype.size();
            n > 0 && a.dtype.count_sentinels(bytes) == n
        })
        .map(|((i, a), _)| {
            Problem::at(
                repro_pipeline::workload::problem::path(workload, &["args", &i.to_string()]),
                format!("output `{}` is never written by {target}: every element still holds the sentinel it was filled with", a.name),
                "check that the kernel stores to this parameter, that it is at this position of the signature, and that the launch covers the output",
            )
        })
        .collect()
}
