//! The profile stage without a GPU: options, targets, the ncu command line, failures.

use super::ncu_call::regex_escape;
use super::run::{failure_context, Reading};
use super::*;
use repro_pipeline::{Pipeline, StageSpec};
use repro_schema::NcuTarget;
use repro_tune::options::TuneOptions;
use std::path::Path;
use std::time::Duration;

fn pipeline(stage: &str) -> Pipeline {
    repro_pipeline::workload::testing::tiny_pipeline(
        &format!(
            "kernels:\n  k: {{source: kernels/k.cu, entry: k_fwd}}\nvariants:\n  base: {{kernel: k}}\n  ws: {{kernel: k}}\ncontrol: base\nstages:\n  tune: {{uses: tune, base: base, space: {{X: [1, 2]}}}}\n  prof: {stage}\n"
        ),
        &["k"],
    )
}

fn options(stage: &str) -> Result<ProfileOptions, OptionError> {
    let p = pipeline(stage);
    ProfileOptions::from_spec(&p.stages["prof"], &p)
}

/// [`resolve_targets`] with the tune stages `spec` needs, decoded as their kind does.
fn resolve(
    opts: &ProfileOptions,
    spec: &StageSpec,
    p: &Pipeline,
    root: &Path,
) -> (Vec<Target>, Vec<NcuTarget>) {
    let tunes: Vec<TuneOptions> = spec
        .needs
        .iter()
        .filter_map(|n| TuneOptions::parse(p.stages.get(n)?, p).ok())
        .collect();
    resolve_targets(opts, &tunes.iter().collect::<Vec<_>>(), p, root)
}

#[test]
fn defaults_follow_ncu_and_warmup() {
    let o = options("{uses: profile}").unwrap();
    assert_eq!(o.targets, ["control", "topk"]);
    assert_eq!(o.clock_control, "base");
    assert_eq!(o.cache_control, "all");
    // The checked launch and the warm-up are skipped; the baselines' trial call stands for
    // the checked launch, so both sides have as many launches before the profiled ones.
    assert_eq!(o.launch_skip(), o.warmup + 1);
    assert_eq!(o.baseline_warmup(), o.warmup);
    assert_eq!(o.launches, 5);
    assert_eq!(o.timeout, Duration::from_secs(600));
    let o = options("{uses: profile, warmup: 9, targets: [ws], clock_control: none}").unwrap();
    assert_eq!((o.launch_skip(), o.clock_control.as_str()), (10, "none"));
    let o = options("{uses: profile, launch_skip: 4}").unwrap();
    assert_eq!((o.launch_skip(), o.baseline_warmup()), (4, 3));
}

#[test]
fn bad_options_name_their_key() {
    let e = options("{uses: profile, tragets: [control]}").unwrap_err();
    assert_eq!(e.path, ["tragets"]);
    assert!(
        e.message.ends_with("did you mean `targets`?"),
        "{}",
        e.message
    );
    let e = options("{uses: profile, targets: [control, nope]}").unwrap_err();
    assert_eq!(e.path, ["targets", "1"]);
    assert!(e.message.contains("base, ws"), "{}", e.message);
    let e = options("{uses: profile, clock_control: fast}").unwrap_err();
    assert_eq!(e.path, ["clock_control"]);
    let e = options("{uses: profile, cache_control: warm}").unwrap_err();
    assert_eq!(e.path, ["cache_control"]);
    assert!(e.message.contains("`all`"), "{}", e.message);
    let e = options("{uses: profile, keep_report: maybe}").unwrap_err();
    assert_eq!(e.path, ["keep_report"]);
    let e = options("{uses: profile, targets: []}").unwrap_err();
    assert_eq!(e.path, ["targets"]);
    let e = options("{uses: profile, timeout: soon}").unwrap_err();
    assert_eq!(e.path, ["timeout"]);
    let e = options("{uses: profile, launches: 0}").unwrap_err();
    assert_eq!(
        (e.path[0].as_str(), e.message.as_str()),
        ("launches", "must be at least 1")
    );
}

#[test]
fn failure_context_keeps_messages_and_program_lines_not_csv() {
    let stdout = "app: start\n==ERROR== LaunchFailed\n\"ID\",\"Kernel Name\"\n\"0\",\"k\"\n";
    let tail = "==ERROR== LaunchFailed\nerror: CUDA_ERROR_ILLEGAL_ADDRESS in k_fwd\n";
    assert_eq!(
        failure_context(stdout, tail),
        "app: start\n==ERROR== LaunchFailed\nerror: CUDA_ERROR_ILLEGAL_ADDRESS in k_fwd"
    );
}

