//! The kinds' methods as the tests call them: on a stage's name, spec and pipeline, each
//! call configuring the stage first as the loader would.

use repro_pipeline::kind::{
    Config, Configs, Configured, OptionError, Outputs, Overrides, StageInputs, StageKind,
};
use repro_pipeline::{Pipeline, StageSpec};
use std::path::Path;

pub(crate) trait Calls: StageKind {
    /// What the loader keeps of the stage: its config, alone among its peers.
    fn configs(&self, name: &str, spec: &StageSpec, p: &Pipeline) -> Result<Configs, OptionError> {
        let config: Config = self.configure(name, spec, p)?;
        Ok(Configs::new(vec![(name.to_string(), config)]))
    }

    /// [`StageKind::configure`], the value dropped.
    fn check(&self, name: &str, spec: &StageSpec, p: &Pipeline) -> Result<(), OptionError> {
        self.configure(name, spec, p).map(drop)
    }

    fn outputs_of(&self, name: &str, spec: &StageSpec, p: &Pipeline) -> Outputs {
        let peers = self.configs(name, spec, p).expect("valid options");
        self.outputs(&configured(name, spec, &peers), p)
    }

    fn optional_outputs_of(&self, name: &str, spec: &StageSpec, p: &Pipeline) -> Outputs {
        let peers = self.configs(name, spec, p).expect("valid options");
        self.optional_outputs(&configured(name, spec, &peers), p)
    }

    fn inputs_under(
        &self,
        name: &str,
        spec: &StageSpec,
        p: &Pipeline,
        root: &Path,
        overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let peers = self.configs(name, spec, p)?;
        self.inputs(&configured(name, spec, &peers), p, root, overrides)
    }

    fn inputs_of(
        &self,
        name: &str,
        spec: &StageSpec,
        p: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs> {
        self.inputs_under(name, spec, p, root, &Overrides::default())
    }
}

impl<K: StageKind> Calls for K {}

/// Stage `name` as its kind's methods take it, from `peers` (which must hold it).
pub(crate) fn configured<'a>(
    name: &'a str,
    spec: &'a StageSpec,
    peers: &'a Configs,
) -> Configured<'a> {
    Configured {
        name,
        spec,
        config: peers.get(name).expect("the stage is configured"),
        peers,
    }
}
