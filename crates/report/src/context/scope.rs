//! One part of the report per workload: which records are its own (its variants' bench
//! files, the baselines that name it, its tune stages' outputs), its primary shape, its
//! control and its output's thresholds.

use super::*;
use repro_pipeline::kind::Configs;
use repro_pipeline::workload::spec::OutputGates;
use repro_pipeline::workload::Workloads;
use repro_schema::NcuSummary;
use repro_tune::{options::TuneOptions, options::DEFAULT_DIR};

/// What a workload's part of the report is about.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Empty when the pipeline declares no workload (the report is then one part of all
    /// the records).
    pub workload: String,
    pub primary: String,
    pub control: Option<String>,
    /// Its output's gates (the first output's, when it has several): the thresholds line.
    pub gates: Option<OutputGates>,
    /// Its tune stages: (name, folder).
    pub tunes: Vec<(String, String)>,
    /// The file name of its p50 chart under `reports/`.
    pub p50_chart: String,
}

/// A scope and its records.
pub struct Scoped {
    pub scope: Scope,
    pub artifacts: Artifacts,
}

/// The file name of the p50 chart of the `index`-th workload `name`.
pub fn p50_chart_name(index: usize, name: &str) -> String {
    match index {
        0 => P50_CHART.to_string(),
        _ => format!("p50_by_shape_{name}.svg"),
    }
}

/// The file name of the chart of the tune stage writing to `dir`.
pub fn tune_chart_name(dir: &str) -> String {
    if dir == DEFAULT_DIR {
        TUNE_CHART.to_string()
    } else {
        let name = dir.rsplit('/').next().unwrap_or(dir);
        format!("tune_best_so_far_{name}.svg")
    }
}

/// Every tune stage with the options its kind decoded.
pub fn tune_stages(configs: &Configs) -> Vec<(String, TuneOptions)> {
    configs
        .of::<TuneOptions>()
        .map(|(n, o)| (n.to_string(), o.clone()))
        .collect()
}

/// The report's parts: one per workload, in declaration order (one of everything when the
/// pipeline declares none).
pub fn scopes(pipeline: &Pipeline, configs: &Configs, artifacts: &Artifacts) -> Vec<Scoped> {
    let workloads = Workloads::of(pipeline);
    let tunes = tune_stages(configs);
    if workloads.is_empty() {
        let primary = shapes_in_order(artifacts.benches.iter().flatten())
            .into_iter()
            .next()
            .unwrap_or_else(|| NA.to_string());
        let scope = Scope {
            primary,
            control: pipeline.control.clone(),
            tunes: tunes.into_iter().map(|(n, o)| (n, o.dir)).collect(),
            p50_chart: P50_CHART.to_string(),
            ..Scope::default()
        };
        let mut artifacts = artifacts.clone();
        artifacts.tune = scope
            .tunes
            .first()
            .and_then(|(_, dir)| artifacts.tunes.get(dir).cloned());
        return vec![Scoped { scope, artifacts }];
    }
    workloads
        .iter()
        .enumerate()
        .map(|(i, (name, decl))| {
            let variants = workloads.variants_of(pipeline, name);
            let mine = |f: &&BenchFile| variants.contains(&&f.name);
            let theirs = |f: &&BenchFile| workloads.of_baseline(f) == Some(name);
            // Its variants and its tune stages' elite (`<tune dir name>-top<k>`).
            let elite_prefixes: Vec<String> = tunes
                .iter()
                .filter(|(_, o)| o.workload == name)
                .map(|(_, o)| o.elite_prefix())
                .collect();
            let baselines: Vec<&str> = artifacts
                .baselines
                .iter()
                .flatten()
                .filter(theirs)
                .map(|f| f.name.as_str())
                .collect();
            let profiled_here = |variant: &str| {
                variants.iter().any(|v| *v == variant)
                    || baselines.contains(&variant)
                    || elite_prefixes
                        .iter()
                        .any(|p| variant.starts_with(p.as_str()))
            };
            let scope = Scope {
                workload: name.to_string(),
                primary: decl.primary.clone(),
                control: workloads.control_of(pipeline, name),
                gates: decl
                    .outputs()
                    .next()
                    .and_then(|o| decl.gates.get(&o.name))
                    .cloned(),
                tunes: tunes
                    .iter()
                    .filter(|(_, o)| o.workload == name)
                    .map(|(n, o)| (n.clone(), o.dir.clone()))
                    .collect(),
                p50_chart: p50_chart_name(i, name),
            };
            let scoped = Artifacts {
                builds: artifacts.builds.clone(),
                benches: artifacts
                    .benches
                    .as_ref()
                    .map(|b| b.iter().filter(mine).cloned().collect()),
                baselines: artifacts
                    .baselines
                    .as_ref()
                    .map(|b| b.iter().filter(theirs).cloned().collect()),
                tune: scope
                    .tunes
                    .first()
                    .and_then(|(_, dir)| artifacts.tunes.get(dir).cloned()),
                tunes: artifacts.tunes.clone(),
                ncu: artifacts.ncu.as_ref().map(|n| NcuSummary {
                    targets: n
                        .targets
                        .iter()
                        .filter(|t| profiled_here(&t.variant))
                        .cloned()
                        .collect(),
                    ..n.clone()
                }),
            };
            Scoped {
                scope,
                artifacts: scoped,
            }
        })
        .collect()
}
