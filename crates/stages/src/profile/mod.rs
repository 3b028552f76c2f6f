//! The `profile` stage kind: Nsight Compute on `launches` warm launches of each target's
//! kernel (the control, named variants, the tune elite), every kernel target in one ncu
//! process per pass ([`kernels`]); a baseline's calls as many times, after the same warm-up,
//! one process per script ([`run`]); `--csv --page raw` with an explicit metric list. Three
//! passes: one that times the launches alone ([`own_time`]), one with the counters a single
//! replay pass gives, for every target, and the full metric list for each tune's best elite
//! and each shape's fastest variant ([`depth`]). Writes each target's CSVs to
//! `artifacts/ncu/<target>.csv` (one pass), `<target>.time.csv` and `<target>.full.csv`, and
//! the medians of the named metrics and the `gates.profile` verdicts to
//! `artifacts/ncu/summary.json`.
//!
//! Degrades honestly: no ncu → `skipped` with the install hint; `ERR_NVGPUCTRPERM` →
//! `skipped` with the fix; a target whose program crashes or times out is `failed` with
//! ncu's last lines, and the others still run.

mod calls;
mod depth;
pub mod gates;
mod kernels;
mod ncu_call;
mod own_time;
pub use repro_ncu::options;
mod reuse;
mod run;
mod schedule;
mod targets;
#[cfg(test)]
mod tests;
mod twins;

pub use gates::ProfileRule;
pub use ncu_call::NcuCall;
pub use options::ProfileOptions;
pub use targets::needed_tunes;
pub use targets::resolve_targets;
pub use targets::Program;
pub use targets::Target;

use crate::reuse::describe_run;
use crate::reuse::Committed;
use crate::reuse::ThisRun;
use anyhow::Context;
use ncu_call::detected_arch;
use ncu_call::{full_metrics, one_pass_metrics};
use repro_ncu as ncu_mod;
use repro_ncu::metrics::{full_list, one_pass_list, Arch};
use repro_ncu::NCU_NOT_FOUND;
use repro_pipeline::kind::Config;
use repro_pipeline::kind::Configs;
use repro_pipeline::kind::Configured;
use repro_pipeline::kind::OptionError;
use repro_pipeline::kind::Outputs;
use repro_pipeline::kind::Overrides;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::kind::SettingProblem;
use repro_pipeline::kind::StageInputs;
use repro_pipeline::kind::StageKind;
use repro_pipeline::kind::StageOutcome;
use repro_pipeline::Pipeline;
use repro_pipeline::StageSpec;
use repro_schema::MetricSet;
use repro_schema::NcuSummary;
use repro_schema::NcuTarget;
use repro_schema::RunStatus;
use run::finish;
use run::keep_report;
use run::Reading;
use std::path::Path;
use std::path::PathBuf;
use targets::skipped_target;

/// Where the stage writes; the folder is its one declared output.
const OUT_DIR: &str = "artifacts/ncu";

pub struct Profile;

