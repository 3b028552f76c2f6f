//! The report and manifest rendered from fixture artifacts (tests/fixtures/report/<scenario>,
//! written by its generate.py following src/schema.rs), as insta snapshots; what the charts
//! show, as data snapshots; determinism; template errors.

mod charts;
mod committed;
mod dispatch;
mod provenance;
mod scenarios;
mod tables;
mod workloads;

use repro::env::{Environment, GitState, GpuSnapshot};
use repro::report::{self, artifacts::Artifacts, manifest, render, state::RunState};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

/// A fixed environment so snapshots do not depend on this machine.
fn environment(with_tools: bool) -> Environment {
    Environment {
        git: Some(GitState {
            sha: Some("4f2c9a1e7b3d5c8f0a6e2d4b9c1f3a5e7d9b0c2e".into()),
            branch: Some("ws-producer-warps".into()),
            dirty: true,
        }),
        gpu: Some(GpuSnapshot {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: Some("GPU-5e1c7a2b-93d4-4f0e-8b6a-1c2d3e4f5a6b".into()),
            compute_capability: "9.0".into(),
            sm_count: Some(132),
            memory_bytes: Some(85_520_809_984),
            driver_version: Some("580.95.05".into()),
            cuda_driver_version: Some("13.0".into()),
        }),
        gpu_note: None,
        nvcc: Some("Cuda compilation tools, release 13.0, V13.0.88".into()),
        ncu: with_tools.then(|| "Version 2025.3.1.0 (build 36398880)".into()),
        python: with_tools.then(|| "Python 3.11.9".into()),
        torch: with_tools.then(|| "2.9.0+cu130".into()),
        host: Some("gpu-node-17".into()),
        repro_version: "0.1.0".into(),
        created_utc: "2026-11-22T03:00:00Z".into(),
    }
}

struct Rendered {
    report: report::Report,
    manifest: String,
}

/// With `REPRO_DUMP_REPORT=<folder>` set, the rendered report and charts of each scenario
/// are written to `<folder>/<scenario>/` to look at (e.g. converted to HTML and PNG).
fn dump(name: &str, report: &report::Report) {
    let Some(dir) = std::env::var_os("REPRO_DUMP_REPORT") else {
        return;
    };
    let dir = PathBuf::from(dir).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("summary.md"), &report.markdown).unwrap();
    for (file, svg) in &report.charts {
        std::fs::write(dir.join(file), svg).unwrap();
    }
}

fn render_fixture(name: &str, env: &Environment) -> Rendered {
    let root = fixture(name);
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let artifacts = Artifacts::load(&root).unwrap();
    let state = RunState::load(&root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let inputs = report::Inputs {
        pipeline: &pipeline,
        configs: &configs,
        artifacts: &artifacts,
        state: &state,
        env,
    };
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    let report = report::render_report(&inputs, &template).unwrap();
    dump(name, &report);
    // Lay the report out as the stage would stage it, so the manifest lists it.
    let staging = tempfile::tempdir().unwrap();
    for (rel, text) in report.files() {
        let path = staging.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let listed = manifest::list_artifacts(&root, Some(staging.path())).unwrap();
    let not_measured = report.context.not_measured.clone();
    let mctx = manifest::context(&pipeline, &state, env, "summarize", (listed, not_measured));
    let mtpl = report::load_template(&root, report::MANIFEST_TEMPLATE).unwrap();
    let manifest = render::render(&mtpl, &mctx).unwrap();
    Rendered { report, manifest }
}

/// The summary of the `green` fixture's pipeline from `artifacts` and `state`, by the
/// built-in template.
fn green_summary(artifacts: &Artifacts, state: &RunState) -> String {
    let root = fixture("green");
    let repro::pipeline::Project {
        pipeline, configs, ..
    } = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let env = environment(true);
    let inputs = report::Inputs {
        pipeline: &pipeline,
        configs: &configs,
        artifacts,
        state,
        env: &env,
    };
    let template = report::load_template(&root, report::SUMMARY_TEMPLATE).unwrap();
    report::render_report(&inputs, &template).unwrap().markdown
}

/// Every stage's options of `pipeline` as its built-in kind decodes them (what a load keeps),
/// for a pipeline the test parsed itself.
fn configs_of(pipeline: &repro::pipeline::Pipeline) -> repro::pipeline::kind::Configs {
    let kinds = repro::stages::kinds();
    repro::pipeline::kind::Configs::new(
        pipeline
            .stages
            .iter()
            .filter_map(|(name, spec)| {
                let kind = kinds.iter().find(|k| k.kind() == spec.uses)?;
                Some((name.clone(), kind.configure(name, spec, pipeline).ok()?))
            })
            .collect(),
    )
}

/// The report of `pipeline` on the records in `root`, by the template of `templates` (its
/// own, else the built-in one), in the fixed environment.
fn render_in(
    root: &Path,
    pipeline: &repro::pipeline::Pipeline,
    configs: &repro::pipeline::kind::Configs,
    templates: &Path,
) -> anyhow::Result<report::Report> {
    let artifacts = Artifacts::load(root).unwrap();
    let state = RunState::load(root, pipeline.stages.keys().map(String::as_str)).unwrap();
    let env = environment(true);
    let inputs = report::Inputs {
        pipeline,
        configs,
        artifacts: &artifacts,
        state: &state,
        env: &env,
    };
    let template = report::load_template(templates, report::SUMMARY_TEMPLATE).unwrap();
    report::render_report(&inputs, &template)
}

/// The manifest with its machine- and time-dependent values replaced.
fn redact(manifest: &str) -> String {
    manifest
        .lines()
        .map(|l| {
            let key = l.trim_start().split(':').next().unwrap_or("");
            match key {
                "created_utc" | "host" | "sha" | "branch" | "dirty" => {
                    let indent = &l[..l.len() - l.trim_start().len()];
                    format!("{indent}{key}: \"[redacted]\"")
                }
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
