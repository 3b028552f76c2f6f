//! The baselines' isolated method never times the host. `kernels/baselines/baselines_common.py`
//! (the PyTorch baselines' timing) queues each call behind a GPU sleep; a sample counts only if the GPU was still asleep
//! when the host had queued the region's end event, else it is retaken behind a longer
//! sleep (`host_late_retakes`). A host-side call that is slower than the sleep is the case
//! that used to leak host time into a sample.
//!
//! Without a GPU this runs the script's `time_isolated` against a simulated CUDA stream (a
//! timeline where a sleep, an event and a kernel take their turn and the host's calls cost
//! host time), including a GPU that runs its sleep faster than the calibration said. With
//! `REPRO_GPU_TESTS=1` and PyTorch the same check runs on the real GPU.

use crate::common;

use std::process::Command;

fn python(code: &str) -> serde_json::Value {
    let script_dir = common::source_root().join("kernels/baselines");
    common::stdout_json(Command::new("python3").arg("-c").arg(format!(
        "import sys; sys.path.insert(0, {:?})\n{code}",
        script_dir.display().to_string()
    )))
}

fn has_python(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A fake `torch` whose stream is a timeline: `cuda._sleep(c)` occupies the GPU for
/// `c / (cycles_per_us * boost)` µs (`boost` from the second sleep on), a kernel launched by the timed call for `KERNEL_US`,
/// events complete when the GPU reaches them; every host call costs `HOST_CALL_US` and the
/// timed call itself `SLOW_HOST_US` of host time before its kernel is queued.
const SIMULATION: &str = r#"
import json, types
import baselines_common

KERNEL_US, HOST_CALL_US = 7.0, 1.0

class Sim:
    def __init__(self, boost, slow_host_us):
        self.host = 0.0          # host clock, µs
        self.gpu_free = 0.0      # when the GPU finishes what is queued
        self.boost, self.slow_host_us = boost, slow_host_us
        self.calibrated = False
    def enqueue(self, duration):
        self.host += HOST_CALL_US
        start = max(self.host, self.gpu_free)
        self.gpu_free = start + duration
        return self.gpu_free

def fake_torch(sim):
    class Event:
        def __init__(self, enable_timing=True):
            self.done = None
        def record(self):
            self.done = sim.enqueue(0.0)
        def query(self):
            sim.host += HOST_CALL_US
            return self.done <= sim.host
        def synchronize(self):
            sim.host = max(sim.host, self.done)
        def elapsed_time(self, other):
            return (other.done - self.done) / 1000.0
    def _sleep(cycles):
        # 1000 cycles per µs for the first sleep (the calibration); a GPU that boosts after
        # it sleeps shorter than the calibration says.
        sim.enqueue(cycles / (1000.0 * (sim.boost if sim.calibrated else 1.0)))
        sim.calibrated = True
    cuda = types.SimpleNamespace(Event=Event, _sleep=_sleep)
    return types.SimpleNamespace(cuda=cuda)

def timed_call(sim):
    def call():
        sim.host += sim.slow_host_us
        sim.enqueue(KERNEL_US)
    return call

out = {}
for name, boost, slow in (("quick host", 1.0, 0.0), ("slow host", 1.0, 400.0),
                          ("slow host, boosted GPU", 3.0, 400.0)):
    sim = Sim(boost, slow)
    torch = fake_torch(sim)
    samples, mode = baselines_common.time_isolated(torch, timed_call(sim), 20, None, 1.0, 0.0)
    out[name] = {"p50": baselines_common.summarize(samples)["p50_us"], "mode": mode}
print(json.dumps(out))
"#;

#[test]
fn a_host_slower_than_the_hold_is_retaken_not_timed() {
    if !has_python("json") {
        common::say_skipped("python3 is not installed");
        return;
    }
    let seen = python(SIMULATION);
    for case in ["quick host", "slow host", "slow host, boosted GPU"] {
        let p50 = seen[case]["p50"].as_f64().unwrap();
        // The kernel is 7 µs and the empty region (subtracted) 0: only GPU time counts.
        assert!(
            (p50 - 7.0).abs() < 1e-6,
            "{case}: p50 {p50} µs, want 7: {seen}"
        );
    }
    let retakes = |case: &str| seen[case]["mode"]["host_late_retakes"].as_u64().unwrap();
    assert_eq!(retakes("quick host"), 0, "{seen}");
    assert!(retakes("slow host") >= 1, "{seen}");
    assert!(
        retakes("slow host, boosted GPU") > retakes("slow host"),
        "a GPU that sleeps faster than calibrated needs longer holds: {seen}"
    );
}

/// On a GPU: two tiny kernels with a 2 ms host-side pause between them. Timed as one call,
/// the region must hold the kernels only, never the pause.
const ON_THE_GPU: &str = r#"
import json, time
import torch
import baselines_common

x = torch.zeros(1024, device="cuda")
def quick():
    x.add_(1.0); x.add_(1.0)
def slow_host():
    x.add_(1.0); time.sleep(0.002); x.add_(1.0)
out = {}
for name, fn in (("quick", quick), ("slow host", slow_host)):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    samples, mode = baselines_common.time_isolated(torch, fn, 50, None, 1.0, 2.0)
    out[name] = {"p50": baselines_common.summarize(samples)["p50_us"], "mode": mode}
print(json.dumps(out))
"#;

#[test]
fn on_a_gpu_a_slow_host_call_does_not_leak_into_the_sample() {
    if !common::gpu_tests_enabled("on_a_gpu_a_slow_host_call_does_not_leak_into_the_sample") {
        return;
    }
    if !has_python("torch") {
        common::say_skipped("PyTorch is not installed: the GPU baseline timing cannot be checked");
        return;
    }
    let seen = python(ON_THE_GPU);
    let quick = seen["quick"]["p50"].as_f64().unwrap();
    let slow = seen["slow host"]["p50"].as_f64().unwrap();
    assert!(
        seen["slow host"]["mode"]["host_late_retakes"]
            .as_u64()
            .unwrap()
            >= 1,
        "{seen}"
    );
    // The pause is 2000 µs; the two kernels take a few µs either way.
    assert!(slow < 100.0, "host time leaked into the sample: {seen}");
    assert!(
        (slow - quick).abs() < 20.0,
        "the same kernels, with and without the host pause: {seen}"
    );
}
