//! The shipped pipeline: every shipped variant profiled, every tail of every tuned config reached.

use super::*;
use repro::stages::BuiltinKind;
use repro::tune::options::TuneOptions;
use std::collections::{BTreeMap, BTreeSet};

/// The shipped pipeline profiles what it ships: the profile stage's targets, resolved as the
/// stage resolves them (`control` to the control variant), cover every variant, so the report
/// never shows a shipped variant without its Nsight Compute row.
#[test]
fn the_shipped_profile_stage_covers_every_shipped_variant() {
    use repro::stages::profile::{needed_tunes, resolve_targets, ProfileOptions};
    let root = source_root();
    let project = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let pipeline = &project.pipeline;
    let profiles: Vec<_> = project
        .stages
        .iter()
        .filter(|s| s.config.get::<ProfileOptions>().is_some())
        .collect();
    assert_eq!(profiles.len(), 1, "one profile stage in pipeline.yaml");
    let opts: &ProfileOptions = profiles[0].config.of();
    let tunes = needed_tunes(&profiles[0].spec, &project.configs);
    let (run, _) = resolve_targets(opts, &tunes, pipeline, &root);
    let targets: BTreeSet<&str> = run.iter().map(|t| t.variant.as_str()).collect();
    let missing: Vec<&str> = pipeline
        .variants
        .keys()
        .map(String::as_str)
        .filter(|v| !targets.contains(v))
        .collect();
    assert!(
        missing.is_empty(),
        "pipeline.yaml: shipped variants the profile stage does not profile: {missing:?}"
    );
}

