//! The workload layer's GPU side: a device's launch limits, read from the driver, are
//! CUDA's architectural limits plus its shared memory (what a declared launch is checked
//! against where a GPU is present). Needs a GPU and REPRO_GPU_TESTS=1.

mod common;

use repro::workload::limits::Limits;

#[test]
fn a_gpu_reports_cudas_launch_limits_and_its_shared_memory() {
    if !common::gpu_tests_enabled("a_gpu_reports_cudas_launch_limits_and_its_shared_memory") {
        return;
    }
    let limits = repro::gpu::limits::of_device(0).expect("GPU 0 answers");
    let arch = Limits::ARCHITECTURAL;
    assert_eq!(
        (
            limits.max_grid,
            limits.max_block,
            limits.max_threads_per_block
        ),
        (arch.max_grid, arch.max_block, arch.max_threads_per_block)
    );
    // 48 KiB without the opt-in on every GPU; 99 KiB (sm_89) to 227 KiB (sm_90) with it.
    assert!(limits
        .max_dynamic_smem
        .is_some_and(|s| (99 * 1024..=228 * 1024).contains(&s)));
}
