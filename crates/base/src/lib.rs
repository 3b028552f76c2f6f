//! Leaf utilities every layer of repro shares: summary statistics of timing samples
//! ([`stats`]), tool probes ([`tools`]), reading a cubin's ELF ([`elf`]), GPU architecture
//! names ([`arch`]), file operations whose errors name their path ([`fsio`]) and the errors
//! the command line maps to exit codes ([`errors`]). It depends on no other repro crate.

pub mod arch;
pub mod elf;
pub mod errors;
pub mod fsio;
pub mod stats;
pub mod tools;
