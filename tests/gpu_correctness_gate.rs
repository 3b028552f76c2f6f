//! The correctness gate against real bugs (`REPRO_GPU_TESTS=1`; otherwise a "skipped:"
//! line): with the default thresholds of pipeline.yaml, every shipped variant passes on
//! every (shape, input recipe, seed) the pipeline checks, the bug-free planted kernel passes
//! in both precision classes, and each planted bug of `tests/fixtures/cuda/planted.cu` fails
//! on at least one of them. Every measurement is printed, and written as TSV to
//! `$REPRO_GATE_TABLE` when set (docs/guide/correctness.md quotes them).

mod common;

use common::*;
use repro::gpu::exec::{check_run, Run};
use repro::gpu::warm::{Reference, Warm};
use repro::pipeline::Pipeline;
use repro::workload::Workloads;
use std::path::{Path, PathBuf};

/// The precision classes of the attention workload.
const CLASSES: [&str; 2] = ["fp16-pv", "fp8-pv"];

/// The planted bugs, by `PLANTED_BUG` value.
const BUGS: [(u32, &str); 5] = [
    (1, "skipped-tile"),
    (2, "wrong-head-scale"),
    (3, "tail-mask-off-by-one"),
    (4, "no-rescale"),
    (5, "nan-row"),
];

/// One kernel under test.
struct Subject {
    name: String,
    precision: String,
    /// `None` for a kernel that must pass; the planted bug otherwise.
    bug: Option<&'static str>,
    cubin: PathBuf,
}

fn defines_of(spec: &repro::pipeline::VariantSpec) -> Vec<String> {
    spec.defines
        .iter()
        .map(|(k, v)| {
            let v = match v {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other).unwrap().trim().to_string(),
            };
            format!("{k}={v}")
        })
        .collect()
}

/// Every shipped variant of the attention workload and every planted kernel, compiled for
/// `arch`.
fn subjects(p: &Pipeline, arch: &str, dir: &Path) -> Vec<Subject> {
    let workloads = Workloads::of(p);
    let mut jobs: Vec<(Subject, String, Vec<String>)> = Vec::new();
    for name in workloads.variants_of(p, "sdpa_fp8") {
        let spec = &p.variants[name];
        let subject = Subject {
            name: name.clone(),
            precision: workloads.class_of(p, name).unwrap(),
            bug: None,
            cubin: dir.join(format!("{name}.cubin")),
        };
        let source = p.kernels[&spec.kernel].source.clone();
        jobs.push((subject, source, defines_of(spec)));
    }
    for (pv_fp8, precision) in CLASSES.into_iter().enumerate() {
        let planted = std::iter::once((0, None)).chain(BUGS.iter().map(|&(n, b)| (n, Some(b))));
        for (n, bug) in planted {
            let name = format!("planted-{precision}-{}", bug.unwrap_or("none"));
            let subject = Subject {
                cubin: dir.join(format!("{name}.cubin")),
                name,
                precision: precision.to_string(),
                bug,
            };
            let defines = vec![format!("PLANTED_BUG={n}"), format!("PV_FP8={pv_fp8}")];
            jobs.push((subject, "tests/fixtures/cuda/planted.cu".into(), defines));
        }
    }
    std::thread::scope(|s| {
        for (subject, source, defines) in &jobs {
            s.spawn(move || {
                let d: Vec<&str> = defines.iter().map(String::as_str).collect();
                compile(source, &d, arch, &subject.cubin);
            });
        }
    });
    jobs.into_iter().map(|(s, _, _)| s).collect()
}

