//! The built-in stage kinds, one module each. [`registry`] is the table the engine looks
//! kinds up in.

use crate::engine::StageKind;

pub mod bench;
pub mod build;
pub mod cmd;
pub mod gpu_nodes;
pub mod options;
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

/// Look a kind up by its `uses:` name.
pub fn find(kind: &str) -> Option<Box<dyn StageKind>> {
    registry().into_iter().find(|k| k.kind() == kind)
}
