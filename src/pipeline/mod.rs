//! `pipeline.yaml`: its typed shape ([`spec`]), loading with file:line:column errors
//! ([`load`](mod@load), [`diag`], [`spans`]), validation ([`validate`], [`paths`]; the load's scan remembered by [`scan_cache`]) and the stage
//! graph ([`dag`]).

pub mod dag;
pub mod diag;
pub mod load;
pub mod output_index;
pub mod param_value;
pub mod parse_cache;
pub mod paths;
pub mod scan_cache;
pub mod spans;
pub mod spec;
pub mod validate;

pub use load::{load, LoadError, Project, Stage};
pub use spec::*;
