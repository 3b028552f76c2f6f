//! The profile stage's options, read from its `StageSpec` and checked against the pipeline.

use repro_pipeline::kind::OptionError;
use repro_pipeline::options::decode;
use repro_pipeline::{Pipeline, StageSpec};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The limit of each ncu run when the stage sets no `timeout:`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The stage's own keys in pipeline.yaml.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileOptions {
    /// `control`, `topk` (every member of the tune elite) or variant names.
    pub targets: Vec<String>,
    /// Metrics to collect besides the built-in list (kept in `raw` of the summary).
    pub metrics: Vec<String>,
    /// Also save a full-set `.repro/ncu/<target>.ncu-rep` (not committed).
    pub keep_report: bool,
    /// `repro exec --warmup`: launches before the timed ones; a baseline script's warm-up
    /// calls.
    pub warmup: u32,
    /// `repro exec --iters`.
    pub iters: u32,
    /// Launches of the entry to skip before the profiled ones (`None`: the correctness
    /// check's launch and the `warmup` launches).
    pub launch_skip: Option<u32>,
    /// Launches profiled per target (a baseline's: calls); the summary's figures are their
    /// medians.
    pub launches: u32,
    /// ncu `--clock-control`: `base` (ncu's default: clocks locked to base) or `none`.
    pub clock_control: String,
    /// ncu `--cache-control`: `all` (ncu's default: flush every cache before each replay
    /// pass, so the kernel reads cold L2) or `none` (keep them, as the harness's warm L2 does).
    pub cache_control: String,
    /// Baseline scripts whose one profiled call per shape ncu measures, one process per
    /// distinct `run` (docs/guide/ncu.md, "Baselines").
    pub baselines: BTreeMap<String, BaselineSpec>,
    /// Which targets get the full metric list besides the one-pass profile every target gets
    /// (docs/guide/ncu.md, "One pass or the full profile").
    pub full_profile: FullProfile,
    /// The limit of each ncu run: the common `timeout:` key (filled in by
    /// [`ProfileOptions::from_spec`]).
    #[serde(skip)]
    pub timeout: Duration,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            targets: vec!["control".into(), "topk".into()],
            metrics: Vec::new(),
            keep_report: false,
            warmup: 5,
            iters: 1,
            launch_skip: None,
            launches: 5,
            clock_control: "base".into(),
            cache_control: "all".into(),
            baselines: BTreeMap::new(),
            full_profile: FullProfile::Chosen,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// `full_profile:`, the targets ncu profiles with the full metric list too (SM throughput,
/// L2 hit rate, bank conflicts and warp-stall reasons), after the one pass every target gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FullProfile {
    /// Each tune's best elite and the fastest variant on each profiled shape; the other targets
    /// have only the fields one replay pass gives (`repro_ncu::metrics::Field::one_pass`).
    Chosen,
    /// Every target.
    All,
}

impl FullProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            FullProfile::Chosen => "chosen",
            FullProfile::All => "all",
        }
    }
}

/// One entry of `baselines:`: a script with a profiling mode. The stage runs each distinct
/// `run` once under ncu, with `--warmup <n>` and `--profile <baseline> <shape> <range>`
/// appended `launches` times for every call of every baseline that shares it: for each in
/// turn the script makes a trial call and `n` warm-up calls, then exactly one call inside the
/// NVTX push/pop range `<range>` ([`call_range`]).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineSpec {
    /// The command, run from the project root; baselines with the same `run` share one
    /// process.
    pub run: Vec<String>,
    /// The workload whose shapes it runs.
    pub workload: String,
    /// Shape names of that workload.
    pub shapes: Vec<String>,
}

/// The prefix of every NVTX range a baseline call runs in.
pub const NVTX_RANGE: &str = "repro-profile";

/// The NVTX push/pop range of `baseline`'s call on `shape`: one top-level range per call, so
/// ncu's NVTX column names each kernel's call (ncu's include filter takes no `/` or `@` in a
/// range name, and the column separates fields with `:`).
pub fn call_range(baseline: &str, shape: &str) -> String {
    format!("{NVTX_RANGE}.{baseline}.{shape}")
}

impl ProfileOptions {
    /// Launches of the entry to skip before the profiled ones: by default `repro exec`'s
    /// checked launch and its warm-up, so every profiled launch is one of its graph's.
    pub fn launch_skip(&self) -> u32 {
        self.launch_skip.unwrap_or(self.warmup + 1)
    }

    /// A baseline script's warm-up calls (`--warmup`): after its trial call, so that as many
    /// calls come before each profiled one as kernel launches do ([`Self::launch_skip`]).
    pub fn baseline_warmup(&self) -> u32 {
        self.launch_skip().saturating_sub(1)
    }

