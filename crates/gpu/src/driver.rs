//! Thin RAII handles over the CUDA driver API (cudarc's `sys` layer, loaded dynamically).
//!
//! Every call goes through [`check`], which turns a `CUresult` into an error naming the
//! driver call, the error code and the driver's own description, e.g.
//! `cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was
//! encountered)`. Nothing here may be called before [`super::driver_library_loads`] said
//! the driver library exists: cudarc panics when it cannot load `libcuda`.
//!
//! Soundness: each handle type owns one driver object, made by its constructor and
//! destroyed once by its `Drop`; the fields its safe methods trust are private, so no
//! other code can forge or alias one (`MappedWords::device_ptr` is public only to be
//! passed to a kernel, which an unsafe launch vouches for). Two lifetimes are kept by the
//! holders, not by the types: the objects of a context (streams, events, modules, buffers,
//! mapped words) are dropped before the [`Context`] is released (`harness::Session` and
//! `warm::Warm` order their fields so), and a [`Function`] is used only while its
//! [`Module`] is loaded (`harness::Kernel` and `blocker::Blocker` keep the module beside
//! it).

use anyhow::{bail, Context as _};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::mem::MaybeUninit;
use std::path::Path;

/// A failed driver call, with the call's name.
#[derive(Debug, thiserror::Error)]
#[error("{call} failed: {name} ({description})")]
pub struct CudaError {
    pub call: &'static str,
    pub name: String,
    pub description: String,
}

/// Turn a `CUresult` into `Ok(())` or a [`CudaError`] naming `call`.
pub fn check(call: &'static str, result: sys::CUresult) -> Result<(), CudaError> {
    match result.result() {
        Ok(()) => Ok(()),
        Err(err) => Err(describe(call, err)),
    }
}

fn describe(call: &'static str, err: DriverError) -> CudaError {
    let name = err
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("CUresult {}", err.0 as u32));
    let description = err
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "no description from the driver".into());
    CudaError {
        call,
        name,
        description,
    }
}

/// `cuInit(0)`.
pub fn init() -> Result<(), CudaError> {
    // SAFETY: cuInit takes only a flags word, and 0 is the one valid value.
    check("cuInit", unsafe { sys::cuInit(0) })
}

/// The CUDA version the driver supports, e.g. `13.0`.
pub fn driver_cuda_version() -> Result<String, CudaError> {
    let mut v = 0;
    // SAFETY: `v` is a live, aligned c_int the driver writes one value to.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut v)
    })?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

pub fn device_count() -> Result<u32, CudaError> {
    let mut n = 0;
    // SAFETY: `n` is a live, aligned c_int the driver writes one value to.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n.max(0) as u32)
}

/// One device, by ordinal (after `CUDA_VISIBLE_DEVICES`).
#[derive(Debug, Clone, Copy)]
pub struct Device(sys::CUdevice);

impl Device {
    pub fn get(ordinal: u32) -> Result<Device, CudaError> {
        let mut dev = MaybeUninit::uninit();
        // SAFETY: `dev` is a writable out-pointer for one CUdevice; an ordinal out of range
        // is an error code, not a write.
        check("cuDeviceGet", unsafe {
            sys::cuDeviceGet(dev.as_mut_ptr(), ordinal as i32)
        })?;
        // SAFETY: cuDeviceGet succeeded (checked above), so it wrote `dev`.
        Ok(Device(unsafe { dev.assume_init() }))
    }

