//! Reading what ncu left: failures, and the medians of profiled launches and calls.

use super::*;
use crate::profile::run::failure_context;

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
fn kernel_targets_take_their_launches_in_request_order() {
    let text = fixture("stage_mode_launches.csv");
    let target = |label: &str, entry: &str| Target {
        label: label.into(),
        variant: "base".into(),
        entry: entry.into(),
        program: Program::Variant("base".into()),
        workload: "tiny".into(),
        shape: "mission".into(),
    };
    let (control, other) = (target("control", "scale_add"), target("other", "scale_add"));
    let mut records = vec![None, None];
    let unread = kernels::assign(&[&control, &other], &[0], &text, &reading(5), &mut records);
    assert!(unread.is_empty());
    let (record, csv) = records[0].as_ref().unwrap();
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
    assert_eq!(csv, &text, "all of ncu's output is this target's");
    assert!(records[1].is_none(), "not answered: nothing read for it");
    // Two answered but five launches: the second's are missing, it comes back.
    let mut records = vec![None, None];
    let unread = kernels::assign(
        &[&control, &other],
        &[0, 1],
        &text,
        &reading(5),
        &mut records,
    );
    assert_eq!(unread, [1]);
    // Launches of another entry are not this target's.
    let wrong = target("wrong", "softmax");
    let mut records = vec![None];
    assert_eq!(
        kernels::assign(&[&wrong], &[0], &text, &reading(5), &mut records),
        [0]
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
