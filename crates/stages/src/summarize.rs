//! The `summarize` stage kind: renders `reports/summary.md` (+ SVG charts), the dispatch
//! table `artifacts/dispatch.json` and `artifacts/manifest.yaml` from what the other stages
//! wrote. Options:
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

use anyhow::Context;
use repro_pipeline::kind::{Config, Configured, Overrides};
use repro_pipeline::options::decode;
use repro_pipeline::options::refuse_timeout;
use repro_pipeline::{
    kind::OptionError, kind::Outputs, kind::RunCtx, kind::StageInputs, kind::StageKind,
    kind::StageOutcome,
};
use repro_pipeline::{Pipeline, StageSpec};
use repro_report as report;
use repro_report::{artifacts::Artifacts, capture::capture_options, manifest, state::RunState};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub struct Summarize;

/// The stage's own keys: the template paths, relative to the project root.
#[derive(Debug, Clone, Deserialize)]
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

    /// `timeout:` is refused: rendering the report takes no time worth a limit.
    fn configure(
        &self,
        _name: &str,
        spec: &StageSpec,
        _pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        refuse_timeout(
            "summarize",
            spec,
            "it renders the report from the records in moments and starts no process",
        )?;
        templates(spec).map(Config::new)
    }

    fn outputs(&self, stage: &Configured, pipeline: &Pipeline) -> Outputs {
        let mut out = vec![PathBuf::from(report::SUMMARY)];
        out.extend(
            report::chart_files(pipeline, stage.peers)
                .into_iter()
                .map(|f| PathBuf::from("reports").join(f)),
        );
        out.push(PathBuf::from(report::dispatch::DISPATCH));
        out.push(PathBuf::from(manifest::MANIFEST));
        out
    }

    fn inputs(
        &self,
        stage: &Configured,
        _pipeline: &Pipeline,
        root: &Path,
        _overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let mut inputs = StageInputs::default();
        let Templates {
            template: summary,
            manifest_template: manifest,
        } = stage.config.of::<Templates>().clone();
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
                let hash = repro_base::tools::hex(&Sha256::digest(builtin.as_bytes()));
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
        let env = repro_gpu::env::capture(
            ctx.root,
            &capture_options(ctx.pipeline, &artifacts, &state, previous.as_ref()),
        );
        let Templates {
            template: summary_tpl,
            manifest_template: manifest_tpl,
        } = ctx.config.of::<Templates>();
        (ctx.progress)("rendering the report");
        let inputs = report::Inputs {
            pipeline: ctx.pipeline,
            configs: ctx.peers,
            artifacts: &artifacts,
            state: &state,
            env: &env,
        };
        let rendered =
            report::render_report(&inputs, &report::load_template(ctx.root, summary_tpl)?)?;
        for (rel, text) in rendered.files() {
            write(ctx.staging, &rel, &text)?;
        }
        (ctx.progress)("writing the manifest");
        let listed = manifest::list_artifacts(ctx.root, Some(ctx.staging))?;
        let not_measured = rendered.context.not_measured.clone();
        let mctx = manifest::context(ctx.pipeline, &state, &env, ctx.name, (listed, not_measured));
        let text = report::render::render(&report::load_template(ctx.root, manifest_tpl)?, &mctx)?;
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

fn write(base: &Path, rel: &str, text: &str) -> anyhow::Result<()> {
    let path = base.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}
