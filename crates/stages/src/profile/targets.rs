//! What the profile stage profiles: its targets (the control, variants, the tune elite)
//! resolved to programs, and the records of targets that cannot run.

use super::options::{call_range, ProfileOptions};
use repro_pipeline::kind::Configs;
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::Workloads;
use repro_pipeline::Pipeline;
use repro_pipeline::StageSpec;
use repro_report::best::{best_variant, fastest_on};
use repro_schema::BenchFile;
use repro_schema::NcuTarget;
use repro_schema::RunStatus;
use repro_tune::options::TuneOptions;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What one target profiles.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    Variant(String),
    /// A tune elite's cubin, the defines it was compiled with and its rank in the elite.
    Cubin {
        path: PathBuf,
        defines: Bindings,
        rank: u32,
    },
    /// A baseline script's profiling mode: this command, then `--profile <baseline> <shape>
    /// <range>` for this call and the others that share the command.
    Script(Vec<String>),
}

/// One resolved target.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// `control`, a variant name, or an elite's (`top<k>` of the default tune folder,
    /// `<folder>-top<k>` of another without its `tune-`), `<baseline>@<shape>` or
    /// `<best variant>@<shape>` off the primary: the CSV's file name and the summary's
    /// `target`.
    pub label: String,
    pub variant: String,
    pub entry: String,
    pub program: Program,
    /// Its workload, and the shape it runs on (a baseline's, or that workload's primary).
    pub workload: String,
    pub shape: String,
}

impl Target {
    /// The NVTX range of a baseline call ([`call_range`]).
    pub fn call_range(&self) -> String {
        call_range(&self.variant, &self.shape)
    }
}

/// The entry point of a variant's kernel.
pub(super) fn entry_of(pipeline: &Pipeline, variant: &str) -> Option<String> {
    let v = pipeline.variants.get(variant)?;
    Some(pipeline.kernels.get(&v.kernel)?.entry.clone())
}

/// The tune stages whose elite `topk` profiles (those the profile stage needs), by name,
/// with the options their kind decoded at load.
pub fn needed_tunes<'a>(
    spec: &'a StageSpec,
    peers: &'a Configs,
) -> Vec<(&'a str, &'a TuneOptions)> {
    spec.needs
        .iter()
        .filter_map(|n| Some((n.as_str(), peers.get(n)?.get::<TuneOptions>()?)))
        .collect()
}

/// Resolve the options' targets; `tunes` are the [`needed_tunes`]. Targets that cannot run
/// yet (no tune elite) come back as skipped records instead.
pub fn resolve_targets(
    opts: &ProfileOptions,
    tunes: &[(&str, &TuneOptions)],
    pipeline: &Pipeline,
    root: &Path,
) -> (Vec<Target>, Vec<NcuTarget>) {
    let workloads = Workloads::of(pipeline);
    let primary = |w: &str| {
        workloads
            .get(w)
            .map(|d| d.primary.clone())
            .unwrap_or_default()
    };
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    let control = pipeline.control.clone().unwrap_or_default();
    for t in &opts.targets {
        if t == "topk" {
            let arch = gpu_arch(pipeline, root);
            elite_targets(
                tunes,
                arch.as_deref(),
                pipeline,
                root,
                (&mut run, &mut skipped),
            );
            continue;
        }
        let variant = if t == "control" {
            control.clone()
        } else {
            t.clone()
        };
        let workload = workloads
            .of_variant(pipeline, &variant)
            .map(|(w, _)| w.to_string())
            .unwrap_or_default();
        run.push(Target {
            label: t.clone(),
            entry: entry_of(pipeline, &variant).unwrap_or_default(),
            program: Program::Variant(variant.clone()),
            variant,
            shape: primary(&workload),
            workload,
        });
    }
    baseline_targets(opts, pipeline, root, &mut run, &mut skipped);
    (run, skipped)
}

/// The declared arch whose cubins this machine's first GPU runs, when there is one.
fn gpu_arch(pipeline: &Pipeline, root: &Path) -> Option<String> {
    let gpus = repro_gpu::probe_cached(root).ok()?;
    crate::build::arch::for_gpu(gpus.first()?, &pipeline.arch).ok()
}

/// `topk`: each tune's elite members with a cubin, on a GPU that runs `arch` cubins (when
/// known); a tune without an elite, or whose `archs:` leave `arch` out (its elite was
/// tuned for another GPU), gives a skipped record saying why.
pub(super) fn elite_targets(
    tunes: &[(&str, &TuneOptions)],
    arch: Option<&str>,
    pipeline: &Pipeline,
    root: &Path,
    (run, skipped): (&mut Vec<Target>, &mut Vec<NcuTarget>),
) {
    if tunes.is_empty() {
        let reason = "no tune elite: the stage needs no tune stage (add one to its `needs`)";
        skipped.push(skipped_target("topk", "", "", reason.into()));
    }
    let workloads = Workloads::of(pipeline);
    for &(stage, tune) in tunes {
        let entry = pipeline.kernels[&tune.kernel].entry.clone();
        // `top<k>` of the default folder, `<folder>-top<k>` of another without its `tune-`.
        let label = |rank: &str| {
            let name = format!("{}{rank}", tune.elite_prefix());
            name.strip_prefix("tune-").unwrap_or(&name).to_string()
        };
        if let Some(why) = arch.and_then(|a| repro_tune::archs::not_tuned(stage, tune, a)) {
            let reason = format!("{why}: its elite is not profiled here");
            skipped.push(skipped_target(&label("k"), "", &entry, reason));
            continue;
        }
        let entries = match elite(root, tune) {
            Ok(entries) => entries,
            Err(reason) => {
                skipped.push(skipped_target(&label("k"), "", &entry, reason));
                continue;
            }
        };
        for e in entries {
            let name = tune.elite_name(e.rank);
            let label = label(&e.rank.to_string());
            let cubin = root.join(tune.elite_cubin(e.rank));
            if !cubin.is_file() {
                let reason = format!("{} is missing; run the tune stage", cubin.display());
                skipped.push(skipped_target(&label, &name, &entry, reason));
                continue;
            }
            let mut defines: Bindings = tune
                .base_defines
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
                .collect();
            defines.extend(e.config.clone());
            run.push(Target {
                variant: name,
                label,
                entry: entry.clone(),
                program: Program::Cubin {
                    path: cubin,
                    defines,
                    rank: e.rank,
                },
                shape: workloads
                    .get(&tune.workload)
                    .map(|d| d.primary.clone())
                    .unwrap_or_default(),
                workload: tune.workload.clone(),
            });
        }
    }
}

