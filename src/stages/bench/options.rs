//! The bench stage's options, read from its `StageSpec` and checked against the workload.

use crate::engine::OptionError;
use crate::gpu::timing::{L2Mode, Method};
use crate::pipeline::{Pipeline, StageSpec};
use crate::stages::options::decode;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

use super::BASELINE_DIR;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The stage's own keys (see the module comment of `stages::bench`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct Options {
    pub(super) warmup: u32,
    pub(super) iters: u32,
    /// `None`: every shape of `workload.shapes` (filled in by [`options`]).
    shapes: Option<Vec<String>>,
    pub(super) l2: L2Mode,
    /// `repro exec --method`.
    pub(super) method: Method,
    /// `None`: every baseline file present.
    pub(super) baselines: Option<Vec<String>>,
    /// Accept results measured on more than one GPU model.
    pub(super) allow_mixed_gpus: bool,
    /// The common `timeout:` key (filled in by [`options`]).
    #[serde(skip)]
    pub(super) timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            warmup: 20,
            iters: 100,
            shapes: None,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            baselines: None,
            allow_mixed_gpus: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Options {
    /// The shapes to measure.
    pub(super) fn shapes(&self) -> &[String] {
        self.shapes.as_deref().unwrap_or_default()
    }
}

fn option_error(key: &str, message: impl Into<String>) -> OptionError {
    OptionError {
        path: vec![key.to_string()],
        message: message.into(),
    }
}

/// The stage's options, checked against the workload, with the defaults filled in.
pub(super) fn options(spec: &StageSpec, pipeline: &Pipeline) -> Result<Options, OptionError> {
    let Some(workload) = &pipeline.workload else {
        return Err(OptionError {
            path: vec![],
            message: "the bench stage needs a `workload:` section with shapes".into(),
        });
    };
    let mut o: Options = decode("bench", spec)?;
    let all_shapes: Vec<String> = workload.shapes.keys().cloned().collect();
    if let Some(bad) = o.shapes().iter().find(|s| !all_shapes.contains(s)) {
        return Err(option_error(
            "shapes",
            format!(
                "no shape `{bad}` under workload.shapes (shapes: {})",
                all_shapes.join(", ")
            ),
        ));
    }
    o.shapes.get_or_insert(all_shapes);
    if o.iters == 0 {
        return Err(option_error("iters", "expected a positive integer"));
    }
    match spec.timeout_duration() {
        Ok(t) => o.timeout = t.unwrap_or(DEFAULT_TIMEOUT),
        Err((text, why)) => {
            return Err(option_error(
                "timeout",
                format!("invalid timeout `{text}`: {why}"),
            ))
        }
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
