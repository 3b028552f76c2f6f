//! What a stage kind is: the trait the engine runs stages through and the built-in kinds
//! implement, with what it hands in and gets back. It lives beside the pipeline it
//! validates, so the loader can check each stage's options through the kinds it is given.

use crate::{Pipeline, StageSpec};
use repro_exec::{CancelFlag, Executor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The stage kinds a pipeline may name in `uses:`. The crate that defines them hands them
/// to the loader (`repro_stages::kinds()`), so this crate knows none by name.
pub type Kinds = Arc<[Arc<dyn StageKind>]>;

/// A problem with a setting: the key path from the file's top, the message, the fix.
pub type SettingProblem = (Vec<String>, String, String);

/// What a stage kind contributes to a stage's fingerprint, besides its canonical spec and
/// its upstream fingerprints (which the engine adds itself).
#[derive(Debug, Clone, Default)]
pub struct StageInputs {
    /// Files (relative to the project root) whose contents matter.
    pub files: Vec<PathBuf>,
    /// Sources the stage compiles itself, whose code matters but not their comments or
    /// layout (see [`code_digest`]).
    pub code: Vec<PathBuf>,
    /// Named values that matter (resolved parameters, the chosen arch, ...).
    pub params: BTreeMap<String, String>,
    /// Tool name → version string (nvcc, ncu, python, torch, ...).
    pub tools: BTreeMap<String, String>,
    /// Hardware identity for GPU stages (model, compute capability, driver), if any.
    pub hardware: Option<String>,
}

/// Declared outputs of a stage, relative to the project root.
pub type Outputs = Vec<PathBuf>;

/// Everything a stage may touch while it runs.
pub struct RunCtx<'a> {
    pub name: &'a str,
    pub spec: &'a StageSpec,
    pub pipeline: &'a Pipeline,
    pub root: &'a Path,
    /// Write declared outputs here, under the same relative paths; the engine moves them
    /// into `root` only if the stage succeeds.
    pub staging: &'a Path,
    /// The stage's log file (`.repro/logs/<stage>.log`).
    pub log: &'a Path,
    pub executor: &'a dyn Executor,
    pub cancel: &'a CancelFlag,
    /// Path of the running `repro` binary, for child `repro exec` jobs.
    pub repro_exe: &'a Path,
    /// The pipeline file this run loaded; child `repro exec` jobs get it as `-f`.
    pub pipeline_file: &'a Path,
    /// Command-line overrides (`repro tune --exhaustive`, `--budget`).
    pub overrides: &'a BTreeMap<String, String>,
    /// Live progress line for this stage.
    pub progress: &'a dyn Fn(&str),
}

/// How a stage that did not error ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StageOutcome {
    /// Ran, and every gate it checks passed.
    Passed,
    /// Ran, but a gate failed: not a stage error; downstream still runs. The string
    /// summarizes which gate.
    GateFailed(String),
    /// Could not run for a reason the user can fix (a missing optional tool): the reason
    /// and the fix. Its outputs are still written (they say `skipped`).
    Skipped { reason: String, fix: String },
}

/// A built-in stage kind (`cmd`, `build`, `bench`, `tune`, `profile`, `summarize`).
pub trait StageKind: Send + Sync {
    fn kind(&self) -> &'static str;
    /// Check the kind's own options (`spec.options`) when the pipeline is loaded. Errors
    /// name the offending key, so the loader can point at its line.
    fn validate(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<(), OptionError>;
    /// Declared outputs.
    fn outputs(&self, name: &str, spec: &StageSpec, pipeline: &Pipeline) -> Outputs;
    /// Declared outputs the kind may leave unwritten when it succeeds (the cubin of a
    /// variant that failed to compile). The engine then removes the previous copy, so no
    /// stale file stands in for it, and leaves it out of the lock.
    fn optional_outputs(&self, name: &str, spec: &StageSpec, pipeline: &Pipeline) -> Outputs {
        let _ = (name, spec, pipeline);
        Vec::new()
    }
    /// Fingerprint inputs. May call cheap tools (cached versions), never the GPU directly.
    fn inputs(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs>;
    /// [`inputs`](StageKind::inputs) under the run's command-line overrides (`repro tune
    /// --budget`, the same map as [`RunCtx::overrides`]). The engine fingerprints through this method;
    /// kinds whose inputs depend on an override implement it, the others keep this default.
    fn inputs_with_overrides(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
        overrides: &BTreeMap<String, String>,
    ) -> anyhow::Result<StageInputs> {
        let _ = overrides;
        self.inputs(name, spec, pipeline, root)
    }
    /// Fetch what the stage's inputs depend on before they are fingerprinted (the build and
    /// tune kinds install a pinned nvcc this machine lacks), and rebuild the derived files a
    /// fresh clone lacks from the committed records (the tune's elite cubins), so nothing
    /// that is current is measured again. A run calls it for each selected stage before
    /// deciding what is stale; `repro status` and dry runs never do. `say` shows progress.
    fn prepare(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        let _ = (name, spec, pipeline, root, say);
        Ok(())
    }
    /// Problems with the pipeline-wide settings this kind reads (the profile kind's
    /// `gates.profile:`), checked once at load, whatever stages use the kind.
    fn pipeline_problems(&self, pipeline: &Pipeline) -> Vec<SettingProblem> {
        let _ = pipeline;
        Vec::new()
    }
    /// Does the work, writing outputs under `ctx.staging`.
    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome>;
    /// The kind's own option keys, if it wants the loader to reject unknown ones with a
    /// "did you mean" (checked before [`StageKind::validate`]). `None`: the kind checks.
    fn known_options(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// Whether the stage depends only on the content of what its upstream wrote (early
    /// cutoff). Kinds that record where results came from (the summary's manifest names the
    /// sources' commit) return false, and rerun whenever an upstream stage does.
    fn early_cutoff(&self) -> bool {
        true
    }
    /// Params (of [`StageInputs::params`]) that this machine decides, not the sources (the
    /// arch chosen for the GPU that is present): `repro verify` does not compare them.
    fn machine_params(&self) -> &'static [&'static str] {
        &[]
    }
    /// True for kinds whose processes write outputs where they belong (`cmd`): the engine
    /// then sets `ctx.staging` to the project root and protects the previous outputs with
    /// a backup instead of moving staged files in.
    fn writes_in_place(&self) -> bool {
        false
    }
}

/// A problem with one key of a stage's options. A message may end with `\nhelp: ...`,
/// shown as the error's help line.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionError {
    /// The key path below the stage, e.g. `["space", "TILE_M"]`; empty for the stage itself.
    pub path: Vec<String>,
    pub message: String,
}

impl std::fmt::Display for OptionError {
    /// `key.path: message` (the message's help line included), for errors found after the
    /// loader, where no file position is at hand.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path.join("."), self.message)
        }
    }
}

impl std::error::Error for OptionError {}
