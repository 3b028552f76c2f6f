//! Errors that more than one layer raises and the command line maps to an exit code.

/// A request that names something that does not exist: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