    pub fn name(&self) -> Result<String, CudaError> {
        let mut buf = [0 as std::ffi::c_char; 256];
        // SAFETY: the driver writes at most `buf.len()` chars (the length passed) into `buf`;
        // `self.0` came from a successful cuDeviceGet.
        check("cuDeviceGetName", unsafe {
            sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, self.0)
        })?;
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it.
    pub fn uuid(&self) -> Result<String, CudaError> {
        let mut uuid = MaybeUninit::<sys::CUuuid>::uninit();
        // SAFETY: `uuid` is a writable out-pointer for one 16-byte CUuuid.
        check("cuDeviceGetUuid", unsafe {
            sys::cuDeviceGetUuid_v2(uuid.as_mut_ptr(), self.0)
        })?;
        // SAFETY: the call succeeded, so all 16 bytes are written (any byte is a valid c_char).
        let b: Vec<u8> = unsafe { uuid.assume_init() }
            .bytes
            .iter()
            .map(|&c| c as u8)
            .collect();
        let h = repro_base::tools::hex(&b);
        Ok(format!(
            "GPU-{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        ))
    }

    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32, CudaError> {
        let mut v = 0;
        // SAFETY: `v` is a live, aligned c_int the driver writes one value to; `attr` is a
        // member of the driver's enum by its type.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(&mut v, attr, self.0)
        })?;
        Ok(v)
    }

    pub fn total_memory(&self) -> Result<u64, CudaError> {
        let mut bytes = 0usize;
        // SAFETY: `bytes` is a live, aligned size_t the driver writes one value to.
        check("cuDeviceTotalMem", unsafe {
            sys::cuDeviceTotalMem_v2(&mut bytes, self.0)
        })?;
        Ok(bytes as u64)
    }
}

/// The device's primary context, current on this thread while the value lives.
pub struct Context {
    device: Device,
    ctx: sys::CUcontext,
}

impl Context {
    pub fn new(device: Device) -> Result<Context, CudaError> {
        let mut ctx = MaybeUninit::uninit();
        // SAFETY: `ctx` is a writable out-pointer for one CUcontext.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(ctx.as_mut_ptr(), device.0)
        })?;
        let ctx = Context {
            device,
            // SAFETY: the retain succeeded (checked above), so it wrote `ctx`.
            ctx: unsafe { ctx.assume_init() },
        };
        // SAFETY: `ctx.ctx` is the primary context just retained; it stays retained until
        // `ctx` drops (and an error here drops it, releasing it).
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx.ctx) })?;
        Ok(ctx)
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: no arguments; it waits for this thread's current context.
        check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Errors here (after a fault the context is unusable) have already been reported.
        // SAFETY: gives back the one retain `new` took on this device's primary context;
        // `drop` runs once.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device.0) };
    }
}

/// A device allocation of `bytes` bytes. The fields are private: the copies below trust
/// `ptr` to be this allocation and `bytes` its size.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceBuffer {
    pub fn alloc(bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut ptr = 0;
        // SAFETY: `ptr` is a live, aligned out-pointer; at least one byte is asked for
        // (the driver refuses zero).
        check("cuMemAlloc", unsafe {
            sys::cuMemAlloc_v2(&mut ptr, bytes.max(1))
        })?;
        Ok(DeviceBuffer { ptr, bytes })
    }

    /// The device address, as a kernel parameter takes it.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// The size asked for.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// A new buffer holding a copy of `data`.
    pub fn from_slice(data: &[u8]) -> Result<DeviceBuffer, CudaError> {
        let buf = DeviceBuffer::alloc(data.len())?;
        // SAFETY: `buf` was just allocated with `data.len()` bytes, and `data` is readable
        // for as many; the driver has read (staged) all of `data` when the call returns.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(buf.ptr, data.as_ptr() as *const c_void, buf.bytes)
        })?;
        wait_for_host_copies()?;
        Ok(buf)
    }

    /// Copy the whole buffer into `out` (which must be exactly as large).
    pub fn copy_to(&self, out: &mut [u8]) -> Result<(), CudaError> {
        assert_eq!(out.len(), self.bytes, "host/device size mismatch");
        // SAFETY: `out` is writable for `self.bytes` bytes (asserted) and the buffer holds
        // as many; a copy into pageable memory returns only once it is complete, and any
        // bytes are valid `u8`s.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr() as *mut c_void, self.ptr, self.bytes)
        })
    }

    /// Overwrite the start of the buffer with `data` (waits for the copy).
    pub fn write(&self, data: &[u8]) -> Result<(), CudaError> {
        assert!(data.len() <= self.bytes, "more bytes than the buffer holds");
        // SAFETY: `data` fits in the buffer (asserted) and is readable for its length until
        // the call returns, by when the driver has staged it.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(self.ptr, data.as_ptr() as *const c_void, data.len())
        })?;
        wait_for_host_copies()
    }

    /// Fill with a repeated 16-bit pattern (e.g. an fp16 NaN), asynchronously on `stream`.
    pub fn fill_u16(&self, pattern: u16, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: `bytes / 2` 16-bit words fit in the allocation, whose start cuMemAlloc
        // aligns (to 256 bytes) for them; `stream` is a live stream, and the memset touches
        // device memory only.
        check("cuMemsetD16Async", unsafe {
            sys::cuMemsetD16Async(self.ptr, pattern, self.bytes / 2, stream.0)
        })
    }

    /// Fill with a repeated 32-bit pattern, asynchronously on `stream`.
    pub fn fill_u32(&self, pattern: u32, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: as in `fill_u16`, with `bytes / 4` 32-bit words.
        check("cuMemsetD32Async", unsafe {
            sys::cuMemsetD32Async(self.ptr, pattern, self.bytes / 4, stream.0)
        })
    }
}

