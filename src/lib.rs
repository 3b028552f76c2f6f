//! `repro`: a cached, reproducible DAG of GPU-kernel stages
//! (build → bench → evo-tune → ncu-profile → summarize).
//!
//! Reading order: [`cli`] defines the command line and [`commands`] carries it out (the
//! only layer that knows clap and exit codes); [`pipeline`] loads and validates
//! `pipeline.yaml`; [`engine`] decides what is stale and runs stages through an
//! [`executor`]; [`stages`] holds one module per built-in stage kind. GPU code stays
//! behind [`gpu`]; Nsight Compute behind [`ncu`]; the autotuner in [`tune`]; reports in
//! [`report`]; workloads declared in pipeline.yaml in [`workload`]. [`schema`] fixes the
//! artifact records that stages hand each other;
//! [`toolchain`] picks (and, when pinned, installs) the nvcc every compile uses.

pub mod cli;
pub mod commands;
pub mod doctables;

// The library's layers, one crate each (bottom to top: schema, expr, base, exec, pipeline,
// engine, gpu, ncu, tune, report, stages), under the paths the command line and the tests use.
pub use repro_base::{elf, errors, fsio, stats, tools};
pub use repro_engine as engine;
pub use repro_executor as executor;
pub use repro_expr as expr;
pub use repro_gpu as gpu;
pub use repro_gpu::env;
pub use repro_ncu as ncu;
pub use repro_pipeline::{toolchain, workload};
pub use repro_report as report;
pub use repro_schema as schema;
pub use repro_stages as stages;
pub use repro_tune as tune;

/// `pipeline.yaml` loaded with the built-in stage kinds: the pipeline crate, whose
/// [`load`](pipeline::load) here resolves `uses:` among them.
pub mod pipeline {
    pub use repro_pipeline::*;
    pub use repro_stages::load;
}

/// Shared with the integration tests: see `tests/support/skip.rs`.
#[cfg(test)]
#[path = "../tests/support/skip.rs"]
pub(crate) mod test_skip;

/// Shared with the integration tests: see `tests/support/fake_python.rs`.
#[cfg(test)]
#[path = "../tests/support/fake_python.rs"]
pub(crate) mod test_fake_python;
