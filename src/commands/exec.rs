//! `repro exec` (one kernel, one shape, one seed → one JSON line; with `--worker`, many
//! runs as JSON lines, the stages' worker) and `repro compare A B`.

use super::exit;
use crate::{cli::CompareArgs, cli::ExecArgs, cli::GlobalArgs};
use anyhow::bail;
use repro_engine::display;
use repro_gpu::{client::ExecRequest, client::ExecTarget};
use repro_gpu::{compare, compare::CompareRequest};
use repro_gpu::{exec, exec::DumpRequest, exec::ExecSettings};
use repro_gpu::{worker::serve::serve, worker::serve::Served};
use repro_schema::BenchResult;
use std::path::PathBuf;

/// The shape argument as `ExecRequest::shape` holds it: a name, or the dimensions.
fn shape_text(name: Option<&String>, dims: Option<&String>) -> Option<String> {
    name.or(dims).cloned()
}

/// The request `args` ask for (the inverse of [`ExecRequest::argv`]).
fn request(args: &ExecArgs) -> anyhow::Result<ExecRequest> {
    let target = match (&args.variant, &args.cubin, &args.entry) {
        (Some(v), _, _) => ExecTarget::Variant(v.clone()),
        (None, Some(c), Some(e)) => ExecTarget::Cubin {
            path: c.clone(),
            entry: e.clone(),
            defines: args.defines.iter().cloned().collect(),
        },
        _ => bail!("say what to run: --variant NAME, or --cubin PATH --entry NAME"),
    };
    let Some(shape) = shape_text(args.shape.as_ref(), args.dims.as_ref()) else {
        bail!("say which shape: --shape NAME or --dims NAME=N,...");
    };
    Ok(ExecRequest {
        target,
        workload: args.workload.clone(),
        shape,
        inputs: args.inputs.clone(),
        precision: args.precision.clone(),
        seed: args.seed.unwrap_or(0),
        warmup: args.warmup,
        iters: args.iters,
        l2: args.l2,
        method: args.method,
        timing: !args.no_timing,
        profile: args.profile_launches,
        check: !args.unchecked,
    })
}

fn settings(args: &ExecArgs) -> ExecSettings {
    ExecSettings {
        device: args.device,
        max_cv: args.max_cv,
        max_time: args.max_time,
        launches_per_sample: args.launches_per_sample,
        reference: args.reference.clone(),
    }
}

/// `repro exec`: print one JSON line (the record, the attributes, or the GPU list).
pub fn exec(global: &GlobalArgs, args: &ExecArgs) -> anyhow::Result<i32> {
    if args.query_devices {
        // The driver's view, never a cache: the node running this is not the one that
        // wrote `.repro/cache/gpu.json`.
        display::out_line(&serde_json::to_string(&repro_gpu::probe()?)?)?;
        return Ok(exit::OK);
    }
    if !args.attributes.is_empty() {
        return print_attributes(&args.attributes, args.device);
    }
    if let Some(dir) = &args.dump_inputs {
        let shape = shape_text(args.shape.as_ref(), args.dims.as_ref());
        let req = DumpRequest {
            dir,
            workload: args.workload.as_deref(),
            shape: shape.as_deref(),
            seed: args.seed,
            recipe: args.inputs.as_deref(),
        };
        let n = exec::dump_inputs(&global.file, &req)?;
        display::err(&format!("wrote {n} input set(s) to {}", dir.display()));
        return Ok(exit::OK);
    }
    if args.worker {
        let stdin = std::io::stdin().lock();
        return match serve(
            &global.file,
            &settings(args),
            stdin,
            std::io::stdout().lock(),
        )? {
            Served::AllAnswered => Ok(exit::OK),
            Served::ContextLost => {
                display::err(
                    "error: the CUDA context is unusable after the last run; this worker ends",
                );
                Ok(exit::FAILED)
            }
        };
    }
    let req = request(args)?;
    let result = exec::run_request(&global.file, &req, &settings(args))?;
    display::out_line(&serde_json::to_string(&result)?)?;
    if !req.check {
        return Ok(exit::OK);
    }
    let code = run_exit_code(&result);
    if code != exit::OK {
        display::err("error: the correctness check failed: `correctness_pass` is not true in the record above");
    }
    Ok(code)
}