/// A copy from pageable host memory may return before its DMA reaches the device, and the
/// kernels run on a non-blocking stream that does not wait for the legacy stream the copy
/// went to: without this, a launch can overtake the copy (an output poisoned after the kernel
/// wrote part of it read back as rows of NaN). Waits for the legacy stream.
fn wait_for_host_copies() -> Result<(), CudaError> {
    // SAFETY: the null stream is the legacy default stream, always a valid handle.
    check("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(std::ptr::null_mut())
    })
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAlloc in `alloc` and is freed only here, once.
        let _ = unsafe { sys::cuMemFree_v2(self.ptr) };
    }
}

/// Page-locked host memory holding `u32` words, mapped into the device's address space:
/// the host writes a word and a running kernel sees it (and the other way round).
pub struct MappedWords {
    host: *mut u32,
    len: usize,
    /// The same memory as the device addresses it.
    pub device_ptr: sys::CUdeviceptr,
}

impl MappedWords {
    /// `len` words, zeroed.
    pub fn alloc(len: usize) -> Result<MappedWords, CudaError> {
        let len = len.max(1);
        let bytes = len
            .checked_mul(std::mem::size_of::<u32>())
            .expect("a mapped allocation's size fits in usize");
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: `host` is a live out-pointer; the flags are the driver's own constants.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(
                &mut host,
                bytes,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        })?;
        // Owned from here, so an error below frees it. The allocation is page-aligned, so
        // aligned for `u32`, and holds `len` of them.
        let mut words = MappedWords {
            host: host as *mut u32,
            len,
            device_ptr: 0,
        };
        // SAFETY: `host` is the start of the allocation just made with DEVICEMAP, as the
        // call requires; the flags must be 0; `words.device_ptr` is a live out-pointer.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut words.device_ptr, host, 0)
        })?;
        (0..words.len).for_each(|i| words.set(i, 0));
        Ok(words)
    }

    /// Word `i`, as the device last wrote it.
    pub fn get(&self, i: usize) -> u32 {
        assert!(i < self.len, "word {i} of {}", self.len);
        // SAFETY: `i < len` (asserted), so in bounds of the live, aligned allocation of
        // `len` words; volatile because the device writes it behind the compiler's back.
        unsafe { std::ptr::read_volatile(self.host.add(i)) }
    }

    /// Set word `i`; a kernel polling it sees the new value.
    pub fn set(&self, i: usize, value: u32) {
        assert!(i < self.len, "word {i} of {}", self.len);
        // SAFETY: `i < len` (asserted), so in bounds of the live, aligned allocation of
        // `len` words; no Rust reference to it exists; volatile because the device reads it.
        unsafe { std::ptr::write_volatile(self.host.add(i), value) }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for MappedWords {
    /// Waits for the context's work first: a kernel may still be polling or writing the
    /// words (a hold enqueued, then an error before its release), and it must not touch
    /// them once they are freed.
    fn drop(&mut self) {
        // SAFETY: no arguments; it waits for this thread's current context, the one the
        // words were allocated in (`MappedWords` cannot leave its thread).
        let _ = unsafe { sys::cuCtxSynchronize() };
        // SAFETY: `host` came from cuMemHostAlloc in `alloc` and is freed only here, once,
        // after the kernels that used it have finished.
        let _ = unsafe { sys::cuMemFreeHost(self.host as *mut c_void) };
    }
}

/// A non-blocking stream.
pub struct Stream(sys::CUstream);

impl Stream {
    pub fn new() -> Result<Stream, CudaError> {
        let mut s = MaybeUninit::uninit();
        // SAFETY: `s` is a writable out-pointer for one CUstream; the flag is the driver's.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(
                s.as_mut_ptr(),
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        })?;
        // SAFETY: the call succeeded (checked above), so it wrote `s`.
        Ok(Stream(unsafe { s.assume_init() }))
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: `self.0` is the live stream `new` made; only `drop` destroys it.
        check("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(self.0)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream `new` made, destroyed only here, once.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

/// A timing event.
pub struct Event(sys::CUevent);

impl Event {
    pub fn new() -> Result<Event, CudaError> {
        let mut e = MaybeUninit::uninit();
        // SAFETY: `e` is a writable out-pointer for one CUevent; the flag is the driver's.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(e.as_mut_ptr(), sys::CUevent_flags::CU_EVENT_DEFAULT as u32)
        })?;
        // SAFETY: the call succeeded (checked above), so it wrote `e`.
        Ok(Event(unsafe { e.assume_init() }))
    }

    pub fn record(&self, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: both are live handles their `new` made; only their `drop` destroys them.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.0, stream.0)
        })
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, CudaError> {
        // SAFETY: `end.0` is a live event; one never recorded is an error, not UB.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(end.0)
        })?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a live, aligned f32 out-pointer; both events are live.
        check("cuEventElapsedTime", unsafe {
            sys::cuEventElapsedTime_v2(&mut ms, self.0, end.0)
        })?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the event `new` made, destroyed only here, once.
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// The stretch of this context's work a profiler that starts with profiling off
/// (`ncu --profile-from-start off`) profiles: from `open` (`cuProfilerStart`) until the
/// window drops (`cuProfilerStop`). Without a profiler both calls do nothing.
pub struct ProfilerWindow(());

