//! One run checked and timed into the record `repro exec` prints.

use super::checked::check;
use super::project::{Project, Resolved};
use super::ready::ready;
use super::ExecSettings;
use crate::timing::TimingConfig;
use crate::warm::Warm;
use crate::{client::ExecRequest, client::GPU_INDEX_ENV};
use anyhow::Context as _;
use repro_pipeline::workload::accuracy::larger;
use repro_pipeline::workload::compare::OutputCheck;
use repro_schema::{BenchResult, OutputAccuracy, RunStatus, TimingMode};
use std::time::Duration;

/// Check `r` on its case (unless `!req.check`), then launch it in a profiler window
/// (`req.profile`) or time it (unless `!req.timing`): the record `repro exec` prints. An
/// unchecked run has no accuracy figures and no `correctness_pass`.
pub(super) fn measure(
    warm: &mut Warm,
    project: &Project,
    r: &Resolved,
    req: &ExecRequest,
    settings: &ExecSettings,
) -> anyhow::Result<BenchResult> {
    if !req.check && req.profile.is_none() {
        anyhow::bail!("an unchecked run only launches in a profiler window: give it `profile`");
    }
    let ready = ready(warm, project, r, req.seed, req.check)?;
    let session = warm.session();
    let mut out = BenchResult::blank(
        &r.shape,
        r.dims.clone(),
        req.seed,
        (req.warmup, req.iters),
        RunStatus::Ok,
    );
    out.inputs = r.recipe.clone();
    out.device_index = Some(device_index(|k| std::env::var(k).ok(), settings.device));
    out.device_name = Some(warm.device_name().to_string());
    if req.check {
        let checked = check(session, project, r, &ready)?;
        record_accuracy(&mut out, &checked.checks);
        if !checked.never_written.is_empty() {
            out.correctness_pass = Some(false);
            out.error = Some(checked.never_written.join("\n"));
        }
    }
    if let Some(launches) = req.profile {
        session.profile(&ready.launch(), req.warmup, launches)?;
    } else if req.timing {
        let cfg = TimingConfig {
            method: req.method,
            warmup: req.warmup,
            iters: req.iters.max(1),
            l2: req.l2,
            max_cv: settings.max_cv,
            time_limit: Duration::from_secs_f64(settings.max_time.max(0.0)),
            target_sample_us: 100.0,
            fixed_batch: settings.launches_per_sample,
        };
        let timing = session.time(&ready.launch(), &cfg)?;
        let s = repro_base::stats::summarize(&timing.samples_us)
            .context("the timing samples were empty or not finite")?;
        out.timing_mode = Some(TimingMode {
            method: timing.method.into(),
            launches_per_sample: timing.launches_per_sample,
            l2: cfg.l2.name().into(),
            timer_overhead_us: timing.timer_overhead_us,
        });
        out.p50_us = Some(s.p50);
        out.p90_us = Some(s.p90);
        out.p99_us = Some(s.p99);
        out.mean_us = Some(s.mean);
        out.std_us = Some(s.std);
        out.min_us = Some(s.min);
        out.ci95_us = Some(s.ci95_half_width());
        out.cv = Some(s.cv);
        out.samples = Some(s.n as u32);
    }
    Ok(out)
}

/// The errors of every output into `out`: each output's under `outputs` when there are
/// several, the worst of each figure at the top (NaN when any output's is).
fn record_accuracy(out: &mut BenchResult, checks: &[OutputCheck]) {
    let per: Vec<OutputAccuracy> = checks
        .iter()
        .map(|c| OutputAccuracy {
            max_abs_err: c.accuracy.max_abs_err,
            mean_abs_err: c.accuracy.mean_abs_err,
            pct_bad: c.accuracy.pct_bad,
            rel_l2_err: c.accuracy.rel_l2_err,
            max_err_over_ref_std: c.accuracy.max_err_over_ref_std,
            nan_count: c.accuracy.nan_count,
            inf_count: c.accuracy.inf_count,
            correctness_pass: c.pass(),
        })
        .collect();
    let worst = |f: fn(&OutputAccuracy) -> f64| per.iter().map(f).fold(0f64, larger);
    out.max_abs_err = Some(worst(|a| a.max_abs_err));
    out.mean_abs_err = Some(worst(|a| a.mean_abs_err));
    out.pct_bad = Some(worst(|a| a.pct_bad));
    out.rel_l2_err = Some(worst(|a| a.rel_l2_err));
    out.max_err_over_ref_std = Some(worst(|a| a.max_err_over_ref_std));
    out.nan_count = Some(per.iter().map(|a| a.nan_count).sum());
    out.inf_count = Some(per.iter().map(|a| a.inf_count).sum());
    out.correctness_pass = Some(per.iter().all(|a| a.correctness_pass));
    if checks.len() > 1 {
        out.outputs = checks
            .iter()
            .zip(per)
            .map(|(c, a)| (c.output.clone(), a))
            .collect();
    }
}

