//! The bench stage's options, read from its `StageSpec` and checked against the workload.

use repro_gpu::{timing::L2Mode, timing::Method};
use repro_pipeline::kind::OptionError;
use repro_pipeline::options::decode;
use repro_pipeline::{workload::Declaration, workload::Workloads};
use repro_pipeline::{Pipeline, StageSpec};
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
    /// `None`: every shape of each workload; else the listed shapes of each workload that
    /// has them.
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
    /// The shapes of `decl` to measure, in its order.
    pub(super) fn shapes_of(&self, decl: &Declaration) -> Vec<String> {
        decl.shapes
            .keys()
            .filter(|s| self.shapes.as_ref().is_none_or(|list| list.contains(s)))
            .cloned()
            .collect()
    }

    /// The `shapes` option as written (`None`: all).
    pub(super) fn shapes(&self) -> Option<&[String]> {
        self.shapes.as_deref()
    }
}

fn option_error(key: &str, message: impl Into<String>) -> OptionError {
    OptionError {
        path: vec![key.to_string()],
        message: message.into(),
    }
}

/// The stage's options, checked against the workloads, with the defaults filled in.
pub(super) fn options(spec: &StageSpec, pipeline: &Pipeline) -> Result<Options, OptionError> {
    let workloads = Workloads::of(pipeline);
    if workloads.is_empty() {
        return Err(OptionError {
            path: vec![],
            message: "the bench stage needs a workload: declare one under `workloads:` (docs/guide/workloads.md)".into(),
        });
    }
    let mut o: Options = decode("bench", spec)?;
    let mut all_shapes: Vec<&str> = workloads
        .iter()
        .flat_map(|(_, d)| d.shapes.keys().map(String::as_str))
        .collect();
    all_shapes.sort_unstable();
    all_shapes.dedup();
    if let Some(bad) = o
        .shapes()
        .unwrap_or_default()
        .iter()
        .find(|s| !all_shapes.contains(&s.as_str()))
    {
        return Err(option_error(
            "shapes",
            format!(
                "no workload has a shape `{bad}` (shapes: {})",
                all_shapes.join(", ")
            ),
        ));
    }
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
