//! `pipeline.yaml` loaded and checked: its typed shape ([`spec`]), loading with
//! file:line:column errors ([`load`](mod@load), [`diag`], [`spans`]), validation
//! ([`validate`], [`paths`]; the load's scan remembered by [`scan_cache`]), the stage graph
//! ([`dag`]), the workloads it declares ([`workload`]), the nvcc it pins ([`toolchain`]),
//! and what a stage kind is ([`kind`]): the interface the loader checks each stage's
//! options through and the engine runs it through.
//!
//! It depends only on `repro-executor`, `repro-schema`, `repro-expr` and `repro-base`. It
//! names no stage kind: the kinds are handed to [`load()`] by the crate that defines them
//! (`repro_stages::kinds`).

pub mod builtin_kind;
pub mod dag;
pub mod diag;
pub mod kind;
pub mod load;
pub mod options;
pub mod output_index;
pub mod param_value;
pub mod parse_cache;
pub mod paths;
pub mod profile_rules;
pub mod scan_cache;
pub mod spans;
pub mod spec;
/// Fakes and finders for tests here and in the crates above (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod test_support;
pub mod toolchain;
pub mod validate;
pub mod workload;

pub use load::{load, LoadError, Project, Stage};
pub use spec::*;

/// Shared with the integration tests: see `tests/support/skip.rs`.
#[cfg(any(test, feature = "testing"))]
#[path = "../../../tests/support/skip.rs"]
pub mod test_skip;

/// Shared with the integration tests: see `tests/support/fake_python.rs`.
#[cfg(test)]
#[path = "../../../tests/support/fake_python.rs"]
pub(crate) mod test_fake_python;
