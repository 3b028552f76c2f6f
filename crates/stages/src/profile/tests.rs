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

#[test]
fn the_metric_lists_are_params_for_every_architecture_whatever_gpu_is_here() {
    let p = pipeline("{uses: profile, targets: [control], metrics: [dram__bytes_read.sum]}");
    let spec = &p.stages["prof"];
    let config = Profile.configure("prof", spec, &p).unwrap();
    let peers = Configs::new(vec![("prof".into(), config.clone())]);
    let stage = Configured {
        name: "prof",
        spec,
        config: &config,
        peers: &peers,
    };
    // No GPU here: the lists are still those of each architecture, as on a GPU machine.
    let dir = tempfile::tempdir().unwrap();
    let inputs = Profile
        .inputs(&stage, &p, dir.path(), &Overrides::default())
        .unwrap();
    let extra = ["dram__bytes_read.sum".to_string()];
    for arch in Arch::ALL {
        let chip = arch.chip();
        let full = &inputs.params[&format!("metrics_{chip}")];
        assert_eq!(*full, full_list(Some(arch), &extra).join(","));
        let one = &inputs.params[&format!("one_pass_metrics_{chip}")];
        assert_eq!(*one, one_pass_list(Some(arch)).join(","));
    }
    assert!(
        Profile.machine_params().is_empty(),
        "a changed list is a change of the sources, not of the machine"
    );
}
