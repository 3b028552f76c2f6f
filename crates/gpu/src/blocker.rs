//! A kernel that holds a stream until the host releases it, so that everything enqueued
//! behind it is already queued when the GPU reaches it (nvbench's "blocking kernel").
//!
//! Timing one launch between two events normally measures the host: the GPU records the
//! start event, then idles until the host has finished submitting the launch. Behind a
//! hold, the start event, the launch and the end event are all queued before the hold
//! ends, so the events bracket the GPU's work only.
//!
//! The kernel is PTX written here (the driver compiles it for whatever GPU runs it), so it
//! needs no nvcc at run time. It spins on a word of mapped host memory and gives up after
//! [`TIMEOUT_NS`], noting the ticket that timed out: the host is then told instead of
//! measuring a stall.

use super::driver::{CudaError, Function, LaunchDims, MappedWords, Module, Stream};
use anyhow::bail;
use std::ffi::c_void;

/// How long a hold waits for its release before giving up.
const TIMEOUT_NS: u64 = 100_000_000;

const ENTRY: &str = "repro_hold_until_released";

/// `repro_hold_until_released(const volatile u32* released, u32 ticket, u64 timeout_ns,
/// u32* timed_out)`: spin until `*released >= ticket`, or until `timeout_ns` have passed
/// on the GPU's global timer, then write `ticket` to `*timed_out`.
const PTX: &str = r#"
.version 6.0
.target sm_50
.address_size 64

.visible .entry repro_hold_until_released(
    .param .u64 released,
    .param .u32 ticket,
    .param .u64 timeout_ns,
    .param .u64 timed_out
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [released];
    ld.param.u32 %r1, [ticket];
    ld.param.u64 %rd2, [timeout_ns];
    ld.param.u64 %rd3, [timed_out];
    mov.u64 %rd4, %globaltimer;
SPIN:
    ld.volatile.global.u32 %r2, [%rd1];
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mov.u64 %rd5, %globaltimer;
    sub.u64 %rd6, %rd5, %rd4;
    setp.lt.u64 %p2, %rd6, %rd2;
    @%p2 bra SPIN;
    st.volatile.global.u32 [%rd3], %r1;
DONE:
    ret;
}
"#;

/// Word 0: the highest ticket released. Word 1: the last ticket that timed out (0: none).
const RELEASED: usize = 0;
const TIMED_OUT: usize = 1;

/// The hold kernel and its mapped words.
pub struct Blocker {
    // Fields drop in order: dropping the words waits for a hold still running, before
    // the module holding its code is unloaded.
    words: MappedWords,
    _module: Module,
    function: Function,
    last_ticket: u32,
}

/// A hold enqueued on a stream; [`Blocker::release`] ends it.
#[must_use = "a hold that is never released stalls its stream until the timeout"]
pub struct Hold(u32);

impl Blocker {
    pub fn new() -> anyhow::Result<Blocker> {
        let module = Module::from_ptx(PTX)?;
        let function = module.function(ENTRY)?;
        Ok(Blocker {
            words: MappedWords::alloc(2)?,
            _module: module,
            function,
            last_ticket: 0,
        })
    }

    /// Enqueue a hold on `stream`: work enqueued after it waits for [`Blocker::release`].
    pub fn hold(&mut self, stream: &Stream) -> Result<Hold, CudaError> {
        self.last_ticket += 1;
        let dims = LaunchDims {
            grid: (1, 1, 1),
            block: (1, 1, 1),
            dynamic_smem: 0,
        };
        let (mut released, mut ticket) = (self.words.device_ptr, self.last_ticket);
        let (mut timeout, mut timed_out) = (TIMEOUT_NS, self.words.device_ptr + 4);
        let mut params: [*mut c_void; 4] = [
            &mut released as *mut _ as *mut c_void,
            &mut ticket as *mut _ as *mut c_void,
            &mut timeout as *mut _ as *mut c_void,
            &mut timed_out as *mut _ as *mut c_void,
        ];
        // SAFETY: the four values match the PTX entry's parameters in order and width
        // (.u64, .u32, .u64, .u64) and live until the call returns. Both device pointers
        // address `self.words` (2 words), which the kernel may use until it ends: dropping
        // `MappedWords` waits for the context's work before freeing them.
        unsafe { self.function.launch(dims, stream, &mut params) }?;
        Ok(Hold(self.last_ticket))
    }

    /// End `hold` (and any earlier one): the GPU goes on with what follows it.
    pub fn release(&self, hold: Hold) {
        self.words.set(RELEASED, hold.0);
    }

    /// After a synchronize: an error if any hold ran out of time before its release, since
    /// the samples behind it measured the host.
    pub fn check_no_timeouts(&self) -> anyhow::Result<()> {
        let ticket = self.words.get(TIMED_OUT);
        if ticket != 0 {
            bail!(
                "hold {ticket} of the timing harness waited {} ms for the host without being \
                 released, so its samples would time the host, not the GPU. This happens \
                 when a profiler serializes kernel launches (Nsight Compute does): time \
                 with `--method graph` under it",
                TIMEOUT_NS / 1_000_000
            );
        }
        Ok(())
    }
}
