//! The built-in stage kinds, one module each. [`registry`] is the table the engine looks
//! kinds up in.

use crate::engine::StageKind;

pub mod bench;
pub mod build;
pub mod cmd;
pub mod gpu_nodes;
mod kind;
pub mod options;
pub mod profile;
pub mod reuse;
pub mod slots;
pub mod summarize;
pub mod tune;

pub use kind::BuiltinKind;

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

/// Look a kind up by its `uses:` name.
pub fn find(kind: &str) -> Option<Box<dyn StageKind>> {
    registry().into_iter().find(|k| k.kind() == kind)
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
}
