//! The built-in stage kinds, one module each. [`registry`] is their table; [`kinds`] hands
//! it to the loader, which knows no kind by name ([`load`] does both).
//!
//! The top of the library: it may depend on every other repro crate, and only the command
//! line (`repro`) depends on it.

use repro_pipeline::kind::{Kinds, StageKind};
use repro_pipeline::{LoadError, Project};
use std::path::Path;
use std::sync::Arc;

pub mod bench;
pub mod build;
pub mod cmd;
pub mod gpu_nodes;
pub mod profile;
pub mod reuse;
pub mod slots;
pub mod summarize;
pub mod tune;

/// Every built-in stage kind.
pub fn registry() -> Vec<Box<dyn StageKind>> {
    vec![
        Box::new(cmd::CmdKind),
        Box::new(build::BuildStage::default()),
        Box::new(bench::BenchStage),
        Box::new(profile::Profile),
        Box::new(tune::TuneStage),
        Box::new(summarize::Summarize),
    ]
}

/// The built-in kinds, as the loader takes them.
pub fn kinds() -> Kinds {
    registry().into_iter().map(Arc::from).collect()
}

/// Read, parse and validate `file` with the built-in kinds.
pub fn load(file: &Path) -> Result<Project, LoadError> {
    repro_pipeline::load(file, &kinds())
}

/// Look a kind up by its `uses:` name.
pub fn find(kind: &str) -> Option<Box<dyn StageKind>> {
    registry().into_iter().find(|k| k.kind() == kind)
}

#[cfg(test)]
mod tests {
    pub(crate) mod calls;
    mod decoded_once;
    mod workload_errors;
}