/// `--attributes CUBIN ENTRY ...`: a JSON line per kernel, in order; exit 1 when any did not
/// load (its line says why).
fn print_attributes(pairs: &[String], device: u32) -> anyhow::Result<i32> {
    let kernels: Vec<(PathBuf, String)> = pairs
        .chunks_exact(2)
        .map(|pair| (PathBuf::from(&pair[0]), pair[1].clone()))
        .collect();
    let mut all_read = true;
    for ((_, entry), read) in kernels.iter().zip(exec::attributes(&kernels, device)?) {
        let line = match read {
            Ok(attrs) => serde_json::to_string(&attrs)?,
            Err(error) => {
                all_read = false;
                serde_json::json!({ "entry": entry, "error": error }).to_string()
            }
        };
        display::out_line(&line)?;
    }
    Ok(if all_read { exit::OK } else { exit::FAILED })
}

/// One run's exit code: 0 only when its correctness check passed, so a script (or the lead's
/// GPU test) can trust `repro exec`'s status without reading the record.
fn run_exit_code(result: &BenchResult) -> i32 {
    if result.correctness_pass == Some(true) {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// `repro compare A B`: exit 1 when either side fails the correctness check.
pub fn compare(global: &GlobalArgs, args: &CompareArgs) -> anyhow::Result<i32> {
    let req = CompareRequest {
        a: args.a.clone(),
        b: args.b.clone(),
        entry: args.entry.clone(),
        workload: args.workload.clone(),
        defines: args.defines.iter().cloned().collect(),
        shape: args.shape.clone().or_else(|| args.dims.clone()),
        seed: args.seed,
        warmup: args.warmup,
        pairs: args.pairs,
        l2: args.l2,
        device: args.device,
        reference: args.reference.clone(),
    };
    let c = compare::compare(&global.file, &req)?;
    if args.json {
        display::out_line(&serde_json::to_string_pretty(&c)?)?;
    } else {
        display::out(&compare::render_text(&c))?;
    }
    Ok(if c.a.correct && c.b.correct {
        exit::OK
    } else {
        exit::FAILED
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use crate::cli::Command;
    use clap::Parser;
    use repro_gpu::timing::L2Mode;
    use repro_gpu::timing::Method;
    use repro_schema::RunStatus;

    fn parsed(req: &ExecRequest) -> ExecRequest {
        let argv = ["repro", "exec"]
            .into_iter()
            .map(String::from)
            .chain(req.argv());
        match Cli::try_parse_from(argv).expect("the argv parses").command {
            Command::Exec(args) => request(&args).expect("a complete request"),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn argv_and_the_command_line_are_each_others_inverse() {
        let base = ExecRequest {
            target: ExecTarget::Variant("mma-m64".into()),
            workload: None,
            shape: "mission".into(),
            inputs: Some("gaussian".into()),
            precision: None,
            seed: 0,
            warmup: 20,
            iters: 100,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            timing: true,
            profile: None,
            check: true,
        };
        let cubin = ExecRequest {
            target: ExecTarget::Cubin {
                path: ".repro/cubins/tune-top1.cubin".into(),
                entry: "rmsnorm_fwd".into(),
                defines: [("VEC".to_string(), 8), ("ROWS_PER_BLOCK".to_string(), 2)].into(),
            },
            workload: Some("rmsnorm".into()),
            shape: "rows=4,hidden=1024".into(),
            inputs: Some("tiny".into()),
            precision: Some("fp8-pv".into()),
            seed: 7,
            warmup: 3,
            iters: 2,
            l2: L2Mode::Flush,
            method: Method::Graph,
            timing: false,
            profile: Some(5),
            check: false,
        };
        for req in [base, cubin] {
            assert_eq!(parsed(&req), req, "argv {:?}", req.argv());
        }
    }

    #[test]
    fn a_run_exits_one_unless_its_correctness_check_passed() {
        let run = |pass: Option<bool>| {
            let mut r = BenchResult::blank("small", Default::default(), 0, (1, 1), RunStatus::Ok);
            r.correctness_pass = pass;
            run_exit_code(&r)
        };
        assert_eq!(run(Some(true)), exit::OK);
        assert_eq!(run(Some(false)), exit::FAILED);
        assert_eq!(run(None), exit::FAILED, "no verdict is no pass");
    }

    #[test]
    fn a_method_or_l2_mode_outside_the_list_is_refused_by_name() {
        let err =
            Cli::try_parse_from(["repro", "exec", "--variant", "v", "--method", "cuda_graph"])
                .unwrap_err()
                .to_string();
        assert!(err.contains("isolated or graph"), "{err}");
    }
}
