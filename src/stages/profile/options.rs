//! The profile stage's options, read from its `StageSpec` and checked against the pipeline.

use super::targets::primary_shape;
use crate::engine::OptionError;
use crate::pipeline::{Pipeline, StageSpec};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// The stage's own keys in pipeline.yaml.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileOptions {
    /// `control`, `topk` (every member of the tune elite) or variant names.
    pub targets: Vec<String>,
    /// Metrics to collect besides the built-in list (kept in `raw` of the summary).
    pub metrics: Vec<String>,
    /// Also save a full-set `.repro/ncu/<target>.ncu-rep` (not committed).
    pub keep_report: bool,
    /// `repro exec --warmup`: launches before the timed ones.
    pub warmup: u32,
    /// `repro exec --iters`.
    pub iters: u32,
    /// Launches of the entry to skip before the profiled one (default: `warmup`).
    pub launch_skip: u32,
    /// ncu `--clock-control`: `base` (ncu's default: clocks locked to base) or `none`.
    pub clock_control: String,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            targets: vec!["control".into(), "topk".into()],
            metrics: Vec::new(),
            keep_report: false,
            warmup: 5,
            iters: 1,
            launch_skip: 5,
            clock_control: "base".into(),
        }
    }
}

pub(super) fn option<T: DeserializeOwned>(
    key: &str,
    v: &serde_yaml::Value,
) -> Result<T, OptionError> {
    serde_yaml::from_value(v.clone()).map_err(|e| OptionError {
        path: vec![key.to_string()],
        message: format!("invalid value: {e}"),
    })
}

impl ProfileOptions {
    /// Read and check the stage's options against the pipeline.
    pub fn from_spec(spec: &StageSpec, pipeline: &Pipeline) -> Result<Self, OptionError> {
        let mut o = ProfileOptions::default();
        let mut launch_skip = None;
        for (k, v) in &spec.options {
            let key = k.as_str().unwrap_or("");
            match key {
                "targets" => o.targets = option(key, v)?,
                "metrics" => o.metrics = option(key, v)?,
                "keep_report" => o.keep_report = option(key, v)?,
                "warmup" => o.warmup = option(key, v)?,
                "iters" => o.iters = option(key, v)?,
                "launch_skip" => launch_skip = Some(option(key, v)?),
                "clock_control" => o.clock_control = option(key, v)?,
                _ => {
                    return Err(OptionError {
                        path: vec![k.as_str().map_or_else(|| format!("{k:?}"), str::to_string)],
                        message: "unknown key; expected one of targets, metrics, keep_report, \
                                  warmup, iters, launch_skip, clock_control"
                            .into(),
                    })
                }
            }
        }
        o.launch_skip = launch_skip.unwrap_or(o.warmup);
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
        if o.iters == 0 {
            return Err(OptionError {
                path: vec!["iters".into()],
                message: "must be at least 1".into(),
            });
        }
        if o.targets.is_empty() {
            return Err(OptionError {
                path: vec!["targets".into()],
                message: "name at least one target: `control`, `topk` or a variant".into(),
            });
        }
        if let Err(e) = primary_shape(pipeline) {
            return Err(OptionError {
                path: vec![],
                message: format!("{e:#}"),
            });
        }
        for (i, t) in o.targets.iter().enumerate() {
            // `topk` profiles tune cubins of the control's kernel.
            let known = ((t == "topk" || t == "control") && pipeline.control.is_some())
                || pipeline.variants.contains_key(t);
            if !known {
                let hint = if t == "control" || t == "topk" {
                    "the pipeline names no `control:` variant".to_string()
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
        if let Some(t) = &spec.timeout {
            timeout_of(t).map_err(|message| OptionError {
                path: vec!["timeout".into()],
                message,
            })?;
        }
        Ok(o)
    }
}

/// `600`, `"90s"`, `"10m"`, `"2h"` → a duration.
pub fn timeout_of(v: &serde_yaml::Value) -> Result<Duration, String> {
    let bad = || format!("expected seconds or a duration like `90s`, `10m`, `2h`; found {v:?}");
    if let Some(s) = v.as_u64() {
        return Ok(Duration::from_secs(s));
    }
    let text = v.as_str().ok_or_else(bad)?.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let n: u64 = text[..split].parse().map_err(|_| bad())?;
    let unit = match &text[split..] {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs(n * unit))
}