    /// Read and check the stage's options against the pipeline.
    pub fn from_spec(spec: &StageSpec, pipeline: &Pipeline) -> Result<Self, OptionError> {
        let mut o: ProfileOptions = decode("profile", spec)?;
        if !["base", "none"].contains(&o.clock_control.as_str()) {
            return Err(OptionError {
                path: vec!["clock_control".into()],
                message: format!(
                    "`{}` is not a clock-control mode; expected `base` (ncu's default: lock \
                     clocks to base) or `none` (leave them alone)",
                    o.clock_control
                ),
            });
        }
        if !["all", "none"].contains(&o.cache_control.as_str()) {
            return Err(OptionError {
                path: vec!["cache_control".into()],
                message: format!(
                    "`{}` is not a cache-control mode; expected `all` (ncu's default: flush \
                     the caches before each replay pass) or `none` (keep them warm)",
                    o.cache_control
                ),
            });
        }
        for (key, value) in [("iters", o.iters), ("launches", o.launches)] {
            if value == 0 {
                return Err(OptionError {
                    path: vec![key.into()],
                    message: "must be at least 1".into(),
                });
            }
        }
        if o.targets.is_empty() {
            return Err(OptionError {
                path: vec!["targets".into()],
                message: "name at least one target: `control`, `topk` or a variant".into(),
            });
        }
        let workloads = repro_pipeline::workload::Workloads::of(pipeline);
        for (i, t) in o.targets.iter().enumerate() {
            let known = match t.as_str() {
                "control" => pipeline.control.is_some(),
                "topk" => true,
                v => workloads.of_variant(pipeline, v).is_some(),
            };
            if !known {
                let hint = if t == "control" {
                    "the pipeline names no `control:` variant".to_string()
                } else if pipeline.variants.contains_key(t) {
                    "its kernel is in no workload".to_string()
                } else {
                    let names: Vec<&str> = pipeline.variants.keys().map(String::as_str).collect();
                    format!(
                        "expected `control`, `topk` or a variant ({})",
                        names.join(", ")
                    )
                };
                return Err(OptionError {
                    path: vec!["targets".into(), i.to_string()],
                    message: format!("unknown target `{t}`: {hint}"),
                });
            }
        }
        check_baselines(&o.baselines, pipeline)?;
        o.timeout = spec
            .timeout_duration()
            .map_err(|(text, why)| OptionError {
                path: vec!["timeout".into()],
                message: format!("invalid timeout `{text}`: {why}"),
            })?
            .unwrap_or(DEFAULT_TIMEOUT);
        Ok(o)
    }
}

/// Each baseline runs something, on shapes its workload declares.
fn check_baselines(
    baselines: &BTreeMap<String, BaselineSpec>,
    pipeline: &Pipeline,
) -> Result<(), OptionError> {
    let workloads = repro_pipeline::workload::Workloads::of(pipeline);
    for (name, b) in baselines {
        let err = |path: &[&str], message: String| OptionError {
            path: ["baselines", name.as_str()]
                .iter()
                .chain(path)
                .map(|s| s.to_string())
                .collect(),
            message,
        };
        if name.is_empty()
            || name.contains(['@', '/', ':', '"'])
            || name.contains(char::is_whitespace)
        {
            return Err(err(
                &[],
                format!(
                    "`{name}` cannot name a baseline: its records are `<name>@<shape>` and its \
                     NVTX range `{}`, so no `@`, `/`, `:`, quote or space",
                    call_range(name, "<shape>")
                ),
            ));
        }
        if b.run.first().is_none_or(|c| c.trim().is_empty()) {
            return Err(err(
                &["run"],
                "name the command, e.g. [python3, kernels/baselines/torch_baselines.py]".into(),
            ));
        }
        let Some(decl) = workloads.get(&b.workload) else {
            let names: Vec<&str> = workloads.iter().map(|(n, _)| n).collect();
            return Err(err(
                &["workload"],
                format!(
                    "unknown workload `{}`; expected one of: {}",
                    b.workload,
                    names.join(", ")
                ),
            ));
        };
        if b.shapes.is_empty() {
            return Err(err(
                &["shapes"],
                "name at least one shape of the workload to profile it on".into(),
            ));
        }
        for (i, shape) in b.shapes.iter().enumerate() {
            if !decl.shapes.contains_key(shape) {
                let known: Vec<&str> = decl.shapes.keys().map(String::as_str).collect();
                return Err(err(
                    &["shapes", &i.to_string()],
                    format!(
                        "unknown shape `{shape}` of workload `{}`; expected one of: {}",
                        b.workload,
                        known.join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}
