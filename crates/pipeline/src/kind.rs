//! What a stage kind is: the trait the engine runs stages through and the built-in kinds
//! implement, with what it hands in and gets back. It lives beside the pipeline it
//! validates, so the loader can check each stage's options through the kinds it is given.

use crate::{Pipeline, StageSpec};
use repro_executor::{CancelFlag, Executor};
use std::any::Any;
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
    /// The command-line overrides the stage's results depend on, as the lock records them
    /// (`budget` → `8`).
    pub overrides: BTreeMap<String, String>,
}

/// A stage's options as its kind decoded and checked them at load
/// ([`StageKind::configure`]): kept on the loaded stage, and read back by that kind (or by
/// whoever reads that kind's stages) with [`Config::get`], so they are decoded once.
#[derive(Clone)]
pub struct Config(Arc<dyn Any + Send + Sync>);

impl Config {
    pub fn new<T: Any + Send + Sync>(value: T) -> Config {
        Config(Arc::new(value))
    }

    /// The decoded value, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }

    /// The decoded value of a kind that made a `T`: anything else is a bug in that kind.
    pub fn of<T: Any>(&self) -> &T {
        self.get().unwrap_or_else(|| {
            panic!(
                "a stage's options read as {}, which its kind did not make",
                std::any::type_name::<T>()
            )
        })
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Config(..)")
    }
}

/// Every stage's [`Config`], by stage name in declaration order: what a kind, or the report,
/// reads of another stage's options (the summary's charts are the tunes').
#[derive(Debug, Clone, Default)]
pub struct Configs(Vec<(String, Config)>);

impl Configs {
    pub fn new(configs: Vec<(String, Config)>) -> Configs {
        Configs(configs)
    }

    /// The stage `name`'s.
    pub fn get(&self, name: &str) -> Option<&Config> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The stages whose kind made a `T`, with theirs, in declaration order.
    pub fn of<T: Any>(&self) -> impl Iterator<Item = (&str, &T)> {
        self.0
            .iter()
            .filter_map(|(n, c)| Some((n.as_str(), c.get::<T>()?)))
    }
}

/// A stage as its kind sees it after the load: its name, what pipeline.yaml declares, the
/// options [`StageKind::configure`] decoded, and every stage's ([`Configs`]).
#[derive(Debug, Clone, Copy)]
pub struct Configured<'a> {
    pub name: &'a str,
    pub spec: &'a StageSpec,
    pub config: &'a Config,
    pub peers: &'a Configs,
}

/// The command line's overrides for one run, typed per kind. The engine hands them to
/// every stage without reading them; each kind reads what it honours and names, in
/// [`StageInputs::overrides`], those its results depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `--force`: the GPU stages measure again what they could reuse.
    pub remeasure: bool,
    /// `repro tune`'s, for the tune kind.
    pub tune: TuneOverrides,
}

impl Overrides {
    /// The overrides a lock entry recorded ([`StageInputs::overrides`]), to fingerprint a
    /// stage again as it was run.
    pub fn from_recorded(recorded: &BTreeMap<String, String>) -> Overrides {
        Overrides {
            remeasure: false,
            tune: TuneOverrides::from_recorded(recorded),
        }
    }
}

/// `repro tune`'s overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuneOverrides {
    /// `--exhaustive`: every configuration of the space.
    pub exhaustive: bool,
    /// `--budget N`: the number of trials, in place of the stage's `budget:`.
    pub budget: Option<std::num::NonZeroU32>,
}

impl TuneOverrides {
    /// The ones given, as the lock records them: `exhaustive` → `true`, `budget` → `8`.
    pub fn recorded(&self) -> BTreeMap<String, String> {
        let exhaustive = self.exhaustive.then(|| ("exhaustive", "true".to_string()));
        let budget = self.budget.map(|b| ("budget", b.to_string()));
        exhaustive
            .into_iter()
            .chain(budget)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }

    /// [`TuneOverrides::recorded`] read back.
    pub fn from_recorded(recorded: &BTreeMap<String, String>) -> TuneOverrides {
        TuneOverrides {
            exhaustive: recorded.get("exhaustive").is_some_and(|v| v == "true"),
            budget: recorded.get("budget").and_then(|b| b.parse().ok()),
        }
    }
}

/// Declared outputs of a stage, relative to the project root.
pub type Outputs = Vec<PathBuf>;

/// Everything a stage may touch while it runs.
pub struct RunCtx<'a> {
    pub name: &'a str,
    pub spec: &'a StageSpec,
    /// What the kind's [`StageKind::configure`] decoded for this stage.
    pub config: &'a Config,
    pub pipeline: &'a Pipeline,
    /// Every stage's options: a kind that reads another stage's (the profile reads what the
    /// tune elites are) reads them here.
    pub peers: &'a Configs,
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
    /// Command-line overrides (`--force`, `repro tune --exhaustive`, `--budget`).
    pub overrides: &'a Overrides,
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
    /// Decode and check the stage's own options (`spec.options`), and what the common
    /// `timeout:` means for the kind, once, when the pipeline is loaded. The value is kept on
    /// the loaded stage and every method below reads it ([`Configured::config`],
    /// [`RunCtx::config`]). A kind that cannot honour `timeout:` refuses it here. Errors
    /// name the offending key, so the loader can point at its line.
    fn configure(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<Config, OptionError>;
    /// Declared outputs.
    fn outputs(&self, stage: &Configured, pipeline: &Pipeline) -> Outputs;
    /// Declared outputs the kind may leave unwritten when it succeeds (the cubin of a
    /// variant that failed to compile). The engine then removes the previous copy, so no
    /// stale file stands in for it, and leaves it out of the lock.
    fn optional_outputs(&self, stage: &Configured, pipeline: &Pipeline) -> Outputs {
        let _ = (stage, pipeline);
        Vec::new()
    }
    /// Fingerprint inputs under the run's command-line `overrides` (the kinds whose results
    /// depend on one name it in [`StageInputs::overrides`]). May call cheap tools (cached
    /// versions), never the GPU directly.
    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        overrides: &Overrides,
    ) -> anyhow::Result<StageInputs>;
    /// Fetch what the stage's inputs depend on before they are fingerprinted (the build and
    /// tune kinds install a pinned nvcc this machine lacks), and rebuild the derived files a
    /// fresh clone lacks from the committed records (the tune's elite cubins), so nothing
    /// that is current is measured again. A run calls it for each selected stage before
    /// deciding what is stale; `repro status` and dry runs never do. `say` shows progress.
    fn prepare(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        let _ = (stage, pipeline, root, say);
        Ok(())
    }
    /// Problems with the pipeline-wide settings this kind reads (the profile kind's
    /// `gates.profile:`, against what its stages' `configs` profile), checked once at load,
    /// whatever stages use the kind.
    fn pipeline_problems(&self, pipeline: &Pipeline, configs: &Configs) -> Vec<SettingProblem> {
        let _ = (pipeline, configs);
        Vec::new()
    }
    /// Does the work, writing outputs under `ctx.staging`.
    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome>;
    /// The kind's own option keys, if it wants the loader to reject unknown ones with a
    /// "did you mean" (checked before [`StageKind::configure`]). `None`: the kind checks.
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