/// The index of the GPU this process measures on, as the machine numbers it. Under Slurm
/// (`SLURM_JOB_ID` set) that is the node-local GPU Slurm gave the step (`SLURM_STEP_GPUS`,
/// else `SLURM_JOB_GPUS`, else a single `CUDA_VISIBLE_DEVICES` index), never
/// `REPRO_GPU_INDEX`, which is only the stage's concurrency slot there. Locally it is
/// `REPRO_GPU_INDEX` (the executor made that GPU the only visible one). Else `--device`.
fn device_index(env: impl Fn(&str) -> Option<String>, device: u32) -> u32 {
    let first_index =
        |var: &str| env(var).and_then(|v| v.split(',').next().and_then(|i| i.trim().parse().ok()));
    if env("SLURM_JOB_ID").is_some() {
        let single_visible = env("CUDA_VISIBLE_DEVICES")
            .filter(|v| !v.contains(','))
            .and_then(|v| v.trim().parse().ok());
        return first_index("SLURM_STEP_GPUS")
            .or_else(|| first_index("SLURM_JOB_GPUS"))
            .or(single_visible)
            .unwrap_or(device);
    }
    first_index(GPU_INDEX_ENV).unwrap_or(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_pipeline::workload::exprs::Bindings;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn device_index_is_the_slot_locally_and_slurms_gpu_on_a_node() {
        assert_eq!(device_index(env_of(&[]), 0), 0);
        assert_eq!(device_index(env_of(&[(GPU_INDEX_ENV, "3")]), 0), 3);
        let slurm = [("SLURM_JOB_ID", "42"), (GPU_INDEX_ENV, "1")];
        assert_eq!(device_index(env_of(&slurm), 0), 0, "the slot is not a GPU");
        let step = [
            ("SLURM_JOB_ID", "42"),
            (GPU_INDEX_ENV, "1"),
            ("SLURM_STEP_GPUS", "5"),
            ("SLURM_JOB_GPUS", "4,5"),
        ];
        assert_eq!(device_index(env_of(&step), 0), 5);
        let job = [("SLURM_JOB_ID", "42"), ("SLURM_JOB_GPUS", "6,7")];
        assert_eq!(device_index(env_of(&job), 0), 6);
        let visible = [("SLURM_JOB_ID", "42"), ("CUDA_VISIBLE_DEVICES", "2")];
        assert_eq!(device_index(env_of(&visible), 0), 2);
    }

    fn checks(figures: &[(f64, bool)]) -> Vec<OutputCheck> {
        figures
            .iter()
            .enumerate()
            .map(|(i, &(err, pass))| OutputCheck {
                output: format!("out{i}"),
                accuracy: repro_pipeline::workload::accuracy::Accuracy {
                    max_abs_err: err,
                    mean_abs_err: err / 10.0,
                    pct_bad: 0.0,
                    rel_l2_err: err / 100.0,
                    max_err_over_ref_std: err,
                    nan_count: i as u64,
                    inf_count: 0,
                },
                failed: if pass { vec![] } else { vec!["x".into()] },
            })
            .collect()
    }

    #[test]
    fn several_outputs_are_recorded_each_and_the_worst_at_the_top() {
        let mut one = BenchResult::blank("s", Bindings::new(), 0, (1, 1), RunStatus::Ok);
        record_accuracy(&mut one, &checks(&[(0.5, true)]));
        assert_eq!(
            (one.max_abs_err, one.correctness_pass),
            (Some(0.5), Some(true))
        );
        assert!(
            one.outputs.is_empty(),
            "one output: the top-level figures are its own"
        );
        let mut two = one.clone();
        record_accuracy(&mut two, &checks(&[(0.5, true), (0.25, false)]));
        assert_eq!((two.max_abs_err, two.nan_count), (Some(0.5), Some(1)));
        assert_eq!(two.correctness_pass, Some(false));
        assert_eq!(two.outputs.len(), 2);
        assert!(!two.outputs["out1"].correctness_pass && two.outputs["out0"].correctness_pass);
        // A figure one output could not measure is the worst: it is not dropped at the top.
        let mut nan = checks(&[(0.5, true), (0.25, false)]);
        nan[1].accuracy.rel_l2_err = f64::NAN;
        record_accuracy(&mut two, &nan);
        assert!(
            two.rel_l2_err.is_some_and(f64::is_nan),
            "{:?}",
            two.rel_l2_err
        );
        assert_eq!(two.max_abs_err, Some(0.5));
    }
}
