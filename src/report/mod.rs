//! Reports: the summarize stage's rendering (markdown report, SVG charts, manifest) and the
//! pull-request workflow (`repro diff`, `repro commit`).
//!
//! [`artifacts`] loads what the stages wrote, [`state`] what the engine recorded,
//! [`context`] turns both into the report's template context (each skip reason stated once
//! by [`notes`]), [`render`] runs minijinja, [`charts`] draws the SVGs, [`manifest`] lists
//! every artifact; [`diff`], [`commit`] and [`verify`] implement the pull-request subcommands.

pub mod artifacts;
pub mod charts;
pub mod commit;
pub mod context;
pub mod diff;
pub mod machines;
pub mod manifest;
pub mod notes;
pub mod render;
pub mod state;
pub mod verify;

use crate::env::Environment;
use crate::pipeline::Pipeline;
use artifacts::Artifacts;
use context::ReportContext;
use render::Template;
use state::RunState;
use std::path::Path;

/// The project's report template and the built-in default used when it has none.
pub const SUMMARY_TEMPLATE: &str = "templates/summary.md.j2";
pub const SUMMARY_TEMPLATE_BUILTIN: &str = include_str!("../../templates/summary.md.j2");
/// The project's manifest template and its built-in default.
pub const MANIFEST_TEMPLATE: &str = "templates/manifest.yaml.j2";
pub const MANIFEST_TEMPLATE_BUILTIN: &str = include_str!("../../templates/manifest.yaml.j2");
/// Where the report goes.
pub const SUMMARY: &str = "reports/summary.md";

/// The report and its charts, ready to write under `reports/`.
#[derive(Debug, Clone)]
pub struct Report {
    pub context: ReportContext,
    pub markdown: String,
    /// `(file name under reports/, SVG)`, in a fixed order.
    pub charts: Vec<(String, String)>,
}

/// Everything the report is made from.
pub struct Inputs<'a> {
    pub pipeline: &'a Pipeline,
    pub artifacts: &'a Artifacts,
    pub state: &'a RunState,
    pub env: &'a Environment,
}

/// Render the report from `inputs` with `template`. The tune chart is drawn when there is
/// tune data, and when the pipeline has a tune stage (it is then a declared output, written
/// even when the tune did not run, saying so, though the report does not link it).
pub fn render_report(inputs: &Inputs, template: &Template) -> anyhow::Result<Report> {
    let context =
        context::Builder::new(inputs.pipeline, inputs.artifacts, inputs.state, inputs.env).build();
    let markdown = render::render(template, &context)?;
    let control = inputs.pipeline.control.as_deref();
    let panels = charts::p50_panels(inputs.artifacts, control, context.best.as_deref());
    let p50 = charts::p50_chart(&panels, &context.primary_shape)?;
    let mut out = vec![(context::P50_CHART.to_string(), p50)];
    if has_tune_stage(inputs.pipeline) || inputs.artifacts.tune.is_some() {
        // The section's note may cite a footnote, which means nothing in an SVG.
        let svg = match &inputs.artifacts.tune {
            Some(tune) if context.tune.ran => {
                let control_p50 = control.and_then(|c| {
                    let f = inputs
                        .artifacts
                        .benches
                        .as_deref()?
                        .iter()
                        .find(|f| f.name == c)?;
                    context::shape_p50(&f.results, &context.primary_shape).map(|p| (c, p))
                });
                charts::tune_chart(tune, control_p50)?
            }
            _ => charts::message_chart("tune", "not run (the report says why)"),
        };
        out.push((context::TUNE_CHART.to_string(), svg));
    }
    Ok(Report {
        context,
        markdown,
        charts: out,
    })
}

/// Whether the pipeline has a stage of kind `tune`.
pub fn has_tune_stage(pipeline: &Pipeline) -> bool {
    pipeline.stages.values().any(|s| s.uses == "tune")
}

/// Load the project's template at `rel`, or the built-in one.
pub fn load_template(root: &Path, rel: &str) -> anyhow::Result<Template> {
    let builtin = if rel == MANIFEST_TEMPLATE {
        MANIFEST_TEMPLATE_BUILTIN
    } else {
        SUMMARY_TEMPLATE_BUILTIN
    };
    Template::load(root, rel, builtin)
}
