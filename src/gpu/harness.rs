//! One kernel on one device: load it and the reference, run both on the same inputs,
//! measure the error, and time the kernel.
//!
//! The kernel ABI (TEAM.md): `sdpa_fp8_fwd(const __half* Q, const uint8_t* K,
//! const uint8_t* V, const float* k_scale, const float* v_scale, __half* O, int B, int H,
//! int S, float softmax_scale)` with the launch geometry in the cubin's
//! `repro_block_threads`, `repro_rows_per_block`, `repro_dynamic_smem_bytes` and
//! `repro_head_dim` globals; grid `(⌈S/rows_per_block⌉, H, B)`. The reference
//! `sdpa_reference_f32(..., float* O, int B, int H, int S, int D, float softmax_scale)`
//! runs 128 threads per block on `⌈B·H·S/128⌉` blocks.

use super::check::Accuracy;
use super::driver::{Context, DeviceBuffer, Function, LaunchDims, Module, Stream};
use super::timing::{self, PairTiming, Timing, TimingConfig};
use super::workload::Inputs;
use anyhow::{bail, Context as _};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use half::f16;
use serde::Serialize;
use std::ffi::c_void;
use std::path::Path;

/// The launch geometry a kernel cubin declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Geometry {
    pub block_threads: u32,
    pub rows_per_block: u32,
    pub dynamic_smem_bytes: u32,
    pub head_dim: u32,
}

const GEOMETRY_GLOBALS: [&str; 4] = [
    "repro_block_threads",
    "repro_rows_per_block",
    "repro_dynamic_smem_bytes",
    "repro_head_dim",
];

/// fp16 NaN with all mantissa bits set: what an unwritten output element reads as.
const POISON_F16: u16 = 0x7FFF;
/// fp32 NaN, likewise.
const POISON_F32: u32 = 0x7FFF_FFFF;
/// Threads per block of the reference kernel.
const REFERENCE_THREADS: u32 = 128;

/// A kernel loaded and ready to launch.
pub struct Kernel {
    _module: Module,
    function: Function,
    pub geometry: Geometry,
}

impl Kernel {
    /// Load `entry` from `cubin` and read its geometry globals.
    pub fn load(cubin: &Path, entry: &str, max_dynamic_smem: u32) -> anyhow::Result<Kernel> {
        Kernel::from_module(Module::load(cubin)?, cubin, entry, max_dynamic_smem)
    }

    /// [`Kernel::load`] from the bytes already read from `cubin`.
    pub fn from_file_bytes(
        cubin: &Path,
        image: Vec<u8>,
        entry: &str,
        max_dynamic_smem: u32,
    ) -> anyhow::Result<Kernel> {
        let module = Module::from_file_bytes(cubin, image)?;
        Kernel::from_module(module, cubin, entry, max_dynamic_smem)
    }

    fn from_module(
        module: Module,
        cubin: &Path,
        entry: &str,
        max_dynamic_smem: u32,
    ) -> anyhow::Result<Kernel> {
        let function = module.function(entry)?;
        let mut values = [0u32; 4];
        for (value, name) in values.iter_mut().zip(GEOMETRY_GLOBALS) {
            let v = module.global_i32(name)?.with_context(|| {
                format!(
                    "{} does not export `{name}`: the kernel must define \
                     `extern \"C\" __device__ const int {name} = ...;`",
                    cubin.display()
                )
            })?;
            if v < 0 || (v == 0 && name != "repro_dynamic_smem_bytes") {
                bail!(
                    "{}: `{name}` is {v}; expected a positive value",
                    cubin.display()
                );
            }
            *value = v as u32;
        }
        let geometry = Geometry {
            block_threads: values[0],
            rows_per_block: values[1],
            dynamic_smem_bytes: values[2],
            head_dim: values[3],
        };
        if geometry.dynamic_smem_bytes > 48 * 1024 {
            if geometry.dynamic_smem_bytes > max_dynamic_smem {
                bail!(
                    "{} asks for {} bytes of dynamic shared memory; this GPU allows {} per block",
                    cubin.display(),
                    geometry.dynamic_smem_bytes,
                    max_dynamic_smem
                );
            }
            function.set_max_dynamic_smem(geometry.dynamic_smem_bytes)?;
        }
        Ok(Kernel {
            _module: module,
            function,
            geometry,
        })
    }
}

/// The reference kernel, loaded.
pub struct Reference {
    _module: Module,
    function: Function,
}

impl Reference {
    pub fn load(cubin: &Path, entry: &str) -> anyhow::Result<Reference> {
        Reference::from_module(Module::load(cubin)?, entry)
    }

