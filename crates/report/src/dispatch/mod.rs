//! The dispatch table, `artifacts/dispatch.json`: for each workload and each of its declared
//! shapes, which kernel to call — a pipeline variant or a tune stage's elite — by the
//! harness (bench p50) and by ncu's kernel time, with the runner-up's margin and what a
//! caller needs to build and launch it. The headline ranks variants on the primary shape
//! only; a caller of these kernels needs the answer per shape.
//!
//! The ranking is honest by construction: a kernel counts for a shape only when every
//! record of that shape passed correctness (each recipe and seed the workload declares for
//! it, [`rank::eligibility`]), only records measured on one GPU model count (the one most
//! timed harness records name), records of another build are left out
//! ([`crate::measured`]), and a margin within the spread is flagged as a tie.
//!
//! Pure: records in ([`Artifacts`], the pipeline), table out; the summarize stage writes it
//! and the report renders it.

mod candidates;
mod rank;
#[cfg(test)]
mod tests;

use crate::artifacts::Artifacts;
use candidates::Candidate;
use rank::Eligibility;
use repro_pipeline::kind::Configs;
use repro_pipeline::workload::spec::{Declaration, Launch};
use repro_pipeline::workload::Workloads;
use repro_pipeline::Pipeline;
use repro_schema::{
    BuildRecord, DispatchFile, DispatchTable, Excluded, Figure, LaunchRule, NcuTarget, Ranking,
    ShapeDispatch,
};
use std::collections::{BTreeMap, BTreeSet};

/// Where the summarize stage writes the table.
pub const DISPATCH: &str = "artifacts/dispatch.json";

/// The dispatch table of every workload of `pipeline`, from `artifacts`.
pub fn table(pipeline: &Pipeline, configs: &Configs, artifacts: &Artifacts) -> DispatchFile {
    let workloads = Workloads::of(pipeline);
    DispatchFile {
        workloads: workloads
            .iter()
            .map(|workload| Workload::new(pipeline, configs, artifacts, workload).table())
            .collect(),
    }
}

/// One workload's records, ready to rank shape by shape.
struct Workload<'a> {
    name: &'a str,
    decl: &'a Declaration,
    candidates: Vec<Candidate<'a>>,
    /// The profile stage's targets of its candidates.
    targets: Vec<&'a NcuTarget>,
    builds: &'a [BuildRecord],
    gpu: Option<String>,
}

