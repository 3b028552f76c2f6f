//! The GPU worker (docs/ARCHITECTURE.md, "The GPU worker"): one long-lived
//! `repro exec --worker` per GPU slot takes many runs, keeping its CUDA context, the loaded
//! modules and the reference outputs between them ([`super::warm`]).
//!
//! The protocol is JSON lines: the stage writes one [`Request`] per line on the worker's
//! stdin; the worker answers each with one [`Answer`] line on stdout, in order, and exits
//! when its stdin ends. A failed run is an answer with an `error`; when the failure left the
//! CUDA context unusable the answer says `context_lost` and the worker exits after it.
//!
//! Fault isolation is the one-shot `repro exec`'s: the stage's side ([`pool`]) times every
//! answer, kills a worker that is late (a hang), records that run as failed with the reason,
//! and starts a fresh worker for the rest; likewise when the worker dies (a crash) or loses
//! its context.

pub mod pool;
pub mod serve;

use super::client::ExecRequest;
use repro_schema::BenchResult;
use serde::{Deserialize, Serialize};

/// One line on the worker's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Echoed in the answer.
    pub id: u64,
    pub run: ExecRequest,
}

/// One line on the worker's stdout: the run's record, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<BenchResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run left the CUDA context unusable (or none could be created): the worker exits
    /// after this answer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub context_lost: bool,
}

impl Answer {
    /// The answer in a line of the worker's stdout. A kernel's `printf` shares that
    /// stream and may leave text before it on the same line.
    pub fn find_in(line: &str) -> Option<Answer> {
        let start = line.find("{\"id\":")?;
        serde_json::from_str(&line[start..]).ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::client::ExecTarget;
    use crate::timing::L2Mode;
    use crate::timing::Method;
    use repro_schema::RunStatus;

    /// A run of variant `v` on shape `small` with seed `seed` (which the stand-in workers
    /// of the tests read to decide what to do).
    pub(crate) fn request(seed: u64) -> ExecRequest {
        ExecRequest {
            target: ExecTarget::Variant("v".into()),
            workload: None,
            shape: "small".into(),
            inputs: None,
            precision: None,
            seed,
            warmup: 1,
            iters: 2,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            timing: true,
            profile: None,
            check: true,
        }
    }

    #[test]
    fn requests_and_answers_round_trip_as_lines() {
        let req = Request {
            id: 7,
            run: ExecRequest {
                target: ExecTarget::Cubin {
                    path: ".repro/cache/build/k/rms.cubin".into(),
                    entry: "rmsnorm_fwd".into(),
                    defines: [("VEC".to_string(), 4)].into(),
                },
                workload: Some("rmsnorm".into()),
                shape: "rows=4,hidden=1024".into(),
                inputs: Some("tiny".into()),
                precision: Some("fp8-pv".into()),
                seed: 2,
                warmup: 3,
                iters: 4,
                l2: L2Mode::Flush,
                method: Method::Graph,
                timing: false,
                profile: None,
                check: true,
            },
        };
        let line = serde_json::to_string(&req).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), req);

        let dims = [("rows".to_string(), 4), ("hidden".to_string(), 1024)].into();
        let mut record = repro_schema::BenchResult::blank("small", dims, 2, (3, 4), RunStatus::Ok);
        record.p50_us = Some(5.25);
        record
            .speedups
            .insert("speedup_vs_control".into(), Some(1.5));
        let ok = Answer {
            id: 7,
            result: Some(record),
            error: None,
            context_lost: false,
        };
        let line = serde_json::to_string(&ok).unwrap();
        assert!(!line.contains("context_lost"), "{line}");
        assert_eq!(Answer::find_in(&line), Some(ok));
    }

    #[test]
    fn an_answer_is_found_after_a_kernels_printf_on_the_same_line() {
        let lost = Answer {
            id: 3,
            result: None,
            error: Some("running the kernel: CUDA_ERROR_ILLEGAL_ADDRESS".into()),
            context_lost: true,
        };
        let line = format!("tid 0 says hi{}", serde_json::to_string(&lost).unwrap());
        assert_eq!(Answer::find_in(&line), Some(lost));
        assert_eq!(Answer::find_in("tid 0 says hi"), None);
        assert_eq!(Answer::find_in("{\"id\": oops"), None);
    }
}