#[test]
fn timeouts_read_the_pipelines_durations() {
    let o = options("{uses: profile, timeout: 1.5m}").unwrap();
    assert_eq!(o.timeout, Duration::from_secs(90));
    let o = options("{uses: profile, timeout: 500ms}").unwrap();
    assert_eq!(o.timeout, Duration::from_millis(500));
}

#[test]
fn ncu_command_line() {
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
    };
    let variant = Target {
        label: "control".into(),
        variant: "base".into(),
        entry: "k_fwd".into(),
        program: Program::Variant("base".into()),
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    let page = vec!["--csv".to_string(), "--page".into(), "raw".into()];
    assert_eq!(
        call.argv(&[&variant], &page).join(" "),
        "/usr/local/cuda/bin/ncu --csv --page raw --metrics gpu__time_duration.sum,launch__registers_per_thread \
         -k regex:^k_fwd$ --launch-skip 4 --launch-count 7 --clock-control none --cache-control all \
         /bin/repro -f /p/pipeline.yaml exec --variant base --workload tiny --shape mission --seed 0 --warmup 3 --iters 2 --l2 warm --method graph"
    );
    let elite = Target {
        label: "top1".into(),
        variant: "tune-top1".into(),
        entry: "k_fwd".into(),
        program: Program::Cubin {
            path: "/p/.repro/cubins/tune-top1.cubin".into(),
            defines: [("X".to_string(), 2)].into(),
        },
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    let argv = call.argv(&[&elite], &page).join(" ");
    assert!(
        argv.contains("exec --cubin /p/.repro/cubins/tune-top1.cubin --entry k_fwd --define X=2 --workload tiny --shape mission"),
        "{argv}"
    );
    assert_eq!(regex_escape("a.b$"), "a\\.b\\$");
}

#[test]
fn topk_without_tune_results_is_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline("{uses: profile, needs: [tune], targets: [control, topk]}");
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    let spec = &p.stages["prof"];
    let (run, skipped) = resolve(&opts, spec, &p, dir.path());
    assert_eq!(run.len(), 1);
    assert_eq!(run[0].variant, "base");
    assert_eq!(run[0].entry, "k_fwd");
    assert_eq!(
        (run[0].workload.as_str(), run[0].shape.as_str()),
        ("tiny", "mission")
    );
    assert_eq!(skipped[0].status, RunStatus::Skipped);
    assert!(skipped[0]
        .reason
        .as_ref()
        .unwrap()
        .contains("run the tune stage"));

    std::fs::create_dir_all(dir.path().join("artifacts/tune")).unwrap();
    std::fs::create_dir_all(dir.path().join(".repro/cubins")).unwrap();
    std::fs::write(
        dir.path().join("artifacts/tune/topk.json"),
        r#"[{"rank": 1, "config": {"X": 2}}, {"rank": 2}]"#,
    )
    .unwrap();
    std::fs::write(dir.path().join(".repro/cubins/tune-top1.cubin"), "").unwrap();
    let (run, skipped) = resolve(&opts, spec, &p, dir.path());
    assert_eq!(
        run.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(),
        ["control", "top1"]
    );
    assert_eq!(skipped[0].target, "top2");
    assert!(skipped[0]
        .reason
        .as_ref()
        .unwrap()
        .contains("tune-top2.cubin is missing"));
    // The elite's launch reads the defines it was tuned with.
    assert_eq!(
        run[1].program,
        Program::Cubin {
            path: dir.path().join(".repro/cubins/tune-top1.cubin"),
            defines: [("X".to_string(), 2)].into(),
        }
    );
    // A profile stage that needs no tune stage has no elite to profile.
    let p = pipeline("{uses: profile, targets: [topk]}");
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    assert!(run.is_empty());
    assert!(skipped[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("needs no tune stage"));
}

/// A profile stage whose one baseline, `torch`, runs on `shapes` (a YAML list).
fn with_baseline(shapes: &str) -> String {
    format!(
        "{{uses: profile, targets: [control], baselines: {{torch: {{run: [python3, b.py, --profile], workload: tiny, shapes: {shapes}}}}}}}"
    )
}

#[test]
fn bad_baselines_name_their_key() {
    let e = options(&with_baseline("[mission, long]")).unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "shapes", "1"]);
    assert!(
        e.message
            .contains("unknown shape `long` of workload `tiny`")
            && e.message.contains("small, mission"),
        "{}",
        e.message
    );
    let e = options(&with_baseline("[]")).unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "shapes"]);
    let e = options(
        "{uses: profile, baselines: {torch: {run: [], workload: tiny, shapes: [mission]}}}",
    )
    .unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "run"]);
    let e = options(
        "{uses: profile, baselines: {torch: {run: [x], workload: nope, shapes: [mission]}}}",
    )
    .unwrap_err();
    assert_eq!(e.path, ["baselines", "torch", "workload"]);
    assert!(e.message.contains("expected one of: tiny"), "{}", e.message);
    let e =
        options("{uses: profile, baselines: {a@b: {run: [x], workload: tiny, shapes: [mission]}}}")
            .unwrap_err();
    assert_eq!(e.path, ["baselines", "a@b"]);
    let e = options("{uses: profile, baselines: {torch: {run: [x], workload: tiny, shapes: [mission], shape: x}}}")
        .unwrap_err();
    assert_eq!(e.path, ["baselines"]);
    assert!(e.message.contains("unknown field `shape`"), "{}", e.message);
}

