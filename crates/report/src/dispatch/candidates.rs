//! The kernels a workload's dispatch table may name: its pipeline variants, with their bench
//! records, and each of its tune stages' elite, with the bench records `topk.json` keeps;
//! each with what a caller needs to build and call it.

use crate::artifacts::Artifacts;
use crate::context::tune_stages;
use repro_pipeline::kind::Configs;
use repro_pipeline::workload::Workloads;
use repro_pipeline::{define_value, KernelSpec, Pipeline};
use repro_schema::{BenchResult, CandidateKind, EliteEntry, KernelCall, TuneOrigin};
use repro_tune::options::TuneOptions;
use std::collections::BTreeMap;

/// One kernel that may be called for the workload's shapes.
pub(super) struct Candidate<'a> {
    /// A variant's name, or an elite's (`tune-top1`), as its ncu targets name it.
    pub name: String,
    pub call: KernelCall,
    /// Every bench record of it: each shape, recipe and seed.
    pub results: &'a [BenchResult],
    /// Why its records are not of the build now in place ([`crate::measured`]).
    pub stale: Option<String>,
}

/// The variants of `workload`, then its tune stages' elite, best first.
pub(super) fn of<'a>(
    pipeline: &Pipeline,
    configs: &Configs,
    artifacts: &'a Artifacts,
    workload: &str,
) -> Vec<Candidate<'a>> {
    let workloads = Workloads::of(pipeline);
    let builds = artifacts.builds.as_deref().unwrap_or_default();
    let benches = artifacts.benches.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for name in workloads.variants_of(pipeline, workload) {
        let spec = &pipeline.variants[name];
        let Some(kernel) = pipeline.kernels.get(&spec.kernel) else {
            continue;
        };
        let defines = spec
            .defines
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), define_value(v).ok()?)))
            .collect();
        let file = benches
            .iter()
            .find(|f| f.name == *name && f.kind == "variant");
        out.push(Candidate {
            name: name.clone(),
            call: KernelCall {
                precision: workloads.class_of(pipeline, name),
                ..call(CandidateKind::Variant, &spec.kernel, kernel, defines)
            },
            results: file.map_or(&[], |f| &f.results),
            stale: file.and_then(|f| crate::measured::bench_file(f, builds)),
        });
    }
    let tunes = tune_stages(configs);
    for (stage, tune) in tunes.iter().filter(|(_, t)| t.workload == workload) {
        let (Some(data), Some(kernel)) = (
            artifacts.tunes.get(&tune.dir),
            pipeline.kernels.get(&tune.kernel),
        ) else {
            continue;
        };
        let precision = workloads.class_of_kernel(pipeline, &tune.kernel);
        for member in &data.elite {
            out.push(Candidate {
                name: tune.elite_name(member.rank),
                call: KernelCall {
                    patch: member.diff.clone(),
                    precision: precision.clone(),
                    tune: Some(TuneOrigin {
                        stage: stage.clone(),
                        rank: member.rank,
                        trial: member.trial,
                    }),
                    ..call(
                        CandidateKind::Tuned,
                        &tune.kernel,
                        kernel,
                        elite_defines(tune, member),
                    )
                },
                results: &member.bench,
                stale: None,
            });
        }
    }
    out
}

/// How to call `kernel` (the `kernels:` entry `name`) with `defines`.
fn call(
    kind: CandidateKind,
    name: &str,
    kernel: &KernelSpec,
    defines: BTreeMap<String, String>,
) -> KernelCall {
    KernelCall {
        kind,
        kernel: name.to_string(),
        source: kernel.source.clone(),
        patch: None,
        entry: kernel.entry.clone(),
        defines,
        flags: kernel.flags.clone(),
        precision: None,
        tune: None,
    }
}

/// An elite member's defines, as the tune stage compiled it: the tune's base defines, each
/// one its configuration sets replaced.
fn elite_defines(tune: &TuneOptions, member: &EliteEntry) -> BTreeMap<String, String> {
    let mut defines = tune.base_defines.clone();
    defines.extend(
        member
            .config
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string())),
    );
    defines
}
