//! Reports: the summarize stage's rendering (markdown report, SVG charts, manifest) and the
//! pull-request workflow (`repro diff`, `repro commit`).
//!
//! [`artifacts`] loads what the stages wrote, [`state`] what the engine recorded,
//! [`context`] turns both into the report's template context (each skip reason stated once
//! by [`notes`]), [`render`] runs minijinja, [`charts`] draws the SVGs, [`dispatch`] ranks
//! the kernels per shape (`artifacts/dispatch.json`), [`manifest`] lists every artifact; [`diff`], [`commit`] and [`verify`] implement the pull-request
//! subcommands ([`git_cli`] makes `repro commit`'s commit with the `git` command line).
//!
//! It reads records (`repro-schema`) and the engine's lock, never a stage's internals: it
//! may depend on every crate below it, but never on `repro-stages`.

pub mod artifacts;
pub mod best;
pub mod capture;
pub mod charts;
pub mod commit;
pub mod context;
pub mod diff;
pub mod dispatch;
pub mod git_cli;
pub mod machines;
pub mod manifest;
pub mod measured;
pub mod notes;
pub mod render;
pub mod state;
pub mod tree;
pub mod verify;

use artifacts::Artifacts;
use context::ReportContext;
use render::Template;
use repro_gpu::env::Environment;
use repro_pipeline::kind::Configs;
use repro_pipeline::Pipeline;
use state::RunState;
use std::path::Path;

/// The project's report template and the built-in default used when it has none.
pub const SUMMARY_TEMPLATE: &str = "templates/summary.md.j2";
pub const SUMMARY_TEMPLATE_BUILTIN: &str = include_str!("../../../templates/summary.md.j2");
/// The project's manifest template and its built-in default.
pub const MANIFEST_TEMPLATE: &str = "templates/manifest.yaml.j2";
pub const MANIFEST_TEMPLATE_BUILTIN: &str = include_str!("../../../templates/manifest.yaml.j2");
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

impl Report {
    /// What the summarize stage writes besides the manifest, as `(path relative to the
    /// project root, text)`: the report, its charts and the dispatch table.
    pub fn files(&self) -> Vec<(String, String)> {
        let mut out = vec![(SUMMARY.to_string(), self.markdown.clone())];
        out.extend(
            self.charts
                .iter()
                .map(|(file, svg)| (format!("reports/{file}"), svg.clone())),
        );
        out.push((
            dispatch::DISPATCH.to_string(),
            repro_schema::to_json_pretty(&self.context.dispatch),
        ));
        out
    }
}

/// Everything the report is made from.
pub struct Inputs<'a> {
    pub pipeline: &'a Pipeline,
    /// Every stage's options as its kind decoded them (`Project::configs`).
    pub configs: &'a Configs,
    pub artifacts: &'a Artifacts,
    pub state: &'a RunState,
    pub env: &'a Environment,
}

/// Render the report from `inputs` with `template`, and its charts: each workload's p50
/// chart, and each tune stage's (a declared output, written even when the tune did not run,
/// saying so, though the report does not link it).
pub fn render_report(inputs: &Inputs, template: &Template) -> anyhow::Result<Report> {
    let context = context::Builder::new(
        inputs.pipeline,
        inputs.configs,
        inputs.artifacts,
        inputs.state,
        inputs.env,
    )
    .build();
    let markdown = render::render(template, &context)?;
    let workloads = repro_pipeline::workload::Workloads::of(inputs.pipeline);
    let mut out = Vec::new();
    for (scoped, part) in context::scopes(inputs.pipeline, inputs.configs, inputs.artifacts)
        .iter()
        .zip(&context.workloads)
    {
        let dims = workloads
            .get(&part.name)
            .map(|d| d.dims.clone())
            .unwrap_or_default();
        let tuned = scoped
            .scope
            .tunes
            .first()
            .map_or("tune", |(_, dir)| dir.rsplit('/').next().unwrap_or(dir));
        let marks = charts::Marks {
            control: part.control.as_deref(),
            best: part.best.as_deref(),
            tuned,
            dims: &dims,
        };
        let panels = charts::p50_panels(&scoped.artifacts, marks);
        out.push((
            scoped.scope.p50_chart.clone(),
            charts::p50_chart(&panels, &part.primary_shape)?,
        ));
        for (tune, (_, dir)) in part.tunes.iter().zip(&scoped.scope.tunes) {
            // The section's note may cite a footnote, which means nothing in an SVG.
            let svg = match inputs.artifacts.tunes.get(dir) {
                Some(data) if tune.section.ran => {
                    let control_p50 = part.control.as_deref().and_then(|c| {
                        let f = scoped
                            .artifacts
                            .benches
                            .as_deref()?
                            .iter()
                            .find(|f| f.name == c)?;
                        context::shape_p50(&f.results, &part.primary_shape).map(|p| (c, p))
                    });
                    charts::tune_chart(data, control_p50)?
                }
                _ => charts::message_chart("tune", "not run (the report says why)"),
            };
            out.push((context::tune_chart_name(dir), svg));
        }
    }
    Ok(Report {
        context,
        markdown,
        charts: out,
    })
}

/// The charts `pipeline`'s report draws, as file names under `reports/`: each workload's
/// p50 chart, then each tune stage's (of `configs`).
pub fn chart_files(pipeline: &Pipeline, configs: &Configs) -> Vec<String> {
    let workloads = repro_pipeline::workload::Workloads::of(pipeline);
    let mut out: Vec<String> = if workloads.is_empty() {
        vec![context::P50_CHART.to_string()]
    } else {
        workloads
            .names()
            .enumerate()
            .map(|(i, n)| context::p50_chart_name(i, n))
            .collect()
    };
    out.extend(
        context::tune_stages(configs)
            .iter()
            .map(|(_, o)| context::tune_chart_name(&o.dir)),
    );
    out
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