    /// [`Reference::load`] from the bytes already read from `cubin`.
    pub fn from_file_bytes(cubin: &Path, image: Vec<u8>, entry: &str) -> anyhow::Result<Reference> {
        Reference::from_module(Module::from_file_bytes(cubin, image)?, entry)
    }

    fn from_module(module: Module, entry: &str) -> anyhow::Result<Reference> {
        let function = module.function(entry)?;
        Ok(Reference {
            _module: module,
            function,
        })
    }
}

/// The function's resource usage as the driver reports it (`repro exec --attributes`).
#[derive(Debug, Clone, Serialize)]
pub struct Attributes {
    pub entry: String,
    pub registers: i32,
    pub static_smem_bytes: i32,
    pub local_bytes: i32,
    pub const_bytes: i32,
    pub max_threads_per_block: i32,
    pub binary_version: i32,
}

pub fn attributes(cubin: &Path, entry: &str) -> anyhow::Result<Attributes> {
    let module = Module::load(cubin)?;
    let f = module.function(entry)?;
    use CUfunction_attribute as A;
    Ok(Attributes {
        entry: entry.to_string(),
        registers: f.attribute(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        static_smem_bytes: f.attribute(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        local_bytes: f.attribute(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
        const_bytes: f.attribute(A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
        max_threads_per_block: f.attribute(A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        binary_version: f.attribute(A::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
    })
}

/// Device copies of one (shape, seed)'s inputs and the output buffers.
pub struct DeviceInputs {
    q: DeviceBuffer,
    k: DeviceBuffer,
    v: DeviceBuffer,
    k_scale: DeviceBuffer,
    v_scale: DeviceBuffer,
    /// The kernel's fp16 output.
    o: DeviceBuffer,
    /// The reference's fp32 output.
    o_ref: DeviceBuffer,
    b: i32,
    h: i32,
    s: i32,
    d: i32,
    softmax_scale: f32,
}

impl DeviceInputs {
    pub fn upload(inputs: &Inputs) -> anyhow::Result<DeviceInputs> {
        let shape = inputs.shape;
        let n = shape.numel();
        Ok(DeviceInputs {
            q: DeviceBuffer::from_slice(&inputs.q)?,
            k: DeviceBuffer::from_slice(&inputs.k)?,
            v: DeviceBuffer::from_slice(&inputs.v)?,
            k_scale: DeviceBuffer::from_slice(&inputs.k_scale)?,
            v_scale: DeviceBuffer::from_slice(&inputs.v_scale)?,
            o: DeviceBuffer::alloc(n * 2)?,
            o_ref: DeviceBuffer::alloc(n * 4)?,
            b: shape.B as i32,
            h: shape.H as i32,
            s: shape.S as i32,
            d: shape.D as i32,
            softmax_scale: shape.softmax_scale(),
        })
    }

    fn numel(&self) -> usize {
        (self.b * self.h * self.s * self.d) as usize
    }
}

/// A device with a stream, ready to run kernels.
pub struct Session {
    // Fields drop in order: the stream must go before the context is released.
    stream: Stream,
    ctx: Context,
    pub l2_bytes: usize,
    pub max_dynamic_smem: u32,
}

impl Session {
    pub fn open(device: u32) -> anyhow::Result<Session> {
        super::driver::init()?;
        let count = super::driver::device_count()?;
        if device >= count {
            bail!("--device {device}: only {count} GPU(s) visible (indices 0..{count})");
        }
        let dev = super::driver::Device::get(device)?;
        let ctx = Context::new(dev)?;
        let l2 = dev.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
        let smem = dev
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?;
        Ok(Session {
            stream: Stream::new()?,
            ctx,
            l2_bytes: l2.max(0) as usize,
            max_dynamic_smem: smem.max(0) as u32,
        })
    }

    /// Whether the context still works after a failed run. A sticky error (an illegal
    /// address, a trap, a launch failure) poisons it for good: every call fails after it.
    pub fn usable(&self) -> bool {
        self.ctx.synchronize().is_ok()
    }

    /// Run the reference into `io.o_ref` (poisoned first) and return it as f64.
    pub fn run_reference(
        &self,
        reference: &Reference,
        io: &DeviceInputs,
    ) -> anyhow::Result<Vec<f64>> {
        io.o_ref.fill_u32(POISON_F32, &self.stream)?;
        let blocks = (io.numel() as u32).div_ceil(REFERENCE_THREADS);
        let dims = LaunchDims {
            grid: (blocks, 1, 1),
            block: REFERENCE_THREADS,
            dynamic_smem: 0,
        };
        let (mut q, mut k, mut v) = (io.q.ptr, io.k.ptr, io.v.ptr);
        let (mut ks, mut vs, mut o) = (io.k_scale.ptr, io.v_scale.ptr, io.o_ref.ptr);
        let (mut b, mut h, mut s, mut d, mut scale) = (io.b, io.h, io.s, io.d, io.softmax_scale);
        let mut params: [*mut c_void; 11] = [
            ptr(&mut q),
            ptr(&mut k),
            ptr(&mut v),
            ptr(&mut ks),
            ptr(&mut vs),
            ptr(&mut o),
            ptr(&mut b),
            ptr(&mut h),
            ptr(&mut s),
            ptr(&mut d),
            ptr(&mut scale),
        ];
        // SAFETY: the parameters match the reference ABI; buffers outlive the sync below.
        unsafe { reference.function.launch(dims, &self.stream, &mut params) }
            .context("launching the reference kernel")?;
        self.stream
            .synchronize()
            .context("running the reference kernel")?;
        let mut out = vec![0f32; io.numel()];
        io.o_ref.copy_to(&mut out)?;
        if let Some(i) = out.iter().position(|x| !x.is_finite()) {
            bail!("the reference kernel left output element {i} non-finite ({}); rebuild reference.cubin", out[i]);
        }
        Ok(out.into_iter().map(f64::from).collect())
    }

    fn kernel_dims(kernel: &Kernel, io: &DeviceInputs) -> LaunchDims {
        let g = kernel.geometry;
        LaunchDims {
            grid: (
                (io.s as u32).div_ceil(g.rows_per_block),
                io.h as u32,
                io.b as u32,
            ),
            block: g.block_threads,
            dynamic_smem: g.dynamic_smem_bytes,
        }
    }

    /// Enqueue one launch of `kernel` on `stream`.
    fn launch(
        kernel: &Kernel,
        io: &DeviceInputs,
        stream: &Stream,
    ) -> Result<(), super::driver::CudaError> {
        let dims = Self::kernel_dims(kernel, io);
        let (mut q, mut k, mut v) = (io.q.ptr, io.k.ptr, io.v.ptr);
        let (mut ks, mut vs, mut o) = (io.k_scale.ptr, io.v_scale.ptr, io.o.ptr);
        let (mut b, mut h, mut s, mut scale) = (io.b, io.h, io.s, io.softmax_scale);
        let mut params: [*mut c_void; 10] = [
            ptr(&mut q),
            ptr(&mut k),
            ptr(&mut v),
            ptr(&mut ks),
            ptr(&mut vs),
            ptr(&mut o),
            ptr(&mut b),
            ptr(&mut h),
            ptr(&mut s),
            ptr(&mut scale),
        ];
        // SAFETY: the parameters match the kernel ABI; the driver copies them at launch,
        // and the buffers live in `io`, which outlives every launch and synchronize.
        unsafe { kernel.function.launch(dims, stream, &mut params) }
    }

    /// Poison O, run the kernel once, and compare with `reference`.
    pub fn check(
        &self,
        kernel: &Kernel,
        io: &DeviceInputs,
        reference: &[f64],
        threshold: f64,
    ) -> anyhow::Result<Accuracy> {
        if kernel.geometry.head_dim != io.d as u32 {
            bail!(
                "the cubin is compiled for head dim {} but the shape has D = {}",
                kernel.geometry.head_dim,
                io.d
            );
        }
        io.o.fill_u16(POISON_F16, &self.stream)?;
        Self::launch(kernel, io, &self.stream).context("launching the kernel")?;
        self.stream.synchronize().context("running the kernel")?;
        let mut out = vec![f16::ZERO; io.numel()];
        io.o.copy_to(&mut out)?;
        let out: Vec<f64> = out.iter().map(|x| x.to_f64()).collect();
        let dims = (io.s as usize, io.d as usize);
        Ok(Accuracy::measure(&out, reference, threshold, dims))
    }

    pub fn time(
        &self,
        kernel: &Kernel,
        io: &DeviceInputs,
        cfg: &TimingConfig,
    ) -> anyhow::Result<Timing> {
        let launch = |s: &Stream| Self::launch(kernel, io, s);
        timing::time_kernel(&self.stream, &launch, cfg, self.l2_bytes).context("timing the kernel")
    }

    /// Time `a` and `b` on the same inputs, interleaved ([`timing::time_interleaved`]).
    pub fn time_pair(
        &self,
        a: &Kernel,
        b: &Kernel,
        io: &DeviceInputs,
        cfg: &TimingConfig,
    ) -> anyhow::Result<PairTiming> {
        let launch_a = |s: &Stream| Self::launch(a, io, s);
        let launch_b = |s: &Stream| Self::launch(b, io, s);
        timing::time_interleaved(&self.stream, &launch_a, &launch_b, cfg, self.l2_bytes)
            .context("timing the two kernels")
    }
}

fn ptr<T>(x: &mut T) -> *mut c_void {
    x as *mut T as *mut c_void
}
