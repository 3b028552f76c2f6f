//! The RMSNorm workload of the shipped pipeline through the real `repro`: its variants, and
//! the register-heaviest configurations of its tune space, compile for sm_89 (L4) and
//! sm_90a (H100/H200) and pass the PTXAS and ABI gates; every configuration of the space
//! launches within CUDA's limits on every shape. The compiles need nvcc (CI installs it);
//! nothing here needs a GPU.

use repro::pipeline::Pipeline;
use repro::schema::BuildStatus;
use repro::tune::space::Space;
use repro::workload::exprs::Compiled;
use repro::workload::limits::Limits;
use std::path::Path;

use crate::shipped;

fn shipped_pipeline() -> Pipeline {
    repro::pipeline::load(&Path::new(shipped::SOURCE_ROOT).join("pipeline.yaml"))
        .unwrap()
        .pipeline
}

/// The RMSNorm tune stage's space.
fn tune_space() -> Space {
    let p = shipped_pipeline();
    let stage = &p.stages["evo-tune-rmsnorm"].options;
    let get = |k: &str| stage.get(serde_yaml::Value::from(k));
    Space::from_yaml(get("space").unwrap(), get("constraints")).unwrap()
}

/// The shipped pipeline with only the RMSNorm workload, `variants` for its variants and a
/// build stage.
fn rmsnorm_only(variants: &[(String, String)]) -> String {
    let mut p = shipped_pipeline();
    p.workloads.retain(|name, _| name == "rmsnorm");
    p.workloads["rmsnorm"].control = None;
    p.kernels.retain(|name, _| name == "rmsnorm");
    p.variants = variants
        .iter()
        .map(|(name, defines)| {
            let spec = format!("{{kernel: rmsnorm, defines: {{{defines}}}}}");
            (name.clone(), serde_yaml::from_str(&spec).unwrap())
        })
        .collect();
    p.control = None;
    p.gates.performance = None;
    p.stages.retain(|name, _| name == "build");
    serde_yaml::to_string(&p).unwrap()
}

/// Build `pipeline` in a copy of the project; every one of `variants` must compile and pass
/// its gates on sm_89 and sm_90a.
fn build_passes(pipeline: &str, variants: &[String]) {
    let dir = tempfile::tempdir().unwrap();
    shipped::copy_project(dir.path());
    std::fs::write(dir.path().join("pipeline.yaml"), pipeline).unwrap();
    let names: Vec<&str> = variants.iter().map(String::as_str).collect();
    for (variant, rec) in names.iter().zip(shipped::build(dir.path(), &names)) {
        assert_eq!(rec.status, BuildStatus::Ok, "{variant}");
        let built: Vec<&str> = rec.archs.keys().map(String::as_str).collect();
        assert_eq!(built, ["sm_89", "sm_90a"], "{variant}");
        for (arch, b) in &rec.archs {
            assert!(
                !b.gates.is_empty() && b.gates.iter().all(|g| g.pass),
                "{arch} {variant}: {:?}",
                b.gates
            );
        }
    }
}

#[test]
fn the_shipped_variants_compile_and_pass_ptxas_gates_on_sm89_and_sm90a() {
    if shipped::pinned_nvcc("the_shipped_variants_compile_and_pass_ptxas_gates_on_sm89_and_sm90a")
        .is_none()
    {
        return;
    }
    let p = shipped_pipeline();
    let variants: Vec<(String, String)> = ["rms-scalar", "rms-warp-row", "rms-block-row"]
        .iter()
        .map(|v| {
            let defines: Vec<String> = p.variants[*v]
                .defines
                .iter()
                .map(|(k, v)| format!("{k}: {}", repro::pipeline::define_value(v).unwrap()))
                .collect();
            (v.to_string(), defines.join(", "))
        })
        .collect();
    let names: Vec<String> = variants.iter().map(|(n, _)| n.clone()).collect();
    build_passes(&rmsnorm_only(&variants), &names);
}

/// The configurations of the space that hold the most in registers under the tightest
/// register budget: per (VEC, CACHED_VECS, warp-per-row path or not) among those at the
/// bound of its register constraint or at the largest cache, the largest block (of the
/// fewest rows). `benches/rmsnorm_space.sh` compiles the whole space.
#[test]
fn the_register_heaviest_tune_configurations_compile_without_spills() {
    if shipped::pinned_nvcc("the_register_heaviest_tune_configurations_compile_without_spills")
        .is_none()
    {
        return;
    }
    let space = tune_space();
    let threads = |c: &repro::tune::space::Config| c["THREADS_PER_ROW"] * c["ROWS_PER_BLOCK"];
    let group =
        |c: &repro::tune::space::Config| (c["VEC"], c["CACHED_VECS"], c["THREADS_PER_ROW"] == 32);
    let frontier: Vec<_> = space
        .valid()
        .iter()
        .filter(|c| {
            let cache = c["VEC"] * c["CACHED_VECS"];
            cache == 64 || cache * threads(c) == 32768
        })
        .collect();
    let size = |c: &repro::tune::space::Config| (threads(c), c["THREADS_PER_ROW"]);
    let heaviest: Vec<_> = frontier
        .iter()
        .filter(|c| {
            let most = frontier
                .iter()
                .filter(|d| group(d) == group(c))
                .map(|d| size(d))
                .max();
            Some(size(c)) == most
        })
        .collect();
    assert_eq!((frontier.len(), heaviest.len()), (25, 4));
    let variants: Vec<(String, String)> = heaviest
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let defines: Vec<String> = c.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            (format!("t{i}"), defines.join(", "))
        })
        .collect();
    let names: Vec<String> = variants.iter().map(|(n, _)| n.clone()).collect();
    build_passes(&rmsnorm_only(&variants), &names);
}

#[test]
fn every_tune_configuration_launches_within_cudas_limits_on_every_shape() {
    let p = shipped_pipeline();
    let decl = &p.workloads["rmsnorm"];
    let space = tune_space();
    let names: Vec<&str> = space.params().iter().map(|p| p.name.as_str()).collect();
    let compiled = Compiled::new("rmsnorm", decl, &names).unwrap();
    assert_eq!(space.valid().len(), 395);
    for shape in decl.shapes.keys() {
        let dims = compiled.dims(shape).unwrap();
        for config in space.valid() {
            let g = compiled.launch(&dims, config, shape).unwrap();
            assert_eq!(Limits::ARCHITECTURAL.check(&g), [], "{shape} {config:?}");
            assert_eq!(
                g.block[0],
                config["THREADS_PER_ROW"] * config["ROWS_PER_BLOCK"]
            );
        }
    }
}
