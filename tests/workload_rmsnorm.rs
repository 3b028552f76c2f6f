//! The RMSNorm workload of `kernels/rmsnorm/` through the real `repro`: its pipeline
//! loads; its variants, and the register-heaviest configurations of its tune space, compile
//! for sm_89 (L4) and sm_90a (H100/H200) and pass the PTXAS gates; every configuration of
//! the space launches within CUDA's limits on every shape. The compiles need nvcc (CI
//! installs it); nothing here needs a GPU.

use repro::tune::space::Space;
use repro::workload::exprs::Compiled;
use repro::workload::limits::Limits;
use std::path::Path;

#[path = "support/shipped.rs"]
mod shipped;
#[path = "support/skip.rs"]
mod skip;

fn source(rel: &str) -> std::path::PathBuf {
    Path::new(shipped::SOURCE_ROOT)
        .join("kernels/rmsnorm")
        .join(rel)
}

/// `kernels/rmsnorm/` copied to `to`, with `pipeline.yaml` replaced by `pipeline`.
fn copy_workload(to: &Path, pipeline: &str) {
    for entry in std::fs::read_dir(source("")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::write(to.join("pipeline.yaml"), pipeline).unwrap();
}

fn tune_space() -> Space {
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(source("tune.yaml")).unwrap()).unwrap();
    Space::from_yaml(&yaml["space"], yaml.get("constraints")).unwrap()
}

/// Build every variant of `pipeline` for sm_89 and sm_90a; each must compile and pass its
/// gates on both.
fn build_passes(pipeline: &str, variants: &[String]) {
    let dir = tempfile::tempdir().unwrap();
    let archs = "\narch: [sm_89, sm_90a]\n";
    copy_workload(dir.path(), &pipeline.replacen("\narch: sm_89\n", archs, 1));
    let names: Vec<&str> = variants.iter().map(String::as_str).collect();
    for (variant, rec) in names.iter().zip(shipped::build(dir.path(), &names)) {
        assert_eq!(rec.status, "ok", "{variant}");
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
    let text = std::fs::read_to_string(source("pipeline.yaml")).unwrap();
    let variants = ["rms-scalar", "rms-warp-row", "rms-block-row"].map(String::from);
    build_passes(&text, &variants);
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
    let text = std::fs::read_to_string(source("pipeline.yaml")).unwrap();
    let (head, rest) = text.split_once("\nvariants:\n").unwrap();
    let (_, tail) = rest.split_once("\ncontrol: rms-scalar\n").unwrap();
    let mut names = Vec::new();
    let mut pipeline = format!("{head}\nvariants:\n");
    for (i, c) in heaviest.iter().enumerate() {
        let defines: Vec<String> = c.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        pipeline += &format!(
            "  t{i}: {{kernel: rmsnorm, defines: {{{}}}}}\n",
            defines.join(", ")
        );
        names.push(format!("t{i}"));
    }
    pipeline += &format!("\ncontrol: t0\n{tail}");
    build_passes(&pipeline, &names);
}

#[test]
fn every_tune_configuration_launches_within_cudas_limits_on_every_shape() {
    let project = repro::pipeline::load(&source("pipeline.yaml")).unwrap();
    let decl = &project.pipeline.workloads["rmsnorm"];
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
