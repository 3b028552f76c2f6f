//! A GPU's launch limits, from the driver: what `repro_pipeline::workload::limits` checks a
//! declared launch against where a GPU is present.

use super::driver::{self, CudaError, Device};
use cudarc::driver::sys::CUdevice_attribute as A;
use repro_pipeline::workload::limits::Limits;

/// The limits of GPU `index` (grid and block extents, threads per block, and the dynamic
/// shared memory a block may opt in to).
pub fn of_device(index: u32) -> Result<Limits, CudaError> {
    driver::init()?;
    let dev = Device::get(index)?;
    let get = |a| dev.attribute(a).map(i64::from);
    Ok(Limits {
        max_grid: [
            get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            get(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_block: [
            get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            get(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_threads_per_block: get(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_dynamic_smem: Some(get(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?),
    })
}