impl StageKind for Profile {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Profile.as_str()
    }

    /// `gates.profile:`: each rule's shape, and the metrics, variants and targets it names.
    fn pipeline_problems(&self, pipeline: &Pipeline, configs: &Configs) -> Vec<SettingProblem> {
        gates::problems(pipeline, configs)
            .into_iter()
            .map(|(rule, (path, message, help))| {
                let mut at = vec!["gates".to_string(), "profile".to_string(), rule];
                at.extend(path);
                (at, message, help)
            })
            .collect()
    }

    /// `timeout:` limits each ncu run (default 10 minutes).
    fn configure(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        ProfileOptions::from_spec(spec, pipeline).map(Config::new)
    }

    fn outputs(&self, _stage: &Configured, _pipeline: &Pipeline) -> Outputs {
        vec![PathBuf::from(OUT_DIR)]
    }

    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        _overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let opts: &ProfileOptions = stage.config.of();
        let mut inputs = StageInputs::default();
        let p = &mut inputs.params;
        p.insert("targets".into(), opts.targets.join(","));
        p.insert("keep_report".into(), opts.keep_report.to_string());
        p.insert("warmup".into(), opts.warmup.to_string());
        p.insert("iters".into(), opts.iters.to_string());
        p.insert("launch_skip".into(), opts.launch_skip().to_string());
        p.insert("launches".into(), opts.launches.to_string());
        p.insert("clock_control".into(), opts.clock_control.clone());
        p.insert("cache_control".into(), opts.cache_control.clone());
        p.insert("kernel_time_pass".into(), own_time::METRIC.into());
        p.insert("full_profile".into(), opts.full_profile.as_str().into());
        // Both metric lists of every architecture, whatever GPU this machine has: a change
        // to a list is a change of the sources on every machine, never this machine's alone.
        for arch in Arch::ALL {
            let (full, one) = (
                full_list(Some(arch), &opts.metrics),
                one_pass_list(Some(arch)),
            );
            p.insert(format!("metrics_{}", arch.chip()), full.join(","));
            p.insert(format!("one_pass_metrics_{}", arch.chip()), one.join(","));
        }
        // Which variants run on the baseline shapes off the primary (targets::baseline_targets).
        p.insert("off_primary".into(), "best and fastest".into());
        if !pipeline.gates.profile.is_empty() {
            p.insert(
                "gates".into(),
                serde_json::to_string(&pipeline.gates.profile)?,
            );
        }
        if !opts.baselines.is_empty() {
            p.insert("baselines".into(), serde_json::to_string(&opts.baselines)?);
            // The scripts a baseline's command runs are inputs too, with their modules.
            for b in opts.baselines.values() {
                inputs.files.extend(reuse::script_files(root, &b.run));
            }
        }
        // Each target runs its workload's primary shape: the declarations are inputs.
        let workloads = repro_pipeline::workload::Workloads::of(pipeline);
        let declared: std::collections::BTreeMap<&str, &repro_pipeline::workload::Declaration> =
            workloads.iter().collect();
        p.insert("workloads".into(), serde_json::to_string(&declared)?);
        let ncu_version = ncu_mod::find_ncu()
            .and_then(|n| ncu_mod::version(root, &n))
            .unwrap_or_else(|| NCU_NOT_FOUND.into());
        inputs.tools.insert("ncu".into(), ncu_version);
        // Under Slurm the request (partition, gres): this machine may not be a GPU node.
        inputs.hardware = crate::gpu_nodes::slurm_request(pipeline, stage.spec).or_else(|| {
            let gpus = repro_gpu::probe_cached(root).ok()?;
            let first = gpus.first()?;
            Some(repro_gpu::gpu_identity(std::slice::from_ref(first)))
        });
        Ok(inputs)
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let opts: &ProfileOptions = ctx.config.of();
        let out_dir = ctx.staging.join(OUT_DIR);
        std::fs::create_dir_all(&out_dir)
            .with_context(|| format!("cannot create {}", out_dir.display()))?;
        let tunes = needed_tunes(ctx.spec, ctx.peers);
        let (targets, skipped) = resolve_targets(opts, &tunes, ctx.pipeline, ctx.root);
        let mut summary = NcuSummary {
            ncu_version: None,
            clock_control: opts.clock_control.clone(),
            cache_control: opts.cache_control.clone(),
            targets: Vec::new(),
            gates: Vec::new(),
        };
        let skip_all = |summary: &mut NcuSummary, reason: &str, fix: &str| {
            summary.targets = targets
                .iter()
                .map(|t| NcuTarget {
                    shape: Some(t.shape.clone()),
                    ..skipped_target(&t.label, &t.variant, &t.entry, reason.to_string())
                })
                .collect();
            StageOutcome::Skipped {
                reason: reason.to_string(),
                fix: fix.to_string(),
            }
        };

        let Some(ncu) = ncu_mod::find_ncu() else {
            let outcome = skip_all(
                &mut summary,
                "Nsight Compute (ncu) was not found on PATH, in $NCU, /usr/local/cuda/bin or /opt/nvidia/nsight-compute",
                ncu_mod::INSTALL_HINT,
            );
            return finish(&out_dir, summary, skipped, outcome);
        };
        summary.ncu_version = ncu_mod::version(ctx.root, &ncu);
        let metric_list = full_metrics(ctx.root, &opts.metrics);
        let pipeline_file = ctx.pipeline_file.to_path_buf();
        let no_sections = ncu_call::empty_section_folder(ctx.root);
        let call = NcuCall {
            ncu: &ncu,
            repro_exe: ctx.repro_exe,
            pipeline_file: &pipeline_file,
            metrics: &metric_list,
            opts,
            no_sections: no_sections.as_deref(),
            check: false,
        };
        let timeout = opts.timeout;
        let arch = detected_arch(ctx.root);
        // A target whose key is unchanged keeps its committed profile (stages::reuse).
        let one_pass_list = one_pass_metrics(ctx.root);
        let common = reuse::Common::new(ctx, &call, &one_pass_list, summary.ncu_version.as_deref());
        let committed = Committed::of(ctx);
        let this_run = ThisRun::now(ctx.root);
        let reading = Reading {
            arch,
            extra: &opts.metrics,
            launches: opts.launches,
        };
        let time_metric = [own_time::METRIC.to_string()];
        // The time pass checks each kernel target's outputs; the passes after it launch what
        // it checked.
        let time_call = NcuCall {
            metrics: &time_metric,
            check: true,
            ..call
        };
        let one_pass_call = NcuCall {
            metrics: &one_pass_list,
            ..call
        };
        // The time pass and the one-pass list leave the stage's extra metrics out.
        let without_extra = Reading {
            extra: &[],
            ..reading
        };
        let mut records: Vec<Option<Profiled>> = vec![None; targets.len()];
        let mut keys: Vec<_> = targets
            .iter()
            .map(|t| common.as_ref().and_then(|c| c.key(ctx, t)))
            .collect();
        let twins = twins::of(&targets, &keys);
        let mut full = depth::full(&targets, opts, ctx.pipeline, ctx.root);
        depth::share_with_twins(&mut full, &twins);
        let metric_set = |i: usize| match full[i] {
            true => MetricSet::Full,
            false => MetricSet::OnePass,
        };
        for (i, key) in keys.iter_mut().enumerate() {
            if let Some(key) = key {
                key.insert("metric_set".into(), metric_set(i).as_str().into());
            }
        }
        // One process profiles a unit (every kernel target; the calls of one baseline
        // script): it runs again unless each of its targets keeps its profile.
        let is_script = |t: &Target| matches!(t.program, Program::Script(_));
        let kernels: Vec<usize> = (0..targets.len())
            .filter(|&i| !is_script(&targets[i]))
            .collect();
        let mut units: Vec<Vec<usize>> = vec![kernels];
        units.extend(
            calls::units(&targets)
                .into_iter()
                .filter(|u| is_script(u[0]))
                .map(|u| {
                    u.iter()
                        .map(|t| {
                            targets
                                .iter()
                                .position(|x| std::ptr::eq(x, *t))
                                .expect("a target")
                        })
                        .collect()
                }),
        );
        // What is not kept is profiled: the kernel targets in one process, the calls of each
        // baseline command in one ([`schedule`]).
        let mut pending: Vec<schedule::Unit> = Vec::new();
        for unit in units {
            let mut fresh = Vec::new();
            for i in unit.into_iter().filter(|&i| twins[i].is_none()) {
                let kept = keys[i].as_ref().and_then(|k| {
                    reuse::committed_target(&committed, ctx.root, &targets[i], k, opts.keep_report)
                });
                match kept {
                    // Kernel targets are profiled one by one: each keeps its own profile.
                    Some(kept) if !is_script(&targets[i]) => {
                        let measured = kept.record.measured.as_ref();
                        let from = describe_run(measured.expect("a reused record"));
                        (ctx.progress)(&format!(
                            "ncu {}: reused the profile of {from}",
                            targets[i].label
                        ));
                        records[i] = Some(kept);
                    }
                    kept => fresh.push((i, kept)),
                }
            }
            let script = fresh.first().is_some_and(|(i, _)| is_script(&targets[*i]));
            if script && fresh.iter().all(|(_, kept)| kept.is_some()) {
                for (i, kept) in fresh {
                    (ctx.progress)(&format!("ncu {}: reused its profile", targets[i].label));
                    records[i] = kept;
                }
                continue;
            }
            if !fresh.is_empty() {
                let members = fresh.into_iter().map(|(i, _)| i).collect();
                pending.push(schedule::Unit { members, script });
            }
        }
        // The time pass first ([`own_time`]), then one pass of counters for every target,
        // then the full profile of those that get it ([`depth`]).
        let full_units: Vec<schedule::Unit> = pending
            .iter()
            .map(|u| schedule::Unit {
                members: u.members.iter().copied().filter(|&i| full[i]).collect(),
                script: u.script,
            })
            .filter(|u| !u.members.is_empty())
            .collect();
        let names = ["timed alone", "profiled in one pass", "profiled in full"];
        let passes = [
            schedule::Pass {
                call: &time_call,
                units: &pending,
                reading: &without_extra,
            },
            schedule::Pass {
                call: &one_pass_call,
                units: &pending,
                reading: &without_extra,
            },
            schedule::Pass {
                call: &call,
                units: &full_units,
                reading: &reading,
            },
        ];
        // Each pass's record and CSV of each target it profiled, by target.
        let mut outputs: [Vec<Option<(NcuTarget, String)>>; 3] = Default::default();
        let ran = schedule::profile_passes(ctx, &targets, &passes);
        for (((name, pass), ran), out) in names.iter().zip(&passes).zip(ran).zip(&mut outputs) {
            *out = vec![None; targets.len()];
            for (unit, ran) in pass.units.iter().zip(ran) {
                let ran = ran.expect("a unit runs unless an earlier one was denied the counters");
                log_unit(ctx, unit, name, &ran);
                match ran.profiled? {
                    Ok(records) => {
                        for (&i, record) in unit.members.iter().zip(records) {
                            out[i] = Some(record);
                        }
                    }
                    Err(line) => {
                        let reason =
                            format!("ncu may not read the GPU performance counters: {line}");
                        let outcome = skip_all(&mut summary, &reason, ncu_mod::PERMISSION_FIX);
                        return finish(&out_dir, summary, skipped, outcome);
                    }
                }
            }
        }
        let [times, one_pass_out, full_out] = &mut outputs;
        for unit in &pending {
            let members: Vec<&Target> = unit.members.iter().map(|&i| &targets[i]).collect();
            let profiled = |i: &usize| {
                one_pass_out[*i]
                    .as_ref()
                    .is_some_and(|(r, _)| r.status.is_ok())
            };
            let report =
                (opts.keep_report && unit.members.iter().any(profiled)).then(|| {
                    match unit.script {
                        true => keep_report(ctx, &call, &members, timeout),
                        false => kernels::keep_report(ctx, &call, &members),
                    }
                });
            for &i in &unit.members {
                let ((one, csv), (timed, time_csv)) = (
                    one_pass_out[i].take().expect("every member had one pass"),
                    times[i].take().expect("every member was timed"),
                );
                let (record, full_csv) = match full_out[i].take() {
                    Some((full, full_csv)) => {
                        (depth::with_one_pass_fields(full, &one), Some(full_csv))
                    }
                    None => (one, None),
                };
                let mut record = own_time::merge(record, &timed);
                record.metric_set = Some(metric_set(i));
                if record.status.is_ok() {
                    record.measured = keys[i].clone().map(|k| this_run.measured(k));
                    if let Some(Err(why)) = &report {
                        record.reason = Some(format!("report not kept: {why}"));
                    }
                }
                records[i] = Some(Profiled {
                    record,
                    csv,
                    time_csv,
                    full_csv,
                });
            }
        }
        for (i, twin) in twins.iter().enumerate() {
            let Some(j) = *twin else { continue };
            let (from, to) = (&targets[j].label, &targets[i].label);
            (ctx.progress)(&format!(
                "ncu {to}: the same kernel as {from}, profiled once"
            ));
            let copied = twins::copy(records[j].as_ref().expect("an earlier target"), &targets[i]);
            records[i] = Some(copied);
            if opts.keep_report {
                twins::copy_report(ctx.root, from, to)
                    .with_context(|| format!("cannot copy the ncu report of {from} for {to}"))?;
            }
        }
        let records = records
            .into_iter()
            .map(|r| r.expect("every target has its record"));
        for (target, mut p) in targets.iter().zip(records) {
            p.record.shape = Some(target.shape.clone());
            let full_csv = p.full_csv.as_ref().map(|text| ("full.csv", text));
            for (name, text) in [("csv", &p.csv), ("time.csv", &p.time_csv)]
                .into_iter()
                .chain(full_csv)
            {
                let path = out_dir.join(format!("{}.{name}", target.label));
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            summary.targets.push(p.record);
        }
        summary.gates = judge_gates(ctx.pipeline, &targets, &summary.targets);
        let failed: Vec<String> = summary
            .targets
            .iter()
            .filter(|t| t.status == RunStatus::Failed)
            .map(|t| t.target.clone())
            .collect();
        let outcome = if failed.is_empty() {
            StageOutcome::Passed
        } else {
            StageOutcome::GateFailed(format!("ncu failed for {}", failed.join(", ")))
        };
        finish(&out_dir, summary, skipped, outcome)
    }
}