/// The baselines' calls on each of their shapes, then each such workload's best variant on
/// the baseline shapes off its primary (the variants ran there already): the kernel times
/// of both sides of every baseline ratio; and, where another variant is the fastest on such
/// a shape, that one there too (the kernel the dispatch table says to call).
fn baseline_targets(
    opts: &ProfileOptions,
    pipeline: &Pipeline,
    root: &Path,
    run: &mut Vec<Target>,
    skipped: &mut Vec<NcuTarget>,
) {
    let workloads = Workloads::of(pipeline);
    let mut off_primary: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, b) in &opts.baselines {
        for shape in &b.shapes {
            run.push(Target {
                label: format!("{name}@{shape}"),
                variant: name.clone(),
                entry: String::new(),
                program: Program::Script(b.run.clone()),
                workload: b.workload.clone(),
                shape: shape.clone(),
            });
            let primary = workloads.get(&b.workload).map(|d| d.primary.as_str());
            if primary != Some(shape) {
                off_primary.entry(&b.workload).or_default().insert(shape);
            }
        }
    }
    for (workload, shapes) in off_primary {
        let primary = workloads.get(workload).map(|d| d.primary.as_str());
        let files = bench_files(pipeline, root, workload);
        let best = best_variant(&files, primary.unwrap_or_default());
        let target = |variant: &str, shape: &str| Target {
            label: format!("{variant}@{shape}"),
            variant: variant.to_string(),
            entry: entry_of(pipeline, variant).unwrap_or_default(),
            program: Program::Variant(variant.to_string()),
            workload: workload.to_string(),
            shape: shape.to_string(),
        };
        for shape in shapes {
            match best {
                Some(best) => {
                    run.push(target(best, shape));
                    // The kernel to call on this shape, when another: the dispatch table's.
                    match fastest_on(&files, shape) {
                        Some(fastest) if fastest != best => run.push(target(fastest, shape)),
                        _ => {}
                    }
                }
                None => skipped.push(NcuTarget {
                    shape: Some(shape.to_string()),
                    ..skipped_target(
                        &format!("best@{shape}"),
                        "",
                        "",
                        format!(
                            "no bench record of `{workload}` names a best variant to compare \
                             with the baselines; run the bench stage"
                        ),
                    )
                }),
            }
        }
    }
}

/// The bench records of `workload`'s variants that the bench stage wrote.
pub(super) fn bench_files(pipeline: &Pipeline, root: &Path, workload: &str) -> Vec<BenchFile> {
    let workloads = Workloads::of(pipeline);
    pipeline
        .variants
        .keys()
        .filter(|v| workloads.of_variant(pipeline, v).map(|(w, _)| w) == Some(workload))
        .filter_map(|v| {
            let text = std::fs::read(root.join(format!("artifacts/bench/{v}.json"))).ok()?;
            serde_json::from_slice(&text).ok()
        })
        .collect()
}

/// One member of a tune elite, as the profile stage reads it.
#[derive(serde::Deserialize)]
pub(super) struct Elite {
    rank: u32,
    #[serde(default)]
    config: Bindings,
}

/// The elite `tune` listed in its `topk.json`.
pub(super) fn elite(root: &Path, tune: &TuneOptions) -> Result<Vec<Elite>, String> {
    let file = tune.file("topk.json");
    let text = std::fs::read_to_string(root.join(&file))
        .map_err(|e| format!("no tune elite: cannot read {file} ({e}); run the tune stage"))?;
    let entries: Vec<Elite> = serde_json::from_str(&text)
        .map_err(|e| format!("{file} is not a list of elite entries: {e}"))?;
    if entries.is_empty() {
        return Err(format!("{file} lists no elite"));
    }
    Ok(entries)
}

pub(super) fn skipped_target(label: &str, variant: &str, entry: &str, reason: String) -> NcuTarget {
    status_target(label, variant, entry, RunStatus::Skipped, reason)
}

pub(super) fn status_target(
    label: &str,
    variant: &str,
    entry: &str,
    status: RunStatus,
    reason: String,
) -> NcuTarget {
    NcuTarget {
        target: label.into(),
        variant: variant.into(),
        kernel: entry.into(),
        status,
        reason: Some(reason),
        sm_util_pct: None,
        tensor_core_util_pct: None,
        achieved_occupancy_pct: None,
        registers_per_thread: None,
        l2_hit_rate_pct: None,
        dram_bw_pct_peak: None,
        smem_bank_conflicts: None,
        kernel_time_us: None,
        kernel_time_us_min: None,
        kernel_time_us_max: None,
        launches: None,
        metric_names: Default::default(),
        raw: Default::default(),
        top_stalls: Vec::new(),
        measured: None,
        shape: None,
        kernels: Vec::new(),
        metric_set: None,
    }
}
