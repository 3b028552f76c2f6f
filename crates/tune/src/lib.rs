//! The autotuner behind the `tune` stage kind: a search space declared in pipeline.yaml
//! ([`space`], with constraints and conditions in the [`expr`] language), a seeded
//! evolutionary search over it ([`search`]) that calls an [`search::Objective`] one
//! generation at a time, and a memo of finished trials ([`memo`]) so an interrupted tune
//! resumes and a larger budget continues. The stage that wires the search to the compiler
//! and the GPU is `stages::tune`.
//!
//! It depends only on `repro-gpu`, `repro-pipeline`, `repro-executor`, `repro-schema`,
//! `repro-expr` and `repro-base`; the stage that wires it to the compiler and the GPU is
//! `repro_stages::tune`.

pub mod archs;
pub mod memo;
pub mod options;
pub mod promote;
pub mod proposer;
pub mod search;
pub mod space;
pub mod start;