/// The stage log's line on how one pass of a unit went.
fn log_unit(ctx: &RunCtx, unit: &schedule::Unit, pass: &str, ran: &schedule::Ran) {
    let what = match unit.script {
        true => "baseline calls",
        false => "kernel targets",
    };
    let beside = match unit.script {
        true => "beside the kernel targets",
        false => "with the stage",
    };
    let waited = match ran.waited.as_secs_f64() {
        w if w >= 0.05 => {
            format!(" once their turn came (their process started {w:.1} s before, {beside})")
        }
        _ => String::new(),
    };
    let line = format!(
        "ncu: {} {what} {pass} in {:.1} s{waited}",
        unit.members.len(),
        ran.took.as_secs_f64()
    );
    repro_base::fsio::append_line(ctx.log, &line);
}

/// A target's record and what ncu printed for it: the CSVs of its one-pass profile, of the
/// time pass and, when it had one, of its full profile.
#[derive(Debug, Clone)]
pub(super) struct Profiled {
    pub record: NcuTarget,
    pub csv: String,
    pub time_csv: String,
    pub full_csv: Option<String>,
}

/// `gates.profile` on the variants and tune elites profiled on their primary shape: a
/// failed rule is a ❌ in the record, not a failed stage (as the bench stage's gates).
fn judge_gates(
    pipeline: &Pipeline,
    targets: &[Target],
    records: &[NcuTarget],
) -> Vec<repro_schema::GateResult> {
    let workloads = repro_pipeline::workload::Workloads::of(pipeline);
    let subjects: Vec<gates::Subject> = targets
        .iter()
        .filter(|t| !matches!(t.program, Program::Script(_)) && !t.label.contains('@'))
        .filter_map(|t| {
            let record = records
                .iter()
                .find(|r| r.target == t.label && r.status.is_ok())?;
            Some(gates::Subject {
                record,
                workload: &t.workload,
                control: workloads.control_of(pipeline, &t.workload),
            })
        })
        .collect();
    gates::evaluate(&pipeline.gates.profile, &subjects)
}