impl ProfilerWindow {
    pub fn open() -> Result<ProfilerWindow, CudaError> {
        // SAFETY: no arguments; it applies to this thread's current context.
        check("cuProfilerStart", unsafe { sys::cuProfilerStart() })?;
        Ok(ProfilerWindow(()))
    }
}

impl Drop for ProfilerWindow {
    fn drop(&mut self) {
        // SAFETY: no arguments; it closes the window `open` started on this thread's context.
        let _ = unsafe { sys::cuProfilerStop() };
    }
}

/// A loaded cubin.
pub struct Module(sys::CUmodule);

/// The bytes of the cubin at `path`.
pub fn read_cubin(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| {
        format!(
            "cannot read the cubin {}: build it first (`repro stage build`)",
            path.display()
        )
    })
}

impl Module {
    /// Load a cubin (or fatbin/PTX) file.
    pub fn load(path: &Path) -> anyhow::Result<Module> {
        Module::from_file_bytes(path, read_cubin(path)?)
    }

    /// Load the bytes read from the cubin at `path` (named in errors).
    pub fn from_file_bytes(path: &Path, mut image: Vec<u8>) -> anyhow::Result<Module> {
        image.push(0); // PTX text must be NUL-terminated; harmless for ELF images
        Module::from_image(&image).with_context(|| {
            format!(
                "cannot load {} (built for another GPU architecture?)",
                path.display()
            )
        })
    }

