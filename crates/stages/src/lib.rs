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

pub use repro_pipeline::builtin_kind::BuiltinKind;

/// Every built-in stage kind, in [`BuiltinKind::ALL`]'s order.
pub fn registry() -> Vec<Box<dyn StageKind>> {
    BuiltinKind::ALL.into_iter().map(implementation).collect()
}

/// The implementation of a built-in kind.
fn implementation(kind: BuiltinKind) -> Box<dyn StageKind> {
    match kind {
        BuiltinKind::Cmd => Box::new(cmd::CmdKind),
        BuiltinKind::Build => Box::new(build::BuildStage::default()),
        BuiltinKind::Bench => Box::new(bench::BenchStage),
        BuiltinKind::Tune => Box::new(tune::TuneStage),
        BuiltinKind::Profile => Box::new(profile::Profile),
        BuiltinKind::Summarize => Box::new(summarize::Summarize),
    }
}

/// The built-in kinds, as the loader takes them.
pub fn kinds() -> Kinds {
    registry().into_iter().map(Arc::from).collect()
}

/// Read, parse and validate `file` with the built-in kinds.
pub fn load(file: &Path) -> Result<Project, LoadError> {
    repro_pipeline::load(file, &kinds())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enum and the registry name the same kinds, in the same order, and each name
    /// reads back as its kind.
    #[test]
    fn every_builtin_kind_is_registered_under_its_name() {
        let registered: Vec<&str> = registry().iter().map(|k| k.kind()).collect();
        assert_eq!(
            registered,
            ["cmd", "build", "bench", "tune", "profile", "summarize"]
        );
        for kind in BuiltinKind::ALL {
            assert_eq!(implementation(kind).kind(), kind.as_str());
            assert_eq!(BuiltinKind::named(kind.as_str()), Some(kind));
        }
        assert_eq!(BuiltinKind::named("tunes"), None);
    }

    pub(crate) mod calls;
    mod decoded_once;
    mod loading;
    mod workload_errors;
}
