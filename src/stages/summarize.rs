//! The `summarize` stage kind: renders `reports/summary.md` (+ SVG charts) and
//! `artifacts/manifest.yaml` from what the other stages wrote. Options:
//!
//! ```yaml
//! summarize:
//!   uses: summarize
//!   needs: [bench, evo-tune, ncu-profile]
//!   template: templates/summary.md.j2            # default
//!   manifest_template: templates/manifest.yaml.j2 # default
//! ```
//!
//! A template the project does not have falls back to the built-in one. Templates are
//! fingerprint inputs, so editing one reruns only this stage.

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::pipeline::{Pipeline, StageSpec};
use crate::report::{self, artifacts::Artifacts, manifest, state::RunState};
use crate::stages::options::decode;
use anyhow::Context;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub struct Summarize;

/// The stage's own keys: the template paths, relative to the project root.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Templates {
    /// The report's template.
    template: String,
    manifest_template: String,
}

impl Default for Templates {
    fn default() -> Self {
        Templates {
            template: report::SUMMARY_TEMPLATE.into(),
            manifest_template: report::MANIFEST_TEMPLATE.into(),
        }
    }
}

fn templates(spec: &StageSpec) -> Result<Templates, OptionError> {
    decode("summarize", spec).map_err(|e| match e.path.first() {
        Some(key) if e.message.starts_with("invalid value") => OptionError {
            message: format!("`{key}` must be a path to a template relative to the project root, e.g. templates/summary.md.j2"),
            path: e.path,
        },
        _ => e,
    })
}

impl StageKind for Summarize {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Summarize.as_str()
    }

    /// The manifest names the commit whose sources made the results: re-render it whenever
    /// an upstream stage reran, even with byte-identical results.
    fn early_cutoff(&self) -> bool {
        false
    }

    fn validate(
        &self,
        _name: &str,
        spec: &StageSpec,
        _pipeline: &Pipeline,
    ) -> Result<(), OptionError> {
        templates(spec)?;
        Ok(())
    }

    fn outputs(&self, _name: &str, _spec: &StageSpec, pipeline: &Pipeline) -> Outputs {
        let mut out = vec![PathBuf::from(report::SUMMARY)];
        out.extend(
            report::chart_files(pipeline)
                .into_iter()
                .map(|f| PathBuf::from("reports").join(f)),
        );
        out.push(PathBuf::from(manifest::MANIFEST));
        out
    }

    fn inputs(
        &self,
        _name: &str,
        spec: &StageSpec,
        _pipeline: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs> {
        let mut inputs = StageInputs::default();
        let Templates {
            template: summary,
            manifest_template: manifest,
        } = templates(spec)?;
        for (key, rel) in [
            ("template.summary", summary),
            ("template.manifest", manifest),
        ] {
            if root.join(&rel).is_file() {
                inputs.files.push(PathBuf::from(&rel));
                inputs.params.insert(key.into(), rel);
            } else {
                // The built-in template is part of the binary: its contents count.
                let builtin = report::load_template(root, &rel)?.source;
                let hash = crate::tools::hex(&Sha256::digest(builtin.as_bytes()));
                inputs.params.insert(key.into(), format!("built-in:{hash}"));
            }
        }
        inputs
            .params
            .insert("repro_version".into(), env!("CARGO_PKG_VERSION").into());
        Ok(inputs)
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        (ctx.progress)("reading artifacts");
        let artifacts = Artifacts::load(ctx.root)?;
        let mut state = RunState::load(ctx.root, ctx.pipeline.stages.keys().map(String::as_str))?;
        let previous = manifest::read(ctx.root);
        state.carry_times(previous.as_ref());
        let env = crate::env::capture(
            ctx.root,
            &capture_options(ctx.pipeline, &artifacts, &state, previous.as_ref()),
        );
        let Templates {
            template: summary_tpl,
            manifest_template: manifest_tpl,
        } = templates(ctx.spec)?;
        (ctx.progress)("rendering the report");
        let inputs = report::Inputs {
            pipeline: ctx.pipeline,
            artifacts: &artifacts,
            state: &state,
            env: &env,
        };
        let rendered =
            report::render_report(&inputs, &report::load_template(ctx.root, &summary_tpl)?)?;
        write(ctx.staging, report::SUMMARY, &rendered.markdown)?;
        for (file, svg) in &rendered.charts {
            write(ctx.staging, &format!("reports/{file}"), svg)?;
        }
        (ctx.progress)("writing the manifest");
        let listed = manifest::list_artifacts(ctx.root, Some(ctx.staging))?;
        let not_measured = rendered.context.not_measured.clone();
        let mctx = manifest::context(ctx.pipeline, &state, &env, ctx.name, (listed, not_measured));
        let text = report::render::render(&report::load_template(ctx.root, &manifest_tpl)?, &mctx)?;
        write(ctx.staging, manifest::MANIFEST, &text)?;
        let failed = &rendered.context.failed_gates;
        Ok(match failed.first() {
            None => StageOutcome::Passed,
            Some(first) if failed.len() == 1 => StageOutcome::GateFailed(first.clone()),
            Some(first) => {
                StageOutcome::GateFailed(format!("{first} (and {} more)", failed.len() - 1))
            }
        })
    }
}

/// What the results were made with, from what was recorded: nvcc from the build records;
/// ncu, python and torch from the lock entries of the stages that ran them (torch from the
/// baseline records when they carry it); the GPU from the lock entry of the first stage
/// measured on one, with the previous manifest's `gpu:` for what the lock does not hold.
pub fn capture_options(
    pipeline: &crate::pipeline::Pipeline,
    artifacts: &Artifacts,
    state: &RunState,
    previous_manifest: Option<&serde_yaml::Value>,
) -> crate::env::CaptureOptions {
    let nvcc: std::collections::BTreeSet<&str> = artifacts
        .builds
        .iter()
        .flatten()
        .map(|b| b.nvcc_version.as_str())
        .collect();
    // In pipeline order, the recorded stages that ran (not skipped for want of the tool).
    let ran = || {
        pipeline
            .stages
            .keys()
            .filter_map(|n| state.stages.get(n))
            .filter(|s| s.status.is_some() && !s.skipped())
    };
    let tool = |name: &str| {
        ran()
            .find_map(|s| s.tools.get(name))
            .filter(|v| !v.starts_with("not found") && v.as_str() != "missing")
            .cloned()
    };
    let baselines = artifacts.baselines.as_deref().unwrap_or_default();
    let torch_from_records = baselines.iter().find_map(|b| {
        b.defines
            .get("torch")
            .or_else(|| b.defines.get("torch_version"))
            .cloned()
    });
    crate::env::CaptureOptions {
        nvcc_from_records: (!nvcc.is_empty())
            .then(|| nvcc.into_iter().collect::<Vec<_>>().join("; ")),
        nvcc_pin: crate::toolchain::pin(pipeline).copied(),
        ncu: tool("ncu"),
        python: tool("python"),
        torch: torch_from_records.or_else(|| tool("torch")),
        measured_on: ran()
            .filter_map(|s| s.hardware.clone())
            .find(|h| crate::stages::gpu_nodes::names_a_gpu(h)),
        previous_gpu: previous_manifest.and_then(|m| serde_yaml::from_value(m["gpu"].clone()).ok()),
    }
}

fn write(base: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let path = base.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}