    /// Load PTX text, which the driver compiles for this GPU.
    pub fn from_ptx(ptx: &str) -> Result<Module, CudaError> {
        let mut image = ptx.as_bytes().to_vec();
        image.push(0);
        Module::from_image(&image)
    }

    /// `image`: a NUL-terminated PTX text, or a cubin/fatbin.
    fn from_image(image: &[u8]) -> Result<Module, CudaError> {
        let mut m = MaybeUninit::uninit();
        // SAFETY: `m` is a writable out-pointer; `image` is borrowed for the call, and the
        // driver copies what it keeps. The call takes no length: PTX ends at the NUL our
        // callers append, and a cubin or fatbin is read as far as its own headers say, so
        // the file is trusted to be what nvcc wrote (a forged ELF header could make the
        // driver read past `image`).
        check("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(m.as_mut_ptr(), image.as_ptr() as *const c_void)
        })?;
        // SAFETY: the load succeeded (checked above), so it wrote `m`.
        Ok(Module(unsafe { m.assume_init() }))
    }

    pub fn function(&self, name: &str) -> anyhow::Result<Function> {
        let c = CString::new(name).context("entry name contains a NUL byte")?;
        let mut f = MaybeUninit::uninit();
        // SAFETY: `f` is a writable out-pointer; `c` is NUL-terminated and outlives the
        // call; `self.0` is a loaded module (only `drop` unloads it).
        check("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(f.as_mut_ptr(), self.0, c.as_ptr())
        })
        .with_context(|| {
            format!("the cubin has no entry `{name}` (is it declared extern \"C\" __global__?)")
        })?;
        // SAFETY: the lookup succeeded (checked above), so it wrote `f`.
        Ok(Function(unsafe { f.assume_init() }))
    }

    /// The value of an `extern "C" __device__ const int NAME` global, `None` if absent.
    pub fn global_i32(&self, name: &str) -> anyhow::Result<Option<i32>> {
        let c = CString::new(name).context("global name contains a NUL byte")?;
        let mut ptr = 0;
        let mut bytes = 0usize;
        // SAFETY: `ptr` and `bytes` are live, aligned out-pointers; `c` is NUL-terminated
        // and outlives the call; `self.0` is a loaded module.
        let found = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.0, c.as_ptr()) };
        if found == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        check("cuModuleGetGlobal", found)?;
        if bytes != 4 {
            bail!("the cubin's global `{name}` is {bytes} bytes; expected a 4-byte int");
        }
        let mut v = 0i32;
        // SAFETY: the global at `ptr` is 4 bytes (checked above) and lives while the module
        // is loaded (`self` is borrowed); `v` is 4 writable bytes, and any bytes are an i32.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(&mut v as *mut i32 as *mut c_void, ptr, 4)
        })?;
        Ok(Some(v))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: the module `from_image` loaded, unloaded only here, once.
        let _ = unsafe { sys::cuModuleUnload(self.0) };
    }
}

/// A kernel entry point.
#[derive(Clone, Copy)]
pub struct Function(sys::CUfunction);

/// Launch geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub dynamic_smem: u32,
}

impl Function {
    pub fn attribute(&self, attr: sys::CUfunction_attribute) -> Result<i32, CudaError> {
        let mut v = 0;
        // SAFETY: `v` is a live, aligned c_int out-pointer; `self.0` is a function of a
        // module its holder keeps loaded (see the module docs).
        check("cuFuncGetAttribute", unsafe {
            sys::cuFuncGetAttribute(&mut v, attr, self.0)
        })?;
        Ok(v)
    }

