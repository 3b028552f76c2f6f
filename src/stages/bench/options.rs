//! The bench stage's options, read from its `StageSpec` and checked against the workload.

use crate::engine::OptionError;
use crate::gpu::timing::Method;
use crate::pipeline::{Pipeline, StageSpec};
use crate::stages::gpu_nodes::{self, ALLOW_MIXED_GPUS};
use std::path::Path;
use std::time::Duration;

use super::BASELINE_DIR;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The stage's resolved options.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Options {
    pub(super) warmup: u32,
    pub(super) iters: u32,
    pub(super) shapes: Vec<String>,
    pub(super) l2: String,
    /// `repro exec --method`.
    pub(super) method: String,
    pub(super) timeout: Duration,
    /// `None`: every baseline file present.
    pub(super) baselines: Option<Vec<String>>,
    /// Accept results measured on more than one GPU model.
    pub(super) allow_mixed_gpus: bool,
}

pub(super) fn option_error(key: &str, message: impl Into<String>) -> OptionError {
    OptionError {
        path: vec![key.to_string()],
        message: message.into(),
    }
}

/// `90`, `90s`, `10m`, `2h` → a duration.
pub(super) fn parse_duration(v: &serde_yaml::Value) -> Option<Duration> {
    if let Some(n) = v.as_u64() {
        return Some(Duration::from_secs(n));
    }
    let s = v.as_str()?.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().ok()?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

pub(super) fn options(spec: &StageSpec, pipeline: &Pipeline) -> Result<Options, OptionError> {
    let all_shapes: Vec<String> = pipeline
        .workload
        .as_ref()
        .map(|w| w.shapes.keys().cloned().collect())
        .unwrap_or_default();
    let mut o = Options {
        warmup: 20,
        iters: 100,
        shapes: all_shapes.clone(),
        l2: "warm".into(),
        method: "isolated".into(),
        timeout: DEFAULT_TIMEOUT,
        baselines: None,
        allow_mixed_gpus: false,
    };
    if pipeline.workload.is_none() {
        return Err(OptionError {
            path: vec![],
            message: "the bench stage needs a `workload:` section with shapes".into(),
        });
    }
    let names = |key: &str, v: &serde_yaml::Value| -> Result<Vec<String>, OptionError> {
        v.as_sequence()
            .and_then(|s| s.iter().map(|x| x.as_str().map(String::from)).collect())
            .ok_or_else(|| option_error(key, "expected a list of names, e.g. [mission, long]"))
    };
    for (k, v) in &spec.options {
        let key = k.as_str().unwrap_or("");
        match key {
            "warmup" | "iters" => {
                let n = v
                    .as_u64()
                    .filter(|&n| n <= u32::MAX as u64 && (key == "warmup" || n > 0))
                    .ok_or_else(|| option_error(key, "expected a positive integer"))?;
                if key == "warmup" {
                    o.warmup = n as u32
                } else {
                    o.iters = n as u32
                }
            }
            "shapes" => {
                o.shapes = names(key, v)?;
                if let Some(bad) = o.shapes.iter().find(|s| !all_shapes.contains(s)) {
                    return Err(option_error(
                        key,
                        format!(
                            "no shape `{bad}` under workload.shapes (shapes: {})",
                            all_shapes.join(", ")
                        ),
                    ));
                }
            }
            "l2" => match v.as_str() {
                Some(m @ ("warm" | "flush")) => o.l2 = m.into(),
                _ => return Err(option_error(key, "expected `warm` or `flush`")),
            },
            "method" => match v.as_str().filter(|m| Method::parse(m).is_some()) {
                Some(m) => o.method = m.into(),
                None => return Err(option_error(key, "expected `isolated` or `graph`")),
            },
            "baselines" => o.baselines = Some(names(key, v)?),
            ALLOW_MIXED_GPUS => {
                o.allow_mixed_gpus =
                    gpu_nodes::parse_allow_mixed(v).map_err(|m| option_error(key, m))?
            }
            _ => {
                return Err(option_error(
                    key,
                    format!("unknown option `{key}` for a bench stage (expected warmup, iters, shapes, l2, method, baselines, {ALLOW_MIXED_GPUS})"),
                ))
            }
        }
    }
    if let Some(t) = &spec.timeout {
        o.timeout = parse_duration(t).ok_or_else(|| {
            option_error(
                "timeout",
                "expected seconds or a duration like 90s, 10m, 2h",
            )
        })?;
    }
    Ok(o)
}

/// The baseline names to read: the declared ones, or every `*.json` in the baseline folder.
pub(super) fn baseline_names(o: &Options, root: &Path) -> Vec<String> {
    if let Some(names) = &o.baselines {
        return names.clone();
    }
    let mut found: Vec<String> = std::fs::read_dir(root.join(BASELINE_DIR))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_suffix(".json").map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}