impl<'a> Workload<'a> {
    fn new(
        pipeline: &Pipeline,
        configs: &Configs,
        artifacts: &'a Artifacts,
        (name, decl): (&'a str, &'a Declaration),
    ) -> Workload<'a> {
        let candidates = candidates::of(pipeline, configs, artifacts, name);
        let gpu = rank::gpu_of(candidates.iter().flat_map(|c| c.results));
        let targets = artifacts
            .ncu
            .iter()
            .flat_map(|n| &n.targets)
            .filter(|t| candidates.iter().any(|c| c.name == t.variant))
            .collect();
        Workload {
            name,
            decl,
            candidates,
            targets,
            builds: artifacts.builds.as_deref().unwrap_or_default(),
            gpu,
        }
    }

    fn table(&self) -> DispatchTable {
        let shapes: Vec<ShapeDispatch> = self
            .decl
            .shapes
            .iter()
            .map(|(shape, dims)| {
                let dims = dims.iter().map(|(k, v)| (k.clone(), *v)).collect();
                self.shape(shape, dims)
            })
            .collect();
        let named: BTreeSet<&str> = shapes
            .iter()
            .flat_map(|s| s.harness.iter().chain(&s.ncu))
            .flat_map(|r| std::iter::once(&r.best).chain(&r.runner_up))
            .map(|f| f.name.as_str())
            .collect();
        DispatchTable {
            workload: self.name.to_string(),
            gpu: self.gpu.clone(),
            launch: launch_rule(&self.decl.launch),
            kernels: self
                .candidates
                .iter()
                .filter(|c| named.contains(c.name.as_str()))
                .map(|c| (c.name.clone(), c.call.clone()))
                .collect(),
            shapes,
        }
    }

    /// One shape: who may be called for it, and each measure's ranking of them.
    fn shape(&self, shape: &str, dims: BTreeMap<String, i64>) -> ShapeDispatch {
        let expected: Vec<(&str, u64)> = self
            .decl
            .recipes_of(shape)
            .into_iter()
            .flat_map(|recipe| self.decl.seeds.iter().map(move |s| (recipe, *s)))
            .collect();
        let mut ineligible = Vec::new();
        let mut eligible: Vec<&Candidate> = Vec::new();
        for c in &self.candidates {
            let verdict = match &c.stale {
                Some(why) if c.results.iter().any(|r| r.shape == shape) => {
                    Eligibility::Ineligible(format!("its records are of another build: {why}"))
                }
                _ => rank::eligibility(c.results, shape, &expected, self.gpu.as_deref()),
            };
            match verdict {
                Eligibility::Eligible => eligible.push(c),
                Eligibility::Ineligible(reason) => ineligible.push(Excluded {
                    name: c.name.clone(),
                    reason,
                }),
                Eligibility::NoRecords => {}
            }
        }
        let (harness, ncu, not_counted) = match self.gpu.as_deref() {
            Some(gpu) => {
                let timed = eligible
                    .iter()
                    .filter_map(|c| rank::harness_figure(&c.name, c.results, shape, gpu))
                    .collect();
                let (profiled, not_counted) = self.ncu_figures(shape, gpu, &eligible);
                (timed, profiled, not_counted)
            }
            None => Default::default(),
        };
        let profiled: Vec<String> = ncu.iter().map(|f| f.name.clone()).collect();
        let (harness, ncu) = (rank::rank(harness), rank::rank(ncu));
        ShapeDispatch {
            shape: shape.to_string(),
            dims,
            agree: agreement(harness.as_ref(), ncu.as_ref(), &profiled),
            harness,
            ncu,
            ineligible,
            not_counted,
        }
    }

    /// The ncu figures of `eligible` kernels on `shape`, from profiles on `gpu` of the
    /// build in place; and the profiles of them that do not count, with why.
    fn ncu_figures(
        &self,
        shape: &str,
        gpu: &str,
        eligible: &[&Candidate],
    ) -> (Vec<Figure>, Vec<Excluded>) {
        let mut figures: Vec<Figure> = Vec::new();
        let mut left_out = Vec::new();
        // A kernel's first profile of the shape is the one that counts.
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for t in &self.targets {
            let on_shape = t.shape.as_deref().unwrap_or(&self.decl.primary) == shape;
            if !on_shape || !t.status.is_ok() || !eligible.iter().any(|c| c.name == t.variant) {
                continue;
            }
            let Some(figure) = rank::ncu_figure(t) else {
                continue;
            };
            if !seen.insert(&t.variant) {
                continue;
            }
            let recorded = t.measured.as_ref().and_then(|m| m.key.get("gpu"));
            let why = match (crate::measured::ncu_target(t, self.builds), recorded) {
                (Some(stale), _) => Some(format!("ncu profiled another build: {stale}")),
                (None, None) => Some("its ncu profile does not record the GPU".to_string()),
                (None, Some(key)) if !rank::names_model(key, gpu) => {
                    Some(format!("ncu profiled it on {key}, not {gpu}"))
                }
                _ => None,
            };
            match why {
                Some(reason) => left_out.push(Excluded {
                    name: t.variant.clone(),
                    reason,
                }),
                None => figures.push(figure),
            }
        }
        (figures, left_out)
    }
}

/// Whether ncu's best is the harness's; `None` unless ncu measured (`profiled`) the
/// harness's best and another kernel: one profile alone confirms nothing.
fn agreement(
    harness: Option<&Ranking>,
    ncu: Option<&Ranking>,
    profiled: &[String],
) -> Option<bool> {
    let (harness, ncu) = (harness?, ncu?);
    (ncu.ranked > 1 && profiled.contains(&harness.best.name))
        .then(|| ncu.best.name == harness.best.name)
}

/// The workload's `launch:` as the table states it.
fn launch_rule(l: &Launch) -> LaunchRule {
    let text = |exprs: &[repro_pipeline::workload::spec::ExprText]| {
        exprs.iter().map(|e| e.0.clone()).collect::<Vec<_>>()
    };
    LaunchRule {
        grid: text(&l.grid),
        block: text(&l.block),
        smem: l.smem.as_ref().map(|e| e.0.clone()),
        globals: l.globals.clone(),
        defaults: l.defines.clone(),
        requires: text(&l.requires),
    }
}