    /// Allow `bytes` of dynamic shared memory (needed above the 48 KB default).
    pub fn set_max_dynamic_smem(&self, bytes: u32) -> Result<(), CudaError> {
        // SAFETY: `self.0` is a function of a loaded module (see the module docs); a size
        // beyond the device's limit is an error code.
        check("cuFuncSetAttribute", unsafe {
            sys::cuFuncSetAttribute(
                self.0,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })
    }

    /// Launch with `params`, each a pointer to one argument's value.
    ///
    /// # Safety
    /// `params` must match the kernel's signature: one pointer per parameter, in order,
    /// each to a value at least as wide as that parameter (the driver reads them during the
    /// call). Every device pointer among those values must stay allocated until the launch
    /// has finished, or, for a launch captured into a [`Graph`], until the graph's last
    /// replay has; and the kernel must only touch memory that those pointers allow it to.
    pub unsafe fn launch(
        &self,
        dims: LaunchDims,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for `params` and what the kernel does with them (see
        // above); the array is borrowed for the call, `self.0` is a function of a loaded
        // module, `stream` is live, and no `extra` options are passed.
        let result = unsafe {
            sys::cuLaunchKernel(
                self.0,
                dims.grid.0,
                dims.grid.1,
                dims.grid.2,
                dims.block.0,
                dims.block.1,
                dims.block.2,
                dims.dynamic_smem,
                stream.0,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check("cuLaunchKernel", result)
    }
}

/// An instantiated CUDA graph, captured from a stream.
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Graph {
    /// Capture what `body` enqueues on `stream` into a graph, and instantiate it.
    pub fn capture(
        stream: &Stream,
        body: impl FnOnce(&Stream) -> Result<(), CudaError>,
    ) -> Result<Graph, CudaError> {
        // SAFETY: `stream` is live; thread-local capture mode only changes which of this
        // thread's calls are refused while capturing.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(
                stream.0,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })?;
        let enqueued = body(stream);
        let mut graph = MaybeUninit::uninit();
        // SAFETY: `stream` is live and capturing (begun above); `graph` is a writable
        // out-pointer for one CUgraph.
        let ended = check("cuStreamEndCapture", unsafe {
            sys::cuStreamEndCapture(stream.0, graph.as_mut_ptr())
        });
        enqueued?;
        ended?;
        // SAFETY: the capture ended without error (checked above), so it wrote `graph`.
        let graph = unsafe { graph.assume_init() };
        let mut exec = MaybeUninit::uninit();
        // SAFETY: `exec` is a writable out-pointer; `graph` is the live graph just captured.
        let inst = check("cuGraphInstantiate", unsafe {
            sys::cuGraphInstantiateWithFlags(exec.as_mut_ptr(), graph, 0)
        });
        if let Err(e) = inst {
            // SAFETY: `graph` is owned by nothing else yet, and destroyed only here.
            let _ = unsafe { sys::cuGraphDestroy(graph) };
            return Err(e);
        }
        let g = Graph {
            graph,
            // SAFETY: the instantiation succeeded (checked above), so it wrote `exec`.
            exec: unsafe { exec.assume_init() },
        };
        // SAFETY: `g.exec` is the live executable graph just made; `stream` is live.
        check("cuGraphUpload", unsafe {
            sys::cuGraphUpload(g.exec, stream.0)
        })?;
        Ok(g)
    }

    /// Replay the captured launches on `stream`.
    pub fn launch(&self, stream: &Stream) -> Result<(), CudaError> {
        // SAFETY: `self.exec` is live and `stream` is live. The replayed kernel launches
        // were `Function::launch` calls, whose callers vouched for their buffers until the
        // graph's last replay.
        check("cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(self.exec, stream.0)
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: the executable graph and the graph `capture` made, each destroyed only
        // here, once; the executable graph does not depend on the graph it came from.
        let _ = unsafe { sys::cuGraphExecDestroy(self.exec) };
        // SAFETY: see above.
        let _ = unsafe { sys::cuGraphDestroy(self.graph) };
    }
}
