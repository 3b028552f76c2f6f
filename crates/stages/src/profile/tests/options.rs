//! The stage's options: defaults, errors that name their key, timeouts.

use super::*;
use std::time::Duration;

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
    assert!(e.message.contains("base, mm, ws"), "{}", e.message);
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
fn timeouts_read_the_pipelines_durations() {
    let o = options("{uses: profile, timeout: 1.5m}").unwrap();
    assert_eq!(o.timeout, Duration::from_secs(90));
    let o = options("{uses: profile, timeout: 500ms}").unwrap();
    assert_eq!(o.timeout, Duration::from_millis(500));
}