#[test]
fn planted_bugs_fail_the_gate_and_shipped_variants_pass_every_recipe() {
    if !gpu_tests_enabled("planted_bugs_fail_the_gate_and_shipped_variants_pass_every_recipe") {
        return;
    }
    let file = source_root().join("pipeline.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let p: Pipeline = serde_yaml::from_str(&text).unwrap();
    let w = &p.workloads["sdpa_fp8"];
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let dir = tempfile::tempdir().unwrap();
    let reference_cubin = dir.path().join("reference.cubin");
    compile("kernels/reference.cu", &[], &arch, &reference_cubin);
    let subjects = subjects(&p, &arch, dir.path());
    let mut warm = Warm::open(0).unwrap();
    let mut table = vec![
        "kernel\tprecision\tshape\tinputs\tseed\tmax_abs_err\tmean_abs_err\tpct_bad\trel_l2_err\tmax_err_over_ref_std\tnonfinite\tpass"
            .to_string(),
    ];
    // Per subject: the runs it failed, and its worst normalized error over the runs.
    let mut failed: Vec<Vec<String>> = vec![Vec::new(); subjects.len()];
    let mut worst = vec![0f64; subjects.len()];
    for shape_name in w.shapes.keys() {
        for recipe in w.recipes_of(shape_name) {
            for &seed in &w.seeds {
                for (i, subject) in subjects.iter().enumerate() {
                    let run = Run {
                        file: &file,
                        workload: "sdpa_fp8",
                        decl: w,
                        cubin: &subject.cubin,
                        entry: "sdpa_fp8_fwd",
                        defines: Default::default(),
                        reference: Reference::Kernel {
                            cubin: reference_cubin.clone(),
                            entry: "sdpa_reference_f32".into(),
                        },
                        shape: shape_name,
                        recipe,
                        seed,
                        class: Some(&subject.precision),
                    };
                    let checked = check_run(&mut warm, &run).unwrap();
                    let pass = checked.pass();
                    let a = &checked.checks[0].accuracy;
                    let run = format!("{shape_name}/{recipe}/seed{seed}");
                    if !pass {
                        failed[i].push(run);
                    }
                    worst[i] = worst[i].max(a.max_err_over_ref_std);
                    table.push(format!(
                        "{}\t{}\t{shape_name}\t{recipe}\t{seed}\t{:.6e}\t{:.6e}\t{:.4}\t{:.6e}\t{:.6e}\t{}\t{pass}",
                        subject.name,
                        subject.precision,
                        a.max_abs_err,
                        a.mean_abs_err,
                        a.pct_bad,
                        a.rel_l2_err,
                        a.max_err_over_ref_std,
                        a.nan_count + a.inf_count,
                    ));
                }
            }
        }
    }
    for line in &table {
        eprintln!("{line}");
    }
    if let Some(path) = std::env::var_os("REPRO_GATE_TABLE") {
        std::fs::write(path, table.join("\n") + "\n").unwrap();
    }
    let mut problems = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        eprintln!(
            "{}: worst max_err_over_ref_std {:.3e}; failed {} run(s){}",
            s.name,
            worst[i],
            failed[i].len(),
            failed[i]
                .first()
                .map_or(String::new(), |r| format!(", first {r}"))
        );
        match (s.bug, failed[i].is_empty()) {
            (None, false) => {
                problems.push(format!("{} must pass but failed {:?}", s.name, failed[i]))
            }
            (Some(bug), true) => {
                problems.push(format!("{} (planted {bug}) passed every run", s.name))
            }
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// `repro exec --inputs/--precision` end to end: the record names its recipe, carries the
/// normalized error, and a planted bug fails there too: exit 1, the record printed all the
/// same.
#[test]
fn repro_exec_runs_a_recipe_and_records_the_normalized_error() {
    if !gpu_tests_enabled("repro_exec_runs_a_recipe_and_records_the_normalized_error") {
        return;
    }
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.cubin");
    compile("kernels/reference.cu", &[], &arch, &reference);
    let pipeline = dir.path().join("pipeline.yaml");
    std::fs::copy(source_root().join("pipeline.yaml"), &pipeline).unwrap();
    let run = |bug: u32| -> (Option<i32>, repro::schema::BenchResult) {
        let cubin = dir.path().join(format!("planted{bug}.cubin"));
        let define = format!("PLANTED_BUG={bug}");
        compile("tests/fixtures/cuda/planted.cu", &[&define], &arch, &cubin);
        let out = std::process::Command::new(repro_bin())
            .args(["-f"])
            .arg(&pipeline)
            .args(["exec", "--cubin"])
            .arg(&cubin)
            .args([
                "--entry",
                "sdpa_fp8_fwd",
                "--workload",
                "sdpa_fp8",
                "--dims",
                "B=1,H=4,S=300,D=64",
                "--seed",
                "1",
            ])
            .args(["--inputs", "sharp", "--precision", "fp16-pv", "--no-timing"])
            .arg("--reference")
            .arg(&reference)
            .output()
            .expect("repro exec starts");
        let record = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
        });
        (out.status.code(), record)
    };
    let (code, good) = run(0);
    assert_eq!(code, Some(0), "{good:?}");
    assert_eq!(good.inputs, "sharp");
    assert_eq!(good.correctness_pass, Some(true), "{good:?}");
    assert!(good.max_err_over_ref_std.unwrap() < 0.02);
    let (code, bad) = run(3);
    assert_eq!(code, Some(1), "a failed check exits 1: {bad:?}");
    assert_eq!(bad.correctness_pass, Some(false), "{bad:?}");
    assert!(bad.max_err_over_ref_std.unwrap() > 0.02, "{bad:?}");
}

/// RMSNorm: every shipped variant passes every declared (shape, recipe, seed), and a bug
/// planted in `rmsnorm.cu`'s scalar path (taken by rows whose length is not a multiple of
/// `VEC`): the row's last element left out of its sum of squares — fails the gate for every
/// variant that can take that path (`VEC` > 1). The declared shapes must reach it.
#[test]
fn a_bug_in_the_rmsnorm_scalar_path_fails_the_gate() {
    if !gpu_tests_enabled("a_bug_in_the_rmsnorm_scalar_path_fails_the_gate") {
        return;
    }
    let file = source_root().join("pipeline.yaml");
    let p: Pipeline = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let w = &p.workloads["rmsnorm"];
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.cubin");
    compile("kernels/rmsnorm/reference.cu", &[], &arch, &reference);
    let source = std::fs::read_to_string(source_root().join("kernels/rmsnorm/rmsnorm.cu")).unwrap();
    let scalar_sum = "for (int i = lane_in_row; i < hidden; i += THREADS_PER_ROW) {\n            const float f = __half2float(xr[i]);\n            sum += f * f;";
    assert!(
        source.contains(scalar_sum),
        "the scalar path's sum moved: update the test"
    );
    let buggy = dir.path().join("rmsnorm_scalar_bug.cu");
    std::fs::write(
        &buggy,
        source.replacen(
            scalar_sum,
            &scalar_sum.replace("i < hidden;", "i < hidden - 1;"),
            1,
        ),
    )
    .unwrap();
    let mut warm = Warm::open(0).unwrap();
    let mut problems = Vec::new();
    for name in Workloads::of(&p).variants_of(&p, "rmsnorm") {
        let spec = &p.variants[name];
        let defines = defines_of(spec);
        let d: Vec<&str> = defines.iter().map(String::as_str).collect();
        let bindings: repro::workload::exprs::Bindings = defines
            .iter()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect();
        let vec: i64 = defines
            .iter()
            .find_map(|kv| kv.strip_prefix("VEC=")?.parse().ok())
            .unwrap_or(8);
        let shipped = dir.path().join(format!("{name}.cubin"));
        let planted = dir.path().join(format!("{name}-scalar-bug.cubin"));
        compile("kernels/rmsnorm/rmsnorm.cu", &d, &arch, &shipped);
        compile(&buggy.to_string_lossy(), &d, &arch, &planted);
        let mut failed = [Vec::new(), Vec::new()];
        for shape in w.shapes.keys() {
            for recipe in w.recipes_of(shape) {
                for &seed in &w.seeds {
                    for (side, cubin) in [&shipped, &planted].into_iter().enumerate() {
                        let run = Run {
                            file: &file,
                            workload: "rmsnorm",
                            decl: w,
                            cubin,
                            entry: "rmsnorm_fwd",
                            defines: bindings.clone(),
                            reference: Reference::Kernel {
                                cubin: reference.clone(),
                                entry: "rmsnorm_reference".into(),
                            },
                            shape,
                            recipe,
                            seed,
                            class: None,
                        };
                        if !check_run(&mut warm, &run).unwrap().pass() {
                            failed[side].push(format!("{shape}/{recipe}/seed{seed}"));
                        }
                    }
                }
            }
        }
        eprintln!(
            "{name} (VEC {vec}): shipped failed {:?}; planted scalar-path bug failed {} run(s)",
            failed[0],
            failed[1].len()
        );
        if !failed[0].is_empty() {
            problems.push(format!("{name} must pass but failed {:?}", failed[0]));
        }
        if vec > 1 && failed[1].is_empty() {
            problems.push(format!(
                "{name}: the scalar-path bug passed every run (no declared shape reaches the path)"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