#[test]
fn baselines_and_the_best_variant_off_the_primary_become_targets() {
    let dir = tempfile::tempdir().unwrap();
    let p = pipeline(&with_baseline("[mission, small]"));
    let opts = ProfileOptions::from_spec(&p.stages["prof"], &p).unwrap();
    // No bench records yet: the best variant's side is skipped with the fix.
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    let labels: Vec<&str> = run.iter().map(|t| t.label.as_str()).collect();
    assert_eq!(labels, ["control", "torch@mission", "torch@small"]);
    assert_eq!(
        run[2].program,
        Program::Script(vec!["python3".into(), "b.py".into(), "--profile".into()])
    );
    assert_eq!(
        (run[2].variant.as_str(), run[2].shape.as_str()),
        ("torch", "small")
    );
    assert_eq!(skipped[0].target, "best@small");
    assert_eq!(skipped[0].shape.as_deref(), Some("small"));
    assert!(skipped[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("run the bench stage"));

    // `ws` is the faster correct variant on the primary: it is profiled on `small` too.
    let bench = dir.path().join("artifacts/bench");
    std::fs::create_dir_all(&bench).unwrap();
    for (name, p50) in [("base", 20.0), ("ws", 10.0)] {
        let mut r = repro_schema::BenchResult::blank(
            "mission",
            Default::default(),
            0,
            (1, 1),
            RunStatus::Ok,
        );
        r.p50_us = Some(p50);
        r.correctness_pass = Some(true);
        let file = serde_json::json!({
            "name": name, "kind": "variant", "status": "ok", "defines": {},
            "results": [r], "gates": []
        });
        std::fs::write(bench.join(format!("{name}.json")), file.to_string()).unwrap();
    }
    let (run, skipped) = resolve(&opts, &p.stages["prof"], &p, dir.path());
    assert!(skipped.is_empty());
    let best = run.last().unwrap();
    assert_eq!(best.label, "ws@small");
    assert_eq!(best.program, Program::Variant("ws".into()));
    assert_eq!(
        (best.entry.as_str(), best.shape.as_str()),
        ("k_fwd", "small")
    );
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
    };
    let (best, default) = (
        script_call("t-best", "mission"),
        script_call("t-def", "long"),
    );
    assert_eq!(
        call.argv(&[&best, &default], &["--csv".into()]).join(" "),
        "ncu --csv --metrics gpu__time_duration.sum --nvtx \
         --nvtx-include repro-profile.t-best.mission/ --nvtx-include repro-profile.t-def.long/ \
         --target-processes application-only --clock-control base --cache-control all python3 b.py \
         --warmup 3 --profile t-best mission repro-profile.t-best.mission \
         --profile t-best mission repro-profile.t-best.mission \
         --profile t-def long repro-profile.t-def.long --profile t-def long repro-profile.t-def.long"
    );
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
            (&record.status, record.target.as_str()),
            (&RunStatus::Ok, target.label.as_str())
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

/// Reading a process that profiled `launches` launches (calls) per target.
fn reading(launches: u32) -> Reading<'static> {
    Reading {
        arch: None,
        extra: &[],
        launches,
    }
}

