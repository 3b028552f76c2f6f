//! The worker's side: `repro exec --worker` reads [`Request`] lines until its stdin ends and
//! answers each with one [`Answer`] line, running them in one [`Runner`].

use super::{Answer, Request};
use crate::{exec::ExecSettings, exec::Runner};
use anyhow::Context as _;
use std::io::{BufRead, Write};
use std::path::Path;

/// How a worker stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// Its stdin ended: every request was answered.
    AllAnswered,
    /// A run left the CUDA context unusable; it was answered, and nothing more can run.
    ContextLost,
}

/// Serve the project at `file`: answer every request on `input` on `output`. The CUDA
/// session is opened before the first request is read ([`Runner::open_session`]).
pub fn serve(
    file: &Path,
    settings: &ExecSettings,
    input: impl BufRead,
    output: impl Write,
) -> anyhow::Result<Served> {
    let mut runner = Runner::new(file, settings)?;
    runner.open_session();
    serve_with(&mut runner, input, output)
}

/// [`serve`] with the runner given; the loop itself.
fn serve_with(
    runner: &mut impl Run,
    input: impl BufRead,
    mut output: impl Write,
) -> anyhow::Result<Served> {
    for line in input.lines() {
        let line = line.context("cannot read a request from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(req) => match runner.run(&req.run) {
                Ok(result) => Answer {
                    id: req.id,
                    result: Some(result),
                    error: None,
                    context_lost: false,
                },
                Err(e) => Answer {
                    id: req.id,
                    result: None,
                    error: Some(format!("{e:#}")),
                    context_lost: !runner.usable(),
                },
            },
            // The stage's side wrote it: a bug there, answered so it is seen at once.
            Err(e) => Answer {
                id: serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v.get("id")?.as_u64())
                    .unwrap_or(0),
                result: None,
                error: Some(format!("not a worker request ({e}): {line}")),
                context_lost: false,
            },
        };
        writeln!(output, "{}", serde_json::to_string(&answer)?)
            .and_then(|()| output.flush())
            .context("cannot write an answer to stdout")?;
        if answer.context_lost {
            return Ok(Served::ContextLost);
        }
    }
    Ok(Served::AllAnswered)
}

/// What the loop needs of a [`Runner`] (a fake in tests).
trait Run {
    fn run(
        &mut self,
        req: &crate::client::ExecRequest,
    ) -> anyhow::Result<repro_schema::BenchResult>;
    fn usable(&self) -> bool;
}

impl Run for Runner {
    fn run(
        &mut self,
        req: &crate::client::ExecRequest,
    ) -> anyhow::Result<repro_schema::BenchResult> {
        Runner::run(self, req)
    }

    fn usable(&self) -> bool {
        Runner::usable(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ExecRequest;
    use repro_schema::BenchResult;
    use repro_schema::RunStatus;

    /// Seeds 0.. succeed; seed 13 faults and poisons the context; seed 7 fails harmlessly.
    struct Fake {
        poisoned: bool,
        ran: Vec<u64>,
    }

    impl Run for Fake {
        fn run(&mut self, req: &ExecRequest) -> anyhow::Result<BenchResult> {
            self.ran.push(req.seed);
            match req.seed {
                13 => {
                    self.poisoned = true;
                    anyhow::bail!("running the kernel: CUDA_ERROR_ILLEGAL_ADDRESS")
                }
                7 => anyhow::bail!("no shape `huge` under workload.shapes"),
                s => Ok(BenchResult::blank(
                    "small",
                    Default::default(),
                    s,
                    (1, 2),
                    RunStatus::Ok,
                )),
            }
        }

        fn usable(&self) -> bool {
            !self.poisoned
        }
    }

    fn line(id: u64, seed: u64) -> String {
        let run = crate::worker::tests::request(seed);
        serde_json::to_string(&Request { id, run }).unwrap()
    }

    fn answers(out: &[u8]) -> Vec<Answer> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn answers_every_request_in_order_until_stdin_ends() {
        let input = [line(1, 0), String::new(), line(2, 7), line(3, 2)].join("\n");
        let mut fake = Fake {
            poisoned: false,
            ran: vec![],
        };
        let mut out = Vec::new();
        let served = serve_with(&mut fake, input.as_bytes(), &mut out).unwrap();
        assert_eq!(served, Served::AllAnswered);
        let got = answers(&out);
        assert_eq!(got.iter().map(|a| a.id).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(got[0].result.as_ref().unwrap().seed, 0);
        assert!(got[1].error.as_deref().unwrap().contains("no shape"));
        assert!(!got[1].context_lost, "a harmless failure keeps the worker");
        assert_eq!(got[2].result.as_ref().unwrap().seed, 2);
    }

    #[test]
    fn a_lost_context_is_answered_then_the_worker_stops() {
        let input = [line(1, 0), line(2, 13), line(3, 1)].join("\n");
        let mut fake = Fake {
            poisoned: false,
            ran: vec![],
        };
        let mut out = Vec::new();
        let served = serve_with(&mut fake, input.as_bytes(), &mut out).unwrap();
        assert_eq!(served, Served::ContextLost);
        let got = answers(&out);
        assert_eq!(got.len(), 2);
        assert!(got[1].context_lost);
        assert!(got[1]
            .error
            .as_deref()
            .unwrap()
            .contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
        assert_eq!(fake.ran, [0, 13], "nothing runs on a poisoned context");
    }

    #[test]
    fn a_line_that_is_not_a_request_is_answered_with_why() {
        let mut fake = Fake {
            poisoned: false,
            ran: vec![],
        };
        let mut out = Vec::new();
        serve_with(&mut fake, &b"{\"id\": 9, \"run\": 1}\n"[..], &mut out).unwrap();
        let got = answers(&out);
        assert_eq!(got[0].id, 9);
        assert!(got[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("not a worker request"));
        assert!(fake.ran.is_empty());
    }
}
