//! The profile stage without a GPU: options, targets, the ncu command line, failures.

use super::ncu_call::regex_escape;
use super::run::failure_context;
use super::*;
use std::time::Duration;

fn pipeline(stage: &str) -> Pipeline {
    crate::workload::testing::tiny_pipeline(
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

#[test]
fn defaults_follow_ncu_and_warmup() {
    let o = options("{uses: profile}").unwrap();
    assert_eq!(o.targets, ["control", "topk"]);
    assert_eq!(o.clock_control, "base");
    assert_eq!(o.launch_skip(), o.warmup);
    assert_eq!(o.timeout, Duration::from_secs(600));
    let o = options("{uses: profile, warmup: 9, targets: [ws], clock_control: none}").unwrap();
    assert_eq!((o.launch_skip(), o.clock_control.as_str()), (9, "none"));
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
    let e = options("{uses: profile, keep_report: maybe}").unwrap_err();
    assert_eq!(e.path, ["keep_report"]);
    let e = options("{uses: profile, targets: []}").unwrap_err();
    assert_eq!(e.path, ["targets"]);
    let e = options("{uses: profile, timeout: soon}").unwrap_err();
    assert_eq!(e.path, ["timeout"]);
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
    let opts = options("{uses: profile, warmup: 3, iters: 2, clock_control: none}").unwrap();
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
        call.argv(&variant, &page).join(" "),
        "/usr/local/cuda/bin/ncu --csv --page raw --metrics gpu__time_duration.sum,launch__registers_per_thread \
         -k regex:^k_fwd$ --launch-skip 3 --launch-count 1 --clock-control none \
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
    let argv = call.argv(&elite, &page).join(" ");
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
    let (run, skipped) = resolve_targets(&opts, spec, &p, dir.path());
    assert_eq!(run.len(), 1);
    assert_eq!(run[0].variant, "base");
    assert_eq!(run[0].entry, "k_fwd");
    assert_eq!(
        (run[0].workload.as_str(), run[0].shape.as_str()),
        ("tiny", "mission")
    );
    assert_eq!(skipped[0].status, "skipped");
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
    let (run, skipped) = resolve_targets(&opts, spec, &p, dir.path());
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
    let (run, skipped) = resolve_targets(&opts, &p.stages["prof"], &p, dir.path());
    assert!(run.is_empty());
    assert!(skipped[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("needs no tune stage"));
}
