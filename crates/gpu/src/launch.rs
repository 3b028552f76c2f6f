//! A case of a declared workload on the device: every buffer argument uploaded (inputs) or
//! allocated (outputs), scalars as the bytes the kernel takes by value, and the parameter
//! list in the order a kernel's signature wants them: the workload's `args` for its kernels,
//! `reference.args` for a reference kernel. Outputs get their dtype's sentinel before each
//! checked launch ([`DeviceCase::poison`]), so an element nothing wrote reads as NaN.

use super::driver::{CudaError, DeviceBuffer, LaunchDims};
use repro_pipeline::workload::dtype::Dtype;
use repro_pipeline::workload::problem::Problem;
use repro_pipeline::{workload::exprs::Compiled, workload::exprs::Geometry};
use repro_pipeline::{workload::inputs::ArgData, workload::inputs::Case};
use repro_pipeline::{workload::spec::Declaration, workload::spec::RefArg};
use std::ffi::c_void;

/// One kernel parameter: a workload argument (a buffer's device pointer or a scalar's
/// value), or a value of the reference's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Arg(usize),
    Value(u64),
}

/// Parameter values, each held in 8 bytes (a pointer, or a scalar's little-endian bytes
/// padded with zeros: the driver reads as many as the parameter is wide).
pub struct Params {
    values: Vec<u64>,
}

impl Params {
    /// One pointer per value, as `cuLaunchKernel` takes them; valid while `self` lives.
    pub fn pointers(&self) -> Vec<*mut c_void> {
        self.values
            .iter()
            .map(|v| v as *const u64 as *mut c_void)
            .collect()
    }
}

/// A scalar's bytes (at most 8) as the 8-byte slot [`Params`] holds.
pub fn slot(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// The workload's kernels take its `args`, in order.
pub fn kernel_order(decl: &Declaration) -> Vec<Param> {
    (0..decl.args.len()).map(Param::Arg).collect()
}

/// The reference kernel's parameters for `case`: its `reference.args` (names of the
/// workload's arguments and scalars of its own), else the workload's.
pub fn reference_order(c: &Compiled, case: &Case) -> Result<Vec<Param>, Problem> {
    let Some(list) = &c.decl.reference.args else {
        return Ok(kernel_order(c.decl));
    };
    let what = format!("shape `{}`", case.shape);
    list.iter()
        .enumerate()
        .map(|(i, a)| match a {
            RefArg::Name(n) => Ok(Param::Arg(
                c.decl.arg(n).expect("a declared argument (validated)").0,
            )),
            RefArg::Extra(arg) => {
                let value = c.reference_scalar(i, &case.dims, &what)?;
                let bytes = repro_pipeline::workload::inputs::scalar_bytes(arg.dtype, value);
                Ok(Param::Value(slot(&bytes)))
            }
        })
        .collect()
}

/// A launch geometry as the driver takes it (checked against the device's limits, so
/// every extent fits).
pub fn launch_dims(g: &Geometry) -> LaunchDims {
    let u = |v: i64| u32::try_from(v).unwrap_or(u32::MAX);
    LaunchDims {
        grid: (u(g.grid[0]), u(g.grid[1]), u(g.grid[2])),
        block: (u(g.block[0]), u(g.block[1]), u(g.block[2])),
        dynamic_smem: u(g.smem),
    }
}

/// One output buffer: its argument, the dtype it is written in, its elements.
struct Output {
    arg: usize,
    dtype: Dtype,
    numel: usize,
}

/// A case's buffers on the device.
pub struct DeviceCase {
    /// Per argument: its buffer (`None` for a scalar).
    buffers: Vec<Option<DeviceBuffer>>,
    /// Per argument: a scalar's value slot (0 for a buffer).
    scalars: Vec<u64>,
    outputs: Vec<Output>,
}

impl DeviceCase {
    /// Upload `case` of `decl`; each output is allocated in the dtype `written_as` gives
    /// (its own for a kernel, `reference.outputs` for the reference).
    pub fn upload(
        decl: &Declaration,
        case: &Case,
        written_as: impl Fn(usize) -> Dtype,
    ) -> Result<DeviceCase, CudaError> {
        let mut buffers = Vec::with_capacity(case.args.len());
        let mut scalars = Vec::with_capacity(case.args.len());
        let mut outputs = Vec::new();
        for (i, data) in case.args.iter().enumerate() {
            match data {
                ArgData::Input { bytes, .. } => {
                    buffers.push(Some(DeviceBuffer::from_slice(bytes)?));
                    scalars.push(0);
                }
                ArgData::Output { .. } => {
                    let dtype = written_as(i);
                    let numel = data.numel();
                    buffers.push(Some(DeviceBuffer::alloc(numel * dtype.size())?));
                    scalars.push(0);
                    outputs.push(Output {
                        arg: i,
                        dtype,
                        numel,
                    });
                }
                ArgData::Scalar { bytes, .. } => {
                    buffers.push(None);
                    scalars.push(slot(bytes));
                }
            }
        }
        debug_assert_eq!(buffers.len(), decl.args.len());
        Ok(DeviceCase {
            buffers,
            scalars,
            outputs,
        })
    }

    /// The parameter values for `order`.
    pub fn params(&self, order: &[Param]) -> Params {
        let values = order
            .iter()
            .map(|p| match *p {
                Param::Arg(i) => self.buffers[i]
                    .as_ref()
                    .map_or(self.scalars[i], |b| b.ptr()),
                Param::Value(v) => v,
            })
            .collect();
        Params { values }
    }

    /// Fill every output with its dtype's sentinel.
    pub fn poison(&self) -> Result<(), CudaError> {
        for o in &self.outputs {
            let buffer = self.buffers[o.arg]
                .as_ref()
                .expect("an output has a buffer");
            buffer.write(&o.dtype.sentinel_fill(o.numel))?;
        }
        Ok(())
    }

    /// Every output's bytes, in ABI order.
    pub fn read_outputs(&self) -> Result<Vec<Vec<u8>>, CudaError> {
        self.outputs
            .iter()
            .map(|o| {
                let buffer = self.buffers[o.arg]
                    .as_ref()
                    .expect("an output has a buffer");
                let mut bytes = vec![0u8; buffer.bytes()];
                buffer.copy_to(&mut bytes)?;
                Ok(bytes)
            })
            .collect()
    }

    /// The dtype each output was written in, in ABI order.
    pub fn output_dtypes(&self) -> Vec<Dtype> {
        self.outputs.iter().map(|o| o.dtype).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_fill_the_low_bytes_of_their_slot() {
        assert_eq!(slot(&7i32.to_le_bytes()), 7);
        assert_eq!(slot(&(-1i32).to_le_bytes()), 0xFFFF_FFFF);
        let eps = slot(&1e-6f32.to_le_bytes());
        assert_eq!(f32::from_le_bytes((eps as u32).to_le_bytes()), 1e-6);
        assert_eq!(slot(&[]), 0);
    }

    #[test]
    fn a_geometry_becomes_the_drivers_dims() {
        let g = Geometry {
            grid: [9, 1, 2],
            block: [512, 1, 1],
            smem: 4096,
        };
        assert_eq!(
            launch_dims(&g),
            LaunchDims {
                grid: (9, 1, 2),
                block: (512, 1, 1),
                dynamic_smem: 4096
            }
        );
    }
}
