//! The workload layer on a GPU (REPRO_GPU_TESTS=1; otherwise each test prints a "skipped:"
//! line): a device's launch limits, read from the driver, and the RMSNorm workload through the
//! generic launcher, its gates catching planted bugs.

mod common;

use repro::workload::exprs::Bindings;
use repro::workload::limits::Limits;

#[test]
fn a_gpu_reports_cudas_launch_limits_and_its_shared_memory() {
    if !common::gpu_tests_enabled("a_gpu_reports_cudas_launch_limits_and_its_shared_memory") {
        return;
    }
    let limits = repro::gpu::limits::of_device(0).expect("GPU 0 answers");
    let arch = Limits::ARCHITECTURAL;
    assert_eq!(
        (
            limits.max_grid,
            limits.max_block,
            limits.max_threads_per_block
        ),
        (arch.max_grid, arch.max_block, arch.max_threads_per_block)
    );
    // 48 KiB without the opt-in on every GPU; 99 KiB (sm_89) to 227 KiB (sm_90) with it.
    assert!(limits
        .max_dynamic_smem
        .is_some_and(|s| (99 * 1024..=228 * 1024).contains(&s)));
}

/// The RMSNorm workload of the shipped pipeline through repro's generic launcher, against
/// its reference kernel: every shipped variant passes every (shape, recipe, seed) the
/// pipeline checks; each planted bug of `tests/fixtures/cuda/rmsnorm_planted.cu` fails at
/// least one, a kernel that never writes its output is named at its argument in
/// pipeline.yaml, and the reference command (`kernels/rmsnorm/reference.py`) judges as the
/// reference kernel does. Every measurement is printed.
#[test]
fn rmsnorm_variants_pass_every_recipe_and_its_gates_catch_planted_bugs() {
    use repro::gpu::exec::{check_run, Run};
    use repro::gpu::warm::{Reference, Warm};
    if !common::gpu_tests_enabled(
        "rmsnorm_variants_pass_every_recipe_and_its_gates_catch_planted_bugs",
    ) {
        return;
    }
    let root = common::source_root();
    let file = root.join("pipeline.yaml");
    let p: repro::pipeline::Pipeline =
        serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let decl = &p.workloads["rmsnorm"];
    let arch = repro::gpu::probe().expect("a GPU")[0].arch();
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("reference.cubin");
    common::compile("kernels/rmsnorm/reference.cu", &[], &arch, &reference);
    // (name, cubin, its integer defines, the planted bug it must be caught by)
    let mut subjects: Vec<(String, std::path::PathBuf, Bindings, Option<&str>)> = Vec::new();
    for name in ["rms-scalar", "rms-warp-row", "rms-block-row"] {
        let defines: Vec<(String, i64)> = p.variants[name]
            .defines
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    repro::pipeline::define_value(v).unwrap().parse().unwrap(),
                )
            })
            .collect();
        let flags: Vec<String> = defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let cubin = dir.path().join(format!("{name}.cubin"));
        common::compile("kernels/rmsnorm/rmsnorm.cu", &flags, &arch, &cubin);
        subjects.push((name.to_string(), cubin, defines.into_iter().collect(), None));
    }
    let bugs = [
        (0, None),
        (1, Some("skip-last-row")),
        (2, Some("eps-outside-sqrt")),
        (3, Some("fp16-sum")),
        (4, Some("no-weight")),
        (5, Some("never-writes")),
        (6, Some("variance")),
    ];
    for (n, bug) in bugs {
        let name = format!("planted-{}", bug.unwrap_or("none"));
        let cubin = dir.path().join(format!("{name}.cubin"));
        let define = format!("PLANTED_BUG={n}");
        common::compile(
            "tests/fixtures/cuda/rmsnorm_planted.cu",
            &[&define],
            &arch,
            &cubin,
        );
        subjects.push((name, cubin, Default::default(), bug));
    }
    let mut warm = Warm::open(0).unwrap();
    let kernel_reference = Reference::Kernel {
        cubin: reference.clone(),
        entry: "rmsnorm_reference".into(),
    };
    // One checked run of `cubin` on (shape, recipe, seed) against `reference`.
    let mut check = |cubin: &std::path::Path,
                     defines: &Bindings,
                     reference: &Reference,
                     (shape, recipe, seed): (&str, &str, u64)| {
        let run = Run {
            file: &file,
            workload: "rmsnorm",
            decl,
            cubin,
            entry: "rmsnorm_fwd",
            defines: defines.clone(),
            reference: reference.clone(),
            shape,
            recipe,
            seed,
            class: None,
        };
        check_run(&mut warm, &run).unwrap()
    };
    let mut problems = Vec::new();
    let mut never_written = Vec::new();
    for (name, cubin, defines, bug) in &subjects {
        let mut failed = Vec::new();
        for shape in decl.shapes.keys() {
            for recipe in decl.recipes_of(shape) {
                for &seed in &decl.seeds {
                    let checked = check(cubin, defines, &kernel_reference, (shape, recipe, seed));
                    let a = &checked.checks[0].accuracy;
                    eprintln!(
                        "{name}\t{shape}\t{recipe}\t{seed}\tmax_abs_err {:.3e}\trel_l2_err {:.3e}\tmax_err_over_ref_std {:.3e}\tnonfinite {}\t{}",
                        a.max_abs_err,
                        a.rel_l2_err,
                        a.max_err_over_ref_std,
                        a.nan_count + a.inf_count,
                        if checked.pass() { "pass" } else { "FAIL" }
                    );
                    if !checked.pass() {
                        failed.push(format!("{shape}/{recipe}/seed{seed}"));
                    }
                    never_written.extend(
                        checked
                            .never_written
                            .iter()
                            .map(|w| (name.clone(), w.clone())),
                    );
                }
            }
        }
        match (bug, failed.is_empty()) {
            (None, false) => problems.push(format!("{name} must pass but failed {failed:?}")),
            (Some(b), true) => problems.push(format!("{name} (planted {b}) passed every run")),
            _ => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // Only the kernel that never stores is said to never write, at `y` in pipeline.yaml.
    let text = std::fs::read_to_string(&file).unwrap();
    let line = text.lines().position(|l| l.contains("{name: y,")).unwrap() + 1;
    assert!(!never_written.is_empty());
    for (name, message) in &never_written {
        assert_eq!(name, "planted-never-writes", "{message}");
        assert!(
            message.starts_with(&format!("{}:{line}:", file.display()))
                && message.contains("error: output `y` is never written by cubin"),
            "{message}"
        );
    }

    // The reference command judges like the kernel (on the small shapes: it is stdlib Python).
    let command = Reference::Command {
        root: root.clone(),
        run: vec!["python3".into(), "kernels/rmsnorm/reference.py".into()],
    };
    for (name, cubin, defines, bug) in &subjects {
        for recipe in decl.recipes_of("ragged") {
            let case = ("ragged", recipe, 0);
            let by_kernel = check(cubin, defines, &kernel_reference, case);
            let by_command = check(cubin, defines, &command, case);
            assert_eq!(
                by_kernel.pass(),
                by_command.pass(),
                "{name} ragged/{recipe} ({bug:?})"
            );
            let (k, c) = (
                &by_kernel.checks[0].accuracy,
                &by_command.checks[0].accuracy,
            );
            assert!(
                (k.max_abs_err - c.max_abs_err).abs() <= 1e-6,
                "{name} ragged/{recipe}: {k:?} vs {c:?}"
            );
        }
    }
}
