//! What one `repro exec` process keeps between runs (docs/ARCHITECTURE.md, "The GPU
//! worker"): its CUDA session, each module loaded once per cubin content, and per
//! (reference, workload, dimensions, recipe, seed) the case and the reference's outputs on
//! it, computed once.
//!
//! Only code and host-side data are kept. Every run uploads its case afresh into new
//! buffers and fills its outputs with the sentinel before the kernel writes them, so a
//! kernel that writes where it should not cannot change what a later run sees; a kernel that
//! breaks the context ends the process ([`Warm::usable`]).

use super::harness::{Kernel, Launch, Session};
use super::launch::{launch_dims, reference_order, DeviceCase};
use anyhow::{bail, Context as _};
use repro_pipeline::workload::inputs::Case;
use repro_pipeline::{workload::exprs::Bindings, workload::exprs::Compiled};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Modules kept loaded at once; the least recently used goes first. A tune sends each
/// trial's cubin for a handful of runs and never again.
const KERNELS_KEPT: usize = 16;

/// One case and the reference's outputs on it (ABI order, as f64): `None` until a checked
/// run needs them (an unchecked one, `ExecRequest::check`, runs no reference).
pub struct Prepared {
    pub case: Case,
    pub expected: Option<Vec<Vec<f64>>>,
}

/// What a workload's outputs are compared with.
#[derive(Debug, Clone, PartialEq)]
pub enum Reference {
    /// A kernel of the project, built to `cubin`.
    Kernel { cubin: PathBuf, entry: String },
    /// A command run on each case from the project `root` (`repro_pipeline::workload::command`).
    Command { root: PathBuf, run: Vec<String> },
}

/// A loaded kernel, keyed by the digest of its cubin's bytes and its entry.
struct LoadedKernel {
    key: (String, String),
    kernel: Rc<Kernel>,
}

/// (reference, workload, dimensions, recipe, seed).
type PreparedKey = (String, String, Vec<(String, i64)>, String, u64);

/// A session and what it has loaded and computed so far.
pub struct Warm {
    // Fields drop in order: the modules before the session releases the context.
    /// Most recently used last.
    kernels: Vec<LoadedKernel>,
    /// Reference kernels by cubin digest and entry.
    references: HashMap<(String, String), Kernel>,
    prepared: HashMap<PreparedKey, Rc<Prepared>>,
    device_name: String,
    session: Session,
}

fn digest(bytes: &[u8]) -> String {
    repro_base::tools::hex(&Sha256::digest(bytes))
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

    /// `entry` of the cubin at `path` with the `globals` its launch reads, loaded once per
    /// content: a file rewritten in place (a rebuilt variant) is loaded again.
    pub fn kernel(
        &mut self,
        path: &Path,
        entry: &str,
        globals: &[String],
    ) -> anyhow::Result<Rc<Kernel>> {
        let image = super::driver::read_cubin(path)?;
        let key = (digest(&image), entry.to_string());
        let kernel = match self.kernels.iter().position(|k| k.key == key) {
            Some(i) => self.kernels.remove(i).kernel,
            None => Rc::new(Kernel::from_file_bytes(path, image, entry, globals)?),
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

    /// The case of `c` for (`shape` with `dims`, `recipe`, `seed`) and, when `expected`,
    /// `reference`'s outputs on it: each drawn or computed on first use, then kept.
    pub fn prepared(
        &mut self,
        c: &Compiled,
        reference: &Reference,
        (shape, dims, recipe, seed): (&str, &Bindings, &str, u64),
        expected: bool,
    ) -> anyhow::Result<Rc<Prepared>> {
        let (id, image) = match reference {
            Reference::Kernel { cubin, entry } => {
                let image =
                    super::driver::read_cubin(cubin).context("loading the reference kernel")?;
                (format!("{}:{entry}", digest(&image)), Some(image))
            }
            Reference::Command { run, .. } => (run.join("\0"), None),
        };
        let key = (
            id,
            c.name.to_string(),
            dims.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            recipe.to_string(),
            seed,
        );
        let complete = |p: &&Rc<Prepared>| p.expected.is_some() || !expected;
        if let Some(p) = self.prepared.get(&key).filter(complete) {
            return Ok(p.clone());
        }
        // Drawn for an unchecked run, and now wanted with the reference's outputs.
        let case = match self.prepared.remove(&key) {
            Some(p) => Rc::try_unwrap(p).map_or_else(|p| p.case.clone(), |p| p.case),
            None => Case::generate_for(c, shape, dims.clone(), recipe, seed)
                .map_err(|p| anyhow::anyhow!("{}", p.message))?,
        };
        let expected = match (reference, image) {
            _ if !expected => None,
            (Reference::Kernel { cubin, entry }, Some(image)) => {
                Some(self.run_reference(c, &case, (cubin, entry), image)?)
            }
            (Reference::Command { root, run }, _) => Some(
                repro_pipeline::workload::command::expected(root, c.name, c.decl, &case, run)?,
            ),
            (Reference::Kernel { .. }, None) => unreachable!("a kernel reference was read"),
        };
        let prepared = Rc::new(Prepared { case, expected });
        self.prepared.insert(key, prepared.clone());
        Ok(prepared)
    }

    /// The reference kernel's outputs on `case`, as f64; a non-finite one is an error.
    fn run_reference(
        &mut self,
        c: &Compiled,
        case: &Case,
        (cubin, entry): (&Path, &str),
        image: Vec<u8>,
    ) -> anyhow::Result<Vec<Vec<f64>>> {
        let module_key = (digest(&image), entry.to_string());
        if !self.references.contains_key(&module_key) {
            let loaded = Kernel::from_file_bytes(cubin, image, entry, &[])
                .context("loading the reference kernel")?;
            self.references.insert(module_key.clone(), loaded);
        }
        let what = format!("shape `{}`", case.shape);
        let geometry = c
            .reference_launch(&case.dims, &what)
            .context("the reference is not a kernel")?
            .map_err(|p| anyhow::anyhow!("the reference kernel's launch: {}", p.message))?;
        let decl = c.decl;
        let dev = DeviceCase::upload(decl, case, |i| {
            let arg = &decl.args[i];
            decl.reference
                .outputs
                .get(&arg.name)
                .copied()
                .unwrap_or(arg.dtype)
        })?;
        let order = reference_order(c, case).map_err(|p| anyhow::anyhow!("{}", p.message))?;
        let params = dev.params(&order);
        let launch = Launch {
            kernel: &self.references[&module_key],
            dims: launch_dims(&geometry),
            params: &params,
        };
        let bytes = self
            .session
            .run_checked(&launch, &dev)
            .context("running the reference kernel")?;
        let names = decl.outputs().map(|a| a.name.as_str());
        let mut values = Vec::new();
        for ((b, dtype), name) in bytes.iter().zip(dev.output_dtypes()).zip(names) {
            let v = dtype.decode(b);
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                bail!(
                    "the reference kernel left element {i} of output `{name}` non-finite ({}) on {what}; rebuild it, or check its launch",
                    v[i]
                );
            }
            values.push(v);
        }
        Ok(values)
    }
}
