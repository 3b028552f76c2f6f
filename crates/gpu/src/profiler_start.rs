//! One profiled launch of an empty kernel: what a GPU worker started under a profiler does
//! first when asked (`repro exec --worker --start-profiler`), before it reads a request.
//!
//! ncu sets up its profiling of a process at that process's first profiled launch, about
//! 0.65 s on an H200 whatever the kernel, and lets one process's profiler window run at a
//! time: a launch to be profiled in another process waits until that window has closed and
//! its process has gone on (`benches/results/ncu_session_h200.md`). So a worker started while
//! another pass profiles starts CUDA and has ncu set up meanwhile, its empty launch profiled
//! between that pass's windows, and is ready when its requests come. The launch is a row of
//! its own in ncu's output, under [`ENTRY`], which the profile stage leaves out.

use super::driver::{LaunchDims, Module, ProfilerWindow, Stream};
use anyhow::Context as _;

/// The empty kernel's name, as ncu lists it.
pub const ENTRY: &str = "repro_profiler_start";

/// `repro_profiler_start()`: returns at once. PTX, which the driver compiles for any GPU.
const PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry repro_profiler_start()
{
    ret;
}
"#;

/// Launch the empty kernel once on `stream` inside a profiler window, and wait for it.
pub fn profile_empty_launch(stream: &Stream) -> anyhow::Result<()> {
    let module = Module::from_ptx(PTX).context("loading the empty kernel's PTX")?;
    let function = module.function(ENTRY)?;
    let dims = LaunchDims {
        grid: (1, 1, 1),
        block: (1, 1, 1),
        dynamic_smem: 0,
    };
    let _window = ProfilerWindow::open()?;
    // SAFETY: the kernel takes no parameters and touches no memory.
    unsafe { function.launch(dims, stream, &mut []) }.context("launching the empty kernel")?;
    stream.synchronize().context("running the empty kernel")?;
    Ok(())
}
