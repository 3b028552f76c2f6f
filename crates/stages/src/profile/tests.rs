//! The profile stage without a GPU: options, targets, the ncu command line, failures.

mod options;
mod reading;
mod script_calls;
mod targets;

use super::run::Reading;
use super::*;
use repro_pipeline::Pipeline;
use repro_pipeline::StageSpec;
use repro_schema::{NcuTarget, RunStatus};
use repro_tune::options::TuneOptions;
use std::path::Path;

fn pipeline(stage: &str) -> Pipeline {
    repro_pipeline::workload::testing::tiny_pipeline(
        &format!(
            "kernels:\n  k: {{source: kernels/k.cu, entry: k_fwd}}\nvariants:\n  base: {{kernel: k}}\n  ws: {{kernel: k}}\n  mm: {{kernel: k}}\ncontrol: base\nstages:\n  tune: {{uses: tune, base: base, space: {{X: [1, 2]}}}}\n  prof: {stage}\n"
        ),
        &["k"],
    )
}

fn options(stage: &str) -> Result<ProfileOptions, OptionError> {
    let p = pipeline(stage);
    ProfileOptions::from_spec(&p.stages["prof"], &p)
}

/// A profile stage whose one baseline, `torch`, runs on `shapes` (a YAML list).
fn with_baseline(shapes: &str) -> String {
    format!(
        "{{uses: profile, targets: [control], baselines: {{torch: {{run: [python3, b.py, --profile], workload: tiny, shapes: {shapes}}}}}}}"
    )
}

/// A baseline call of `b.py` (the shipped scripts' calls in `baseline_calls.csv`).
fn script_call(baseline: &str, shape: &str) -> Target {
    Target {
        label: format!("{baseline}@{shape}"),
        variant: baseline.into(),
        entry: String::new(),
        program: Program::Script(vec!["python3".into(), "b.py".into()]),
        workload: "tiny".into(),
        shape: shape.into(),
    }
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/fixtures/ncu")
            .join(name),
    )
    .unwrap()
}

/// The four SDPA calls of the derived one-process capture, in its order.
fn sdpa_calls() -> Vec<Target> {
    [
        ("torch-sdpa-best", "mission"),
        ("torch-sdpa-default", "mission"),
        ("torch-sdpa-best", "long"),
        ("torch-sdpa-default", "long"),
    ]
    .map(|(b, s)| script_call(b, s))
    .into()
}

/// Reading a process that profiled `launches` launches (calls) per target.
fn reading(launches: u32) -> Reading<'static> {
    Reading {
        arch: None,
        extra: &[],
        launches,
    }
}

/// [`resolve_targets`] with the tune stages `spec` needs, decoded as their kind does.
fn resolve(
    opts: &ProfileOptions,
    spec: &StageSpec,
    p: &Pipeline,
    root: &Path,
) -> (Vec<Target>, Vec<NcuTarget>) {
    let tunes: Vec<(&str, TuneOptions)> = spec
        .needs
        .iter()
        .filter_map(|n| Some((n.as_str(), TuneOptions::parse(p.stages.get(n)?, p).ok()?)))
        .collect();
    let named: Vec<(&str, &TuneOptions)> = tunes.iter().map(|(n, o)| (*n, o)).collect();
    resolve_targets(opts, &named, p, root)
}
