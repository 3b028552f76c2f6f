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
pub mod elf;
pub mod engine;
pub mod env;
pub mod executor;
pub mod gpu;
pub mod ncu;
pub mod pipeline;
pub mod report;
pub mod schema;
pub mod stages;
pub mod stats;
pub mod toolchain;
pub mod tools;
pub mod tune;
pub mod workload;

/// Shared with the integration tests: see `tests/support/skip.rs`.
#[cfg(test)]
#[path = "../tests/support/skip.rs"]
pub(crate) mod test_skip;

/// Shared with the integration tests: see `tests/support/fake_python.rs`.
#[cfg(test)]
#[path = "../tests/support/fake_python.rs"]
pub(crate) mod test_fake_python;