/// The shipped shapes reach every tail path (`kernels.<name>.tails`) of every configuration
/// a shipped tune stage may try — each valid point of its space over its base's defines —
/// not only of the shipped variants, so a tuned kernel's confirmation on every declared
/// shape runs its partial tiles and scalar tails too.
#[test]
fn the_shipped_shapes_reach_every_tail_of_every_tunable_configuration() {
    use repro::pipeline::VariantSpec;
    use repro::workload::tails::of_variant;
    let mut p = pipeline_of(&source_root());
    let tunes: Vec<TuneOptions> = p
        .stages
        .values()
        .filter(|s| s.is(BuiltinKind::Tune))
        .map(|s| TuneOptions::parse(s, &p).unwrap())
        .collect();
    assert_eq!(
        tunes.len(),
        3,
        "pipeline.yaml tunes both attention families and RMSNorm"
    );
    let mut checked = 0;
    for o in &tunes {
        for config in o.space.valid() {
            let mut defines: repro::pipeline::Defines = o
                .base_defines
                .iter()
                .map(|(k, v)| (k.clone(), serde_yaml::from_str(v).unwrap()))
                .collect();
            defines.extend(config.iter().map(|(k, v)| (k.clone(), (*v).into())));
            let trial = VariantSpec {
                kernel: o.kernel.clone(),
                defines,
                precision: None,
            };
            p.variants.insert("trial".into(), trial);
            let reach = of_variant(&p, "trial").unwrap();
            assert!(!reach.is_empty(), "kernel `{}` declares no tails", o.kernel);
            if let Some(r) = reach.iter().find(|r| r.unreached()) {
                panic!(
                    "{} with {config:?}: no shipped shape reaches `{}` ({})",
                    o.kernel, r.tail, r.condition
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked} configurations");
}

/// The shipped PyTorch baselines run in one Python process, torch imported once: one `cmd`
/// stage runs every baseline the profile stage names (its `outs` are their files), the
/// profile stage's `baselines:` share one command (so one ncu process), and that command is
/// the stage's own script. No tool the stages fingerprint imports torch: the probes run
/// before any stage, and an import takes seconds.
#[test]
fn the_shipped_baselines_run_in_one_process_and_no_probe_imports_torch() {
    use repro::pipeline::Command;
    use repro::stages::profile::ProfileOptions;
    let root = source_root();
    let project = repro::pipeline::load(&root.join("pipeline.yaml")).unwrap();
    let profile = project
        .stages
        .iter()
        .find(|s| s.config.get::<ProfileOptions>().is_some())
        .unwrap();
    let opts: &ProfileOptions = profile.config.of();
    let runs: BTreeSet<&Vec<String>> = opts.baselines.values().map(|b| &b.run).collect();
    assert_eq!(runs.len(), 1, "one command for every baseline: {runs:?}");
    let script = runs.first().unwrap()[1].clone();
    let cmds: Vec<_> = project
        .stages
        .iter()
        .filter(|s| s.spec.uses == "cmd")
        .collect();
    let runners: Vec<&str> = cmds
        .iter()
        .filter(|s| matches!(&s.spec.run, Some(Command::Argv(a)) if a.contains(&script)))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(runners, ["baselines"], "one stage runs {script}");
    let stage = cmds.iter().find(|s| s.name == "baselines").unwrap();
    let outs: BTreeSet<String> = stage
        .spec
        .outs
        .iter()
        .map(|o| o.rsplit('/').next().unwrap().to_string())
        .collect();
    let names: BTreeSet<String> = opts.baselines.keys().map(|b| format!("{b}.json")).collect();
    assert_eq!(
        outs, names,
        "the baselines stage writes every profiled baseline"
    );
    for s in &cmds {
        let tools = serde_yaml::to_string(&s.spec.options.get("tools")).unwrap();
        assert!(
            !tools.contains("import torch"),
            "stage `{}`: a tool imports torch: {tools}",
            s.name
        );
    }
    // Every module the script imports is a dep of the stage.
    for module in ["baselines_common.py", "torch_sdpa.py", "torch_rmsnorm.py"] {
        let path = format!("kernels/baselines/{module}");
        assert!(stage.spec.deps.contains(&path), "{path} is no dep");
    }
}

/// The `#error` rules of a kernel source: each `#if COND` whose next line is an `#error`, as
/// a constraint expression, and the values its `#ifndef NAME` / `#define NAME VALUE` pairs
/// give the defines a build leaves unset.
fn error_rules(source: &str) -> (Vec<String>, BTreeMap<String, i64>) {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    let rules = lines
        .windows(2)
        .filter(|pair| pair[1].starts_with("#error"))
        .filter_map(|pair| pair[0].strip_prefix("#if "))
        .map(str::to_string)
        .collect();
    (rules, repro::tune::start::source_defaults(source))
}

/// Every configuration the shipped tune of `kernels/sdpa_fp8_ws.cu` may try — each valid
/// point of its space over its base's defines and the file's defaults — passes the kernel's
/// own `#error` rules, read from the source: no trial is spent on a compile error. (Its
/// `static_assert`s and the ptxas gate are checked by compiling the space's corners,
/// `tests/integration/shipped_kernels.rs`.)
#[test]
fn every_configuration_of_the_shipped_ws_tune_passes_the_kernels_error_rules() {
    use repro::expr::Expr;
    let root = source_root();
    let p = pipeline_of(&root);
    let ws: Vec<(String, TuneOptions)> = p
        .stages
        .iter()
        .filter(|(_, s)| s.is(BuiltinKind::Tune))
        .map(|(n, s)| (n.clone(), TuneOptions::parse(s, &p).unwrap()))
        .filter(|(_, o)| o.kernel == "sdpa_fp8_ws")
        .collect();
    let [(stage, o)] = ws.as_slice() else {
        panic!(
            "pipeline.yaml: one tune stage of sdpa_fp8_ws, not {}",
            ws.len()
        )
    };
    assert_eq!(
        o.archs.as_deref(),
        Some(&["sm_90a".to_string()][..]),
        "{stage}: the ws family is tuned on sm_90a"
    );
    let source = std::fs::read_to_string(root.join(&p.kernels[&o.kernel].source)).unwrap();
    let (rules, defaults) = error_rules(&source);
    assert!(rules.len() >= 8, "the kernel's #error rules: {rules:?}");
    let known: Vec<&str> = defaults.keys().map(String::as_str).collect();
    let rules: Vec<Expr> = rules
        .iter()
        .map(|r| Expr::parse(r, &known).unwrap_or_else(|e| panic!("#if {r}: {}", e.render(r))))
        .collect();
    let valid = o.space.valid();
    assert!(
        (100..=400).contains(&valid.len()),
        "{stage}: a few hundred configurations at most, not {}",
        valid.len()
    );
    for config in valid {
        let mut defines = defaults.clone();
        defines.extend(
            o.base_defines
                .iter()
                .map(|(k, v)| (k.clone(), v.parse().unwrap())),
        );
        defines.extend(config.clone());
        for rule in &rules {
            assert!(
                !rule.holds(&defines).unwrap(),
                "{stage}: {config:?} hits `#if {rule}`"
            );
        }
    }
}

/// Every shipped tune's first trial is its base variant: the base's defines, with the
/// kernel's defaults for the rest, are a valid configuration of its space.
#[test]
fn every_shipped_tune_starts_from_its_base_variant() {
    let root = source_root();
    let p = pipeline_of(&root);
    for (stage, spec) in p.stages.iter().filter(|(_, s)| s.is(BuiltinKind::Tune)) {
        let o = TuneOptions::parse(spec, &p).unwrap();
        let source = std::fs::read_to_string(root.join(&p.kernels[&o.kernel].source)).unwrap();
        let start = repro::tune::start::base_config(&o.space, &o.base_defines, &source);
        let start = start.unwrap_or_else(|| panic!("{stage}: its base is not in its space"));
        for (name, value) in &o.base_defines {
            if let Some(v) = start.get(name) {
                assert_eq!(v.to_string(), *value, "{stage}: {name}");
            }
        }
    }
}
