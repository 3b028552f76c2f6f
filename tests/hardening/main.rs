//! The classes of failure of a third hostile drill of the engine (issue 29): the cache must
//! never be fooled, and nothing outside the project is touched. Each test ran the real
//! binary and failed before its fix; the pipeline-file cases are in `tests/bad_pipelines/`
//! (`dep_whole_project`, `dep_empty`, `env_reserved`, `alias_bomb`, `param_env_clash`,
//! `run_empty_program`, `output_under_lock`). docs/RELIABILITY.md lists them.
//!
//! The `round4_` tests are issue 39's classes (A: an earlier fix that missed a path, B:
//! panics at the process level, E: symlinks among the results, H: a stage that calls repro).

mod fingerprint;
mod outputs;
mod runs;
mod state;

#[path = "../support/project.rs"]
mod project;
#[path = "../support/skip.rs"]
mod skip;

use project::{assert_gone, Project};
use std::path::Path;
use std::time::Duration;
