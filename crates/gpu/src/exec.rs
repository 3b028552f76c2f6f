//! `repro exec`: one kernel of a workload, one shape, recipe and seed → one JSON line (a
//! `schema::BenchResult`). The kernel's arguments, launch, reference and gates all come
//! from its workload's declaration (`repro_pipeline::workload`). Also `--dump-inputs` (the cases as
//! files, for baseline scripts) and `--attributes` (a function's driver attributes, for the
//! bench stage's driver check).
//!
//! `project` reads the pipeline and resolves a request against it, `ready` makes the run
//! launchable, `checked` judges one launch, `measure` times it into the record, `dump`
//! writes the cases; `dims` reads a shape given as dimensions.

mod checked;
mod dims;
mod dump;
mod measure;
mod project;
mod ready;

pub(super) use checked::check;
pub use checked::{check_run, Checked, Run};
pub use dims::{is_dims, parse_dims};
pub use dump::{dump_inputs, DumpRequest};
pub use project::{integer_defines, variant_cubin};
pub(super) use project::{variant_entry, Project};
pub(super) use ready::ready;

use super::client::ExecRequest;
use super::harness::{self, Session};
use super::timing::Method;
use super::warm::Warm;
use anyhow::bail;
use repro_schema::BenchResult;
use std::path::{Path, PathBuf};

/// Bump when a change here changes what a run measures (the timing method, the correctness
/// check): records measured before are then not reused (`stages::reuse`).
pub const HARNESS_REVISION: u32 = 3;

/// What `repro exec` takes beyond the [`ExecRequest`] the stages send: the GPU, when to
/// stop sampling, the graph method's batch, another reference kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecSettings {
    /// Device index among the visible ones.
    pub device: u32,
    /// Keep sampling while the coefficient of variation is above this...
    pub max_cv: f64,
    /// ...for at most this many seconds.
    pub max_time: f64,
    /// Graph method: launches per sample (default: enough for a sample of at least 100 µs).
    pub launches_per_sample: Option<u32>,
    /// The reference cubin (default the build's, of the workload and this GPU's arch).
    pub reference: Option<PathBuf>,
}

/// `repro exec --attributes`: the driver attributes of each `(cubin, entry)`, read in one
/// CUDA context (needs no pipeline; the bench stage asks for any cubin). A kernel that does
/// not load is its own error; the others are still read.
pub fn attributes(
    kernels: &[(PathBuf, String)],
    device: u32,
) -> anyhow::Result<Vec<Result<harness::Attributes, String>>> {
    super::driver_library_loads()?;
    let _session = Session::open(device)?;
    Ok(kernels
        .iter()
        .map(|(cubin, entry)| harness::attributes(cubin, entry).map_err(|e| format!("{e:#}")))
        .collect())
}

/// Runs requests in one process (one, or a worker's many), keeping a [`Warm`] session
/// between them.
pub struct Runner {
    project: Project,
    settings: ExecSettings,
    warm: Option<Warm>,
    /// No session could be opened: nothing will run in this process.
    no_session: bool,
}

impl Runner {
    pub fn new(file: &Path, settings: &ExecSettings) -> anyhow::Result<Runner> {
        let project = Project::load(file)?;
        super::driver_library_loads()?;
        Ok(Runner {
            project,
            settings: settings.clone(),
            warm: None,
            no_session: false,
        })
    }

    /// `repro exec`: load `req.target`, check it against the reference on `req`'s case,
    /// time it unless `!req.timing`; the record `repro exec` prints.
    pub fn run(&mut self, req: &ExecRequest) -> anyhow::Result<BenchResult> {
        if self.settings.launches_per_sample.is_some() && req.method != Method::Graph {
            bail!(
                "--launches-per-sample applies to --method graph; the {} method times one launch per sample\nhelp: add `--method graph`, or drop --launches-per-sample",
                req.method
            );
        }
        let resolved = self.project.resolve(req, &self.settings)?;
        let warm = open(&mut self.warm, &mut self.no_session, self.settings.device)?;
        measure::measure(warm, &self.project, &resolved, req, &self.settings)
    }

    /// Open the CUDA session now rather than at the first run: a worker does before its
    /// first request, so a profile pass's worker started ahead of its turn has its context
    /// by then. It launches nothing. A session that cannot be opened is the first run's
    /// error.
    pub fn open_session(&mut self) {
        let _ = open(&mut self.warm, &mut self.no_session, self.settings.device);
    }

    /// May this process take another run after one failed? Not when no session could be
    /// opened, nor when a sticky CUDA error poisoned the context.
    pub fn usable(&self) -> bool {
        !self.no_session && self.warm.as_ref().is_none_or(Warm::usable)
    }
}

/// `warm`'s session, opened on first use; `no_session` is set when it cannot be.
fn open<'w>(
    warm: &'w mut Option<Warm>,
    no_session: &mut bool,
    device: u32,
) -> anyhow::Result<&'w mut Warm> {
    if warm.is_none() {
        match Warm::open(device) {
            Ok(w) => *warm = Some(w),
            Err(e) => {
                *no_session = true;
                return Err(e);
            }
        }
    }
    Ok(warm.as_mut().expect("opened above"))
}

/// One `repro exec` run in a process of its own.
pub fn run_request(
    file: &Path,
    req: &ExecRequest,
    settings: &ExecSettings,
) -> anyhow::Result<BenchResult> {
    Runner::new(file, settings)?.run(req)
}
