//! Everything that talks to the GPU (through cudarc). The engine never calls in here
//! directly: GPU work runs in `repro exec` child processes.

pub mod exec;
