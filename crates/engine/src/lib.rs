//! Runs the stage graph: decides what is stale from fingerprints, runs stages (in
//! parallel where the graph allows) through an executor, moves outputs into place only on
//! success, and records `artifacts/repro.lock`. Knows nothing about GPUs.
//!
//! It depends only on `repro-pipeline`, `repro-executor` and `repro-base`: it knows no GPU and
//! names no stage kind.

pub mod code_digest;
pub mod display;
pub mod early;
pub mod fingerprint;
pub mod lockfile;
pub mod progress;
pub mod project_lock;
pub mod run_record;
pub mod runner;
pub mod staging;
pub mod statcache;
pub mod status;
pub mod value_diff;

/// The interface the engine runs stages through, defined beside the pipeline it validates.
pub use repro_pipeline::kind::{
    Config, Configs, Configured, Kinds, OptionError, Outputs, Overrides, RunCtx, StageInputs,
    StageKind, StageOutcome, TuneOverrides,
};