/// A job that ended well with `stdout`.
fn ended_well(stdout: &str) -> repro_executor::JobOutcome {
    repro_executor::JobOutcome {
        exit: repro_executor::ExitKind::Code(0),
        stdout: stdout.as_bytes().to_vec(),
        tail: String::new(),
        node: None,
        elapsed: Duration::ZERO,
    }
}

fn records(result: RunResult) -> Vec<(NcuTarget, String)> {
    match result {
        RunResult::Done(records) => records,
        RunResult::NoPermission(line) => panic!("no permission: {line}"),
    }
}

#[test]
fn a_kernel_target_is_the_median_of_its_profiled_launches() {
    let text = fixture("stage_mode_launches.csv");
    let target = Target {
        label: "control".into(),
        variant: "base".into(),
        entry: "scale_add".into(),
        program: Program::Variant("base".into()),
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    let outcome = ended_well(&text);
    let read = run::read_unit(&[&target], &outcome, &text, &reading(5));
    let (record, csv) = &records(read)[0];
    assert_eq!(record.status, RunStatus::Ok, "{:?}", record.reason);
    assert_eq!(
        (
            record.kernel_time_us,
            record.kernel_time_us_min,
            record.kernel_time_us_max,
            record.launches
        ),
        (Some(16.576), Some(16.48), Some(19.104), Some(5))
    );
    assert_eq!(csv, &text);
    // Fewer launches than asked for: failed, saying how many and what to change.
    let read = run::read_unit(&[&target], &outcome, &text, &reading(6));
    let (record, _) = &records(read)[0];
    assert_eq!(record.status, RunStatus::Failed);
    let why = record.reason.as_deref().unwrap();
    assert!(
        why.contains("ncu profiled 5 launch(es) of `scale_add`")
            && why.contains("`launches: 6`")
            && why.contains("raise the stage's `iters`"),
        "{why}"
    );
}

#[test]
fn a_baseline_call_is_the_median_of_its_profiled_calls() {
    let text = fixture("baseline_calls_launches.csv");
    let calls = sdpa_calls();
    let unit: Vec<&Target> = calls.iter().collect();
    let records = calls::read_calls(&unit, &text, &text, &reading(5));
    // best@mission: 9,728 9,632 9,792 9,760 10,240 ns.
    let (best, csv) = &records[0];
    assert_eq!(best.status, RunStatus::Ok, "{:?}", best.reason);
    assert_eq!(
        (
            best.kernel_time_us,
            best.kernel_time_us_min,
            best.kernel_time_us_max,
            best.launches
        ),
        (Some(9.76), Some(9.632), Some(10.24), Some(5))
    );
    assert_eq!(best.kernels.len(), 1);
    assert_eq!(best.kernels[0].time_us, Some(9.76));
    assert_eq!(best.sm_util_pct, Some(13.33));
    let alone = repro_ncu::parse::parse(csv).unwrap();
    assert_eq!(alone.launches.len(), 5, "its five calls' rows, no other's");
    assert_eq!(records[3].0.kernel_time_us, Some(23.968));
    // Five kernels cannot be three calls of the same kernels.
    let records = calls::read_calls(&unit, &text, &text, &reading(3));
    let why = records[0].0.reason.as_deref().unwrap();
    assert_eq!(records[0].0.status, RunStatus::Failed);
    assert!(
        why.contains("ncu profiled 5 kernel launch(es)") && why.contains("`launches: 3`"),
        "{why}"
    );
}

#[test]
fn profiled_calls_that_launch_other_kernels_are_not_split_by_guesswork() {
    // wmma_gemm, scale_add, scale_add: not three calls of the same kernel.
    let text = fixture("two_kernels.csv");
    let target = script_call("torch", "mission");
    let records = calls::read_calls(&[&target], &text, &text, &reading(3));
    let (record, _) = &records[0];
    assert_eq!(record.status, RunStatus::Failed);
    assert!(
        record
            .reason
            .as_deref()
            .unwrap()
            .contains("profiled call 2 launched `scale_add` where the first launched `wmma_gemm`"),
        "{record:?}"
    );
}
