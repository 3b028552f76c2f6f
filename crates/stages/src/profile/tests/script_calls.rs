//! The ncu command line, and baseline calls: their processes, NVTX ranges and kernels.

use super::*;
use crate::profile::ncu_call::Page;

#[test]
fn kernel_targets_run_on_a_worker_under_ncu_with_profiling_off_until_their_window() {
    let opts =
        options("{uses: profile, warmup: 3, iters: 2, launches: 7, clock_control: none}").unwrap();
    let metrics = vec![
        "gpu__time_duration.sum".to_string(),
        "launch__registers_per_thread".to_string(),
    ];
    let call = NcuCall {
        ncu: Path::new("/usr/local/cuda/bin/ncu"),
        repro_exe: Path::new("/bin/repro"),
        pipeline_file: Path::new("/p/pipeline.yaml"),
        metrics: &metrics,
        opts: &opts,
        no_sections: Some(Path::new("/p/.repro/ncu/no-sections")),
        check: true,
    };
    // The metrics by name, and no section: ncu reads none of its stock ones.
    assert_eq!(
        call.wrapper(&Page::Csv(Path::new("/p/.repro/ncu/kernels.csv"))).join(" "),
        "/usr/local/cuda/bin/ncu --csv --page raw --section-folder /p/.repro/ncu/no-sections \
         --metrics gpu__time_duration.sum,launch__registers_per_thread \
         --log-file /p/.repro/ncu/kernels.csv --profile-from-start off --target-processes application-only \
         --clock-control none --cache-control all"
    );
    let report = call
        .wrapper(&Page::Report(Path::new("/p/.repro/ncu/kernels")))
        .join(" ");
    assert!(
        report.contains("--set full -f -o /p/.repro/ncu/kernels --profile-from-start off"),
        "{report}"
    );
    assert!(
        !report.contains("--section-folder"),
        "the full set's sections are ncu's own: {report}"
    );
    let variant = Target {
        label: "control".into(),
        variant: "base".into(),
        entry: "k_fwd".into(),
        program: Program::Variant("base".into()),
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    // The check's launch and 3 warm-up launches come before the window, as `launch_skip`
    // (default warmup + 1) says; then 7 launches are profiled; nothing is timed.
    assert_eq!(
        call.request(&variant).argv().join(" "),
        "--variant base --workload tiny --shape mission --seed 0 --warmup 3 --iters 2 --l2 warm \
         --method graph --no-timing --profile-launches 7"
    );
    // A pass after the time pass: no check, so one more warm-up launch before the window.
    let unchecked = NcuCall {
        check: false,
        ..call
    };
    assert_eq!(
        unchecked.request(&variant).argv().join(" "),
        "--variant base --workload tiny --shape mission --seed 0 --warmup 4 --iters 2 --l2 warm \
         --method graph --no-timing --profile-launches 7 --unchecked"
    );
    let elite = Target {
        label: "top1".into(),
        variant: "tune-top1".into(),
        entry: "k_fwd".into(),
        program: Program::Cubin {
            path: "/p/.repro/cubins/tune-top1.cubin".into(),
            defines: [("X".to_string(), 2)].into(),
            rank: 1,
        },
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    let argv = call.request(&elite).argv().join(" ");
    assert!(
        argv.starts_with("--cubin /p/.repro/cubins/tune-top1.cubin --entry k_fwd --define X=2 --workload tiny --shape mission"),
        "{argv}"
    );
}

#[test]
fn baselines_that_share_a_command_share_one_process() {
    let p = pipeline(
        "{uses: profile, targets: [control], baselines: {\
         a: {run: [python3, b.py], workload: tiny, shapes: [mission, small]}, \
         b: {run: [python3, b.py], workload: tiny, shapes: [mission]}, \
         c: {run: [python3, c.py], workload: tiny, shapes: [mission]}}}",
    );
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (run, _) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    let units: Vec<Vec<&str>> = calls::units(&run)
        .iter()
        .map(|u| u.iter().map(|t| t.label.as_str()).collect())
        .collect();
    assert_eq!(
        units,
        [
            vec!["control"],
            vec!["a@mission", "a@small", "b@mission"],
            vec!["c@mission"]
        ]
    );
}

#[test]
fn a_baseline_process_profiles_each_call_in_its_own_nvtx_range_after_the_kernels_warm_up() {
    let mut opts = options(&with_baseline("[mission]")).unwrap();
    (opts.warmup, opts.launches) = (3, 2);
    let metrics = vec!["gpu__time_duration.sum".to_string()];
    let call = NcuCall {
        ncu: Path::new("ncu"),
        repro_exe: Path::new("/bin/repro"),
        pipeline_file: Path::new("/p/pipeline.yaml"),
        metrics: &metrics,
        opts: &opts,
        no_sections: None,
        check: true,
    };
    let (best, default) = (
        script_call("t-best", "mission"),
        script_call("t-def", "long"),
    );
    assert_eq!(
        call.script_argv(&[&best, &default], &["--csv".into()]).join(" "),
        "ncu --csv --metrics gpu__time_duration.sum --nvtx \
         --nvtx-include repro-profile.t-best.mission/ --nvtx-include repro-profile.t-def.long/ \
         --target-processes application-only --clock-control base --cache-control all python3 b.py \
         --warmup 3 --profile t-best mission repro-profile.t-best.mission \
         --profile t-best mission repro-profile.t-best.mission \
         --profile t-def long repro-profile.t-def.long --profile t-def long repro-profile.t-def.long"
    );
}
#[test]
fn each_call_gets_the_kernels_its_nvtx_range_names_and_its_own_csv() {
    let text = fixture("baseline_calls.csv");
    let export = repro_ncu::parse::parse(&text).unwrap();
    let calls = sdpa_calls();
    // Listed out of the process's order: the NVTX column, not the order, decides.
    let unit: Vec<&Target> = [3, 0, 2, 1].map(|i| &calls[i]).into();
    let records = calls::read_calls(&unit, &text, &text, &reading(1));
    for ((record, csv), target) in records.iter().zip(&unit) {
        assert_eq!(
            (record.status.as_str(), record.target.as_str()),
            ("ok", target.label.as_str())
        );
        let i = calls.iter().position(|c| c == *target).unwrap();
        let launch = &export.launches[i];
        let (time, _) =
            repro_ncu::metrics::read(launch, repro_ncu::metrics::Field::KernelTimeUs, None)
                .unwrap();
        assert_eq!(record.kernel_time_us, Some(time), "{}", target.label);
        assert_eq!(record.kernels.len(), 1);
        // Its CSV parses alone, with ncu's lines and only its launch.
        let alone = repro_ncu::parse::parse(csv).unwrap();
        assert_eq!(alone.launches, std::slice::from_ref(launch));
        assert!(csv.starts_with("==WARNING=="), "{csv}");
    }
}

#[test]
fn a_call_the_nvtx_column_does_not_name_fails_and_says_what_it_read() {
    let text = fixture("baseline_calls.csv");
    let calls = sdpa_calls();
    let other = script_call("torch-sdpa-best", "small");
    let records = calls::read_calls(&[&calls[0], &other], &text, &text, &reading(1));
    assert_eq!(records[0].0.status, RunStatus::Ok);
    let (record, csv) = &records[1];
    assert_eq!(record.status, RunStatus::Failed);
    let reason = record.reason.as_deref().unwrap();
    assert!(
        reason.contains(
            "no kernel inside the call's NVTX range `repro-profile.torch-sdpa-best.small`"
        ) && reason.contains(":repro-profile.torch-sdpa-best.mission:"),
        "{reason}"
    );
    assert_eq!(csv, &text, "a failed call keeps ncu's whole output");
    // Without the NVTX column (ncu run without --nvtx) nothing is attributed by guesswork.
    let text = fixture("two_kernels.csv");
    let records = calls::read_calls(&[&calls[0], &calls[1]], &text, &text, &reading(1));
    for (record, _) in &records {
        assert!(
            record
                .reason
                .as_deref()
                .unwrap()
                .contains("no NVTX push/pop column"),
            "{record:?}"
        );
    }
}

#[test]
fn a_call_alone_in_its_process_sums_every_kernel_and_reads_the_longest() {
    let text = fixture("two_kernels.csv");
    let export = repro_ncu::parse::parse(&text).unwrap();
    let target = script_call("torch", "mission");
    let records = calls::read_calls(&[&target], &text, &text, &reading(1));
    let (record, csv) = &records[0];
    assert_eq!(record.status, RunStatus::Ok);
    assert_eq!(csv, &text);
    let names: Vec<&str> = record.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["wmma_gemm", "scale_add", "scale_add"]);
    let times: Vec<f64> = record.kernels.iter().map(|k| k.time_us.unwrap()).collect();
    let sum: f64 = times.iter().sum();
    assert!((record.kernel_time_us.unwrap() - sum).abs() < 1e-9);
    // The other fields are the longest kernel's.
    let longest = (0..times.len())
        .max_by(|&a, &b| times[a].total_cmp(&times[b]))
        .unwrap();
    assert_eq!(record.kernel, names[longest]);
    let alone = repro_ncu::metrics::summarize(
        &export.launches[longest],
        None,
        &[],
        repro_ncu::metrics::TargetId {
            target: "x",
            variant: "x",
            kernel: "x",
        },
    );
    assert_eq!(record.achieved_occupancy_pct, alone.achieved_occupancy_pct);
    assert_eq!(record.tensor_core_util_pct, alone.tensor_core_util_pct);
}

#[test]
fn a_script_that_cannot_run_its_calls_says_why() {
    let calls = sdpa_calls();
    let unit: Vec<&Target> = calls.iter().collect();
    let out = "==PROF== Connected\nrepro-profile: skipped: PyTorch sees no CUDA GPU\n==WARNING== No kernels were profiled.\n";
    let records = calls::read_calls(&unit, out, out, &reading(1));
    for (record, _) in &records {
        assert_eq!(
            (&record.status, record.reason.as_deref()),
            (&RunStatus::Skipped, Some("PyTorch sees no CUDA GPU"))
        );
    }
    // One call it cannot run (no kernel of the backend for the shape): the others still count.
    let text = fixture("baseline_calls.csv").replacen(
        "==PROF== Disconnected",
        "repro-profile: call repro-profile.torch-sdpa-best.long skipped: torch-sdpa-best: no kernel\n==PROF== Disconnected",
        1,
    );
    let records = calls::read_calls(&unit, &text, &text, &reading(1));
    let statuses: Vec<&RunStatus> = records.iter().map(|(r, _)| &r.status).collect();
    let (ok, skipped) = (&RunStatus::Ok, &RunStatus::Skipped);
    assert_eq!(statuses, [ok, ok, skipped, ok]);
    assert_eq!(
        records[2].0.reason.as_deref(),
        Some("torch-sdpa-best: no kernel")
    );
    assert_eq!(calls::script_skipped("==PROF== Connected\n"), None);
}

#[test]
fn a_baseline_scripts_files_are_those_its_command_names_and_their_modules() {
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "scripts/entry.py",
        "scripts/module.py",
        "scripts/notes.txt",
        "other/unrelated.py",
    ] {
        let path = dir.path().join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    std::fs::create_dir_all(dir.path().join("scripts/sub")).unwrap();
    let run = ["python3", "scripts/entry.py", "--out", "x"].map(String::from);
    let files = crate::profile::reuse::script_files(dir.path(), &run);
    assert_eq!(
        files,
        [
            Path::new("scripts/entry.py"),
            Path::new("scripts/module.py")
        ],
        "an edit to a module the entry imports must profile the baselines again"
    );
}

#[test]
fn a_call_that_repeats_another_gets_that_calls_profile_under_its_own_name() {
    let calls = sdpa_calls();
    let unit: Vec<&Target> = calls.iter().collect();
    // default@mission repeats best@mission; default@long repeats best@long, which the script
    // could not run.
    let text = fixture("baseline_calls.csv").replacen(
        "==PROF== Disconnected",
        "repro-profile: call repro-profile.torch-sdpa-default.mission same as torch-sdpa-best: \
         PyTorch's own choice is cudnn\n\
         repro-profile: call repro-profile.torch-sdpa-best.long skipped: no kernel\n\
         repro-profile: call repro-profile.torch-sdpa-default.long same as torch-sdpa-best: \
         PyTorch's own choice is cudnn\n==PROF== Disconnected",
        1,
    );
    let records = calls::read_calls(&unit, &text, &text, &reading(1));
    let (best, best_csv) = &records[0];
    let (repeat, repeat_csv) = &records[1];
    assert_eq!(
        (repeat.target.as_str(), repeat.variant.as_str()),
        ("torch-sdpa-default@mission", "torch-sdpa-default")
    );
    assert_eq!(repeat.status, RunStatus::Ok);
    assert_eq!(repeat.kernel_time_us, best.kernel_time_us);
    assert_eq!(repeat.kernel, best.kernel);
    assert_eq!(repeat_csv, best_csv);
    assert_eq!(
        repeat.reason.as_deref(),
        Some(
            "profiled once as torch-sdpa-best@mission, the same kernel on the same inputs: \
             PyTorch's own choice is cudnn"
        )
    );
    let (orphan, _) = &records[3];
    assert_eq!(orphan.status, RunStatus::Failed);
    assert!(
        orphan.reason.as_deref().unwrap().starts_with(
            "the script ran it as torch-sdpa-best's call on long, which has no profile here"
        ),
        "{orphan:?}"
    );
}

#[test]
fn the_section_folder_is_made_empty_under_the_project() {
    let dir = tempfile::tempdir().unwrap();
    let made = crate::profile::ncu_call::empty_section_folder(dir.path()).unwrap();
    assert_eq!(made, dir.path().join(".repro/ncu/no-sections"));
    // A file left there would be read as a section: the next run starts from nothing.
    std::fs::write(made.join("Stray.section"), "Identifier: \"x\"").unwrap();
    let again = crate::profile::ncu_call::empty_section_folder(dir.path()).unwrap();
    assert_eq!(std::fs::read_dir(&again).unwrap().count(), 0);
}
