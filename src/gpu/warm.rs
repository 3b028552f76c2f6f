//! What one `repro exec` process keeps between runs (docs/ARCHITECTURE.md, "The GPU
//! worker"): its CUDA session, each module loaded once per cubin content, and per
//! (reference, shape, recipe, seed) the inputs and the reference's output, computed once.
//!
//! Only code and host-side data are kept. Every run uploads its inputs afresh into new
//! buffers and poisons its output before the kernel writes it, so a kernel that writes
//! where it should not cannot change what a later run sees; a kernel that breaks the context
//! ends the process ([`Warm::usable`]).

use super::harness::{DeviceInputs, Kernel, Reference, Session};
use super::workload::Inputs;
use crate::pipeline::{Recipe, Shape};
use anyhow::Context as _;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

/// Modules kept loaded at once; the least recently used goes first. A tune sends each
/// trial's cubin for a handful of runs and never again.
const KERNELS_KEPT: usize = 16;

/// The inputs of one (reference, shape, recipe, seed) and the reference's output on them.
pub struct Prepared {
    pub inputs: Inputs,
    pub expected: Vec<f64>,
}

/// A loaded kernel, keyed by the digest of its cubin's bytes and its entry.
struct LoadedKernel {
    key: (String, String),
    kernel: Rc<Kernel>,
}

type InputsKey = (String, [u32; 4], Recipe, u64);

/// A session and what it has loaded and computed so far.
pub struct Warm {
    // Fields drop in order: the modules before the session releases the context.
    /// Most recently used last.
    kernels: Vec<LoadedKernel>,
    /// Reference modules by cubin digest and entry.
    references: HashMap<(String, String), Reference>,
    prepared: HashMap<InputsKey, Rc<Prepared>>,
    device_name: String,
    session: Session,
}

fn digest(bytes: &[u8]) -> String {
    crate::tools::hex(&Sha256::digest(bytes))
}

impl Warm {
    pub fn open(device: u32) -> anyhow::Result<Warm> {
        let session = Session::open(device)?;
        let device_name = super::driver::Device::get(device)?.name()?;
        Ok(Warm {
            session,
            device_name,
            kernels: Vec::new(),
            references: HashMap::new(),
            prepared: HashMap::new(),
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// See [`Session::usable`].
    pub fn usable(&self) -> bool {
        self.session.usable()
    }

    /// `entry` of the cubin at `path`, loaded once per content: a file rewritten in place
    /// (a rebuilt variant) is loaded again.
    pub fn kernel(&mut self, path: &Path, entry: &str) -> anyhow::Result<Rc<Kernel>> {
        let image = super::driver::read_cubin(path)?;
        let key = (digest(&image), entry.to_string());
        let kernel = match self.kernels.iter().position(|k| k.key == key) {
            Some(i) => self.kernels.remove(i).kernel,
            None => Rc::new(Kernel::from_file_bytes(
                path,
                image,
                entry,
                self.session.max_dynamic_smem,
            )?),
        };
        if self.kernels.len() == KERNELS_KEPT {
            self.kernels.remove(0);
        }
        self.kernels.push(LoadedKernel {
            key,
            kernel: kernel.clone(),
        });
        Ok(kernel)
    }

    /// The inputs of (`shape`, `recipe`, `seed`) and the output of the reference kernel
    /// (`entry` of the cubin at `reference`) on them: drawn and computed on first use, then
    /// kept.
    pub fn prepared(
        &mut self,
        (reference, entry): (&Path, &str),
        shape: Shape,
        recipe: Recipe,
        seed: u64,
    ) -> anyhow::Result<Rc<Prepared>> {
        let image = super::driver::read_cubin(reference).context("loading the reference kernel")?;
        let module_key = (digest(&image), entry.to_string());
        let key = (
            format!("{}:{entry}", module_key.0),
            [shape.B, shape.H, shape.S, shape.D],
            recipe,
            seed,
        );
        if let Some(p) = self.prepared.get(&key) {
            return Ok(p.clone());
        }
        if !self.references.contains_key(&module_key) {
            let loaded = Reference::from_file_bytes(reference, image, entry)
                .context("loading the reference kernel")?;
            self.references.insert(module_key.clone(), loaded);
        }
        let inputs = Inputs::generate(shape, recipe, seed);
        let io = DeviceInputs::upload(&inputs)?;
        let expected = self
            .session
            .run_reference(&self.references[&module_key], &io)?;
        let prepared = Rc::new(Prepared { inputs, expected });
        self.prepared.insert(key, prepared.clone());
        Ok(prepared)
    }
}
