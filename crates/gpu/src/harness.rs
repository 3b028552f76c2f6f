//! One kernel on one device: a session with a stream, kernels loaded with the globals their
//! workload's launch reads, one checked launch (outputs filled with their sentinel first,
//! read back after), and timing. What the arguments are and how a launch is shaped come
//! from the workload's declaration ([`super::launch`]).

use super::driver::{Context, Function, LaunchDims, Module, ProfilerWindow, Stream};
use super::launch::{DeviceCase, Params};
use super::timing::{self, PairTiming, Timing, TimingConfig};
use anyhow::{bail, Context as _};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::limits::Limits;
use serde::Serialize;
use std::path::Path;

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_DYNAMIC_SMEM: u32 = 48 * 1024;

/// A kernel loaded and ready to launch.
pub struct Kernel {
    _module: Module,
    function: Function,
    /// The `extern "C" __device__ const int` globals its workload's launch reads.
    pub globals: Bindings,
}

impl Kernel {
    /// Load `entry` from `cubin` and read `globals` from it.
    pub fn load(cubin: &Path, entry: &str, globals: &[String]) -> anyhow::Result<Kernel> {
        Kernel::from_module(Module::load(cubin)?, cubin, entry, globals)
    }

    /// [`Kernel::load`] from the bytes already read from `cubin`.
    pub fn from_file_bytes(
        cubin: &Path,
        image: Vec<u8>,
        entry: &str,
        globals: &[String],
    ) -> anyhow::Result<Kernel> {
        let module = Module::from_file_bytes(cubin, image)?;
        Kernel::from_module(module, cubin, entry, globals)
    }

    fn from_module(
        module: Module,
        cubin: &Path,
        entry: &str,
        globals: &[String],
    ) -> anyhow::Result<Kernel> {
        let function = module.function(entry)?;
        let mut values = Bindings::new();
        for name in globals {
            let v = module.global_i32(name)?.with_context(|| {
                format!(
                    "{} does not export `{name}`, which the workload's launch reads: the kernel must define \
                     `extern \"C\" __device__ const int {name} = ...;`",
                    cubin.display()
                )
            })?;
            values.insert(name.clone(), i64::from(v));
        }
        Ok(Kernel {
            _module: module,
            function,
            globals: values,
        })
    }
}

/// One launch: the kernel, its geometry and its parameter values.
pub struct Launch<'a> {
    pub kernel: &'a Kernel,
    pub dims: LaunchDims,
    pub params: &'a Params,
}

impl Launch<'_> {
    /// Enqueue it on `stream`.
    fn enqueue(&self, stream: &Stream) -> Result<(), super::driver::CudaError> {
        let mut params = self.params.pointers();
        // SAFETY: one 8-byte slot per declared parameter, in the declaration's order
        // (`Params`), read by the driver during the call. That this matches the kernel's
        // signature is what the build's ABI gate (`stages::build::abi`) checks against the
        // cubin; `repro exec` does not check it again, so a cubin that does not match its
        // declaration is trusted here. The buffers live in the `DeviceCase` the parameters
        // came from, which outlives every launch, graph replay and wait of this kernel.
        unsafe { self.kernel.function.launch(self.dims, stream, &mut params) }
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

/// A device with a stream, ready to run kernels.
pub struct Session {
    // Fields drop in order: the stream must go before the context is released.
    stream: Stream,
    ctx: Context,
    pub l2_bytes: usize,
    /// What a launch on this device may ask for.
    pub limits: Limits,
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
        Ok(Session {
            stream: Stream::new()?,
            ctx,
            l2_bytes: l2.max(0) as usize,
            limits: super::limits::of_device(device)?,
        })
    }

    /// Whether the context still works after a failed run. A sticky error (an illegal
    /// address, a trap, a launch failure) poisons it for good: every call fails after it.
    pub fn usable(&self) -> bool {
        self.ctx.synchronize().is_ok()
    }

    /// Opt `l`'s kernel in to the dynamic shared memory it asks for, above the default.
    fn allow_smem(&self, l: &Launch) -> anyhow::Result<()> {
        if l.dims.dynamic_smem > DEFAULT_DYNAMIC_SMEM {
            l.kernel
                .function
                .set_max_dynamic_smem(l.dims.dynamic_smem)?;
        }
        Ok(())
    }

    /// Fill `case`'s outputs with their sentinel, launch `l` once, wait, and read the
    /// outputs back (raw bytes, in ABI order).
    pub fn run_checked(&self, l: &Launch, case: &DeviceCase) -> anyhow::Result<Vec<Vec<u8>>> {
        self.allow_smem(l)?;
        case.poison()?;
        l.enqueue(&self.stream).context("launching the kernel")?;
        self.stream.synchronize().context("running the kernel")?;
        Ok(case.read_outputs()?)
    }

    pub fn time(&self, l: &Launch, cfg: &TimingConfig) -> anyhow::Result<Timing> {
        self.allow_smem(l)?;
        let launch = |s: &Stream| l.enqueue(s);
        timing::time_kernel(&self.stream, &launch, cfg, self.l2_bytes).context("timing the kernel")
    }

    /// Launch `l` `warmup` times, then `launches` times inside a [`ProfilerWindow`], each
    /// waited for: what a profiler started with profiling off profiles, and nothing else.
    pub fn profile(&self, l: &Launch, warmup: u32, launches: u32) -> anyhow::Result<()> {
        self.allow_smem(l)?;
        for _ in 0..warmup {
            l.enqueue(&self.stream).context("launching the kernel")?;
        }
        self.stream.synchronize().context("running the kernel")?;
        let _window = ProfilerWindow::open()?;
        for _ in 0..launches {
            l.enqueue(&self.stream).context("launching the kernel")?;
            self.stream.synchronize().context("running the kernel")?;
        }
        Ok(())
    }

    /// Time `a` and `b`, interleaved ([`timing::time_interleaved`]).
    pub fn time_pair(
        &self,
        a: &Launch,
        b: &Launch,
        cfg: &TimingConfig,
    ) -> anyhow::Result<PairTiming> {
        self.allow_smem(a)?;
        self.allow_smem(b)?;
        let launch_a = |s: &Stream| a.enqueue(s);
        let launch_b = |s: &Stream| b.enqueue(s);
        timing::time_interleaved(&self.stream, &launch_a, &launch_b, cfg, self.l2_bytes)
            .context("timing the two kernels")
    }
}
