//! `pipeline.yaml`: its typed shape ([`spec`]), loading with file:line:column errors,
//! validation, and the stage graph.

pub mod spec;

pub use spec::*;
