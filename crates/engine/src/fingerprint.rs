//! A stage's fingerprint: sha256 over everything that can change its results — the
//! canonical spec (kind, command, outputs, the kind's options), the contents of its deps,
//! params, declared env, tool versions and hardware from
//! [`StageKind::inputs_with_overrides`], command-line overrides that apply to it, and the
//! fingerprints of the stages it needs. Volatile things (time, host name, timeout,
//! executor) are not in it.
//!
//! [`Inputs`] keeps every part separately so `repro status` can say which one changed.

use super::statcache::StatCache;
use super::Overrides;
#[cfg(doc)]
use super::StageKind;
use anyhow::Context;
use repro_base::tools::hex;
pub use repro_pipeline::param_value::{canonical, canonical_json};
use repro_pipeline::{Project, Stage};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// Digest recorded for a dep that does not exist (yet).
pub const MISSING: &str = "missing";

/// The parts of a stage's fingerprint, as recorded in the lock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    pub kind: String,
    /// Digest of the canonical command: `run`, `shell` and the declared outputs.
    pub command: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// Dep file (relative path) → sha256, or `missing`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deps: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, String>,
    /// Needed stage → its fingerprint.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub upstream: BTreeMap<String, String>,
}

impl Inputs {
    /// The fingerprint: sha256 of the canonical JSON of all parts.
    pub fn fingerprint(&self) -> String {
        // Sized for a stage with a few dozen deps, so the text is rarely copied as it grows.
        let mut bytes = Vec::with_capacity(4096);
        serde_json::to_writer(&mut bytes, self).expect("maps of strings serialize");
        hex(&Sha256::digest(&bytes))
    }
}

/// Gather the inputs of `stage` now. `upstream` holds the current fingerprints of the
/// stages it needs.
pub fn compute(
    project: &Project,
    stage: &Stage,
    upstream: BTreeMap<String, String>,
    overrides: &Overrides,
    cache: &mut StatCache,
) -> anyhow::Result<Inputs> {
    let declared = Declared::read(project, stage, cache);
    declared.complete(project, stage, upstream, overrides, cache)
}

/// The parts of a stage's inputs that its declaration alone gives: the digest of its
/// command and those of its declared deps. They need neither its kind nor the stages it
/// needs, so evaluating a whole pipeline reads them for many stages at once
/// ([`crate::status::evaluate_all`]).
pub struct Declared {
    command: String,
    /// Dep → digest, or why a dep cannot be read.
    deps: anyhow::Result<BTreeMap<String, String>>,
}

impl Declared {
    pub fn read(project: &Project, stage: &Stage, cache: &mut StatCache) -> Declared {
        let spec = &stage.spec;
        let command = serde_json::json!({
            "run": spec.run,
            "shell": spec.shell,
            "outs": stage.outputs,
        });
        let mut deps = BTreeMap::new();
        let read = spec.deps.iter().map(Path::new).try_for_each(|file| {
            digest_dep(&project.root, file, cache, &mut deps)
                .with_context(|| cannot_read_dep(file, stage))
        });
        Declared {
            command: hex(&Sha256::digest(canonical_json(&command).as_bytes()))[..16].to_string(),
            deps: read.map(|()| deps),
        }
    }

    /// The inputs of `stage`: these parts, and those its kind adds. `upstream` holds the
    /// current fingerprints of the stages it needs.
    pub fn complete(
        self,
        project: &Project,
        stage: &Stage,
        upstream: BTreeMap<String, String>,
        overrides: &Overrides,
        cache: &mut StatCache,
    ) -> anyhow::Result<Inputs> {
        let spec = &stage.spec;
        let extra = stage
            .kind
            .inputs(
                &stage.configured(&project.configs),
                &project.pipeline,
                &project.root,
                overrides,
            )
            .with_context(|| format!("cannot gather the inputs of stage `{}`", stage.name))?;
        let mut deps = self.deps?;
        for file in &extra.files {
            digest_dep(&project.root, file, cache, &mut deps)
                .with_context(|| cannot_read_dep(file, stage))?;
        }
        for file in &extra.code {
            let digest = match std::fs::read(project.root.join(file)) {
                Ok(bytes) => super::code_digest::code_digest(&bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => MISSING.to_string(),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "cannot read source `{}` of stage `{}`",
                            file.display(),
                            stage.name
                        )
                    })
                }
            };
            deps.insert(super::statcache::path_key(file), digest);
        }
        let mut params: BTreeMap<String, String> = spec
            .params
            .iter()
            .map(|(k, v)| (k.clone(), canonical(v)))
            .collect();
        params.extend(extra.params);
        Ok(Inputs {
            kind: stage.kind.kind().to_string(),
            command: self.command,
            options: spec
                .options
                .iter()
                .map(|(k, v)| (canonical(k), canonical(v)))
                .collect(),
            deps,
            params,
            env: spec.env.clone(),
            tools: extra.tools,
            hardware: extra.hardware,
            overrides: extra.overrides,
            upstream,
        })
    }
}

fn cannot_read_dep(file: &Path, stage: &Stage) -> String {
    format!(
        "cannot read dep `{}` of stage `{}`",
        file.display(),
        stage.name
    )
}

fn digest_dep(
    root: &Path,
    rel: &Path,
    cache: &mut StatCache,
    out: &mut BTreeMap<String, String>,
) -> anyhow::Result<()> {
    match cache.digest_tree_into(root, rel, out) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.insert(super::statcache::path_key(rel), MISSING.to_string());
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_ignores_key_order() {
        let a: serde_yaml::Value = serde_yaml::from_str("{b: 1, a: [x, {d: 2, c: 3}]}").unwrap();
        let b: serde_yaml::Value = serde_yaml::from_str("{a: [x, {c: 3, d: 2}], b: 1}").unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(canonical(&a), r#"{"a":["x",{"c":3,"d":2}],"b":1}"#);
    }

    #[test]
    fn every_part_moves_the_fingerprint() {
        let base = Inputs {
            kind: "cmd".into(),
            command: "c".into(),
            ..Default::default()
        };
        let mut seen = vec![base.fingerprint()];
        let mut with = |f: &dyn Fn(&mut Inputs)| {
            let mut i = base.clone();
            f(&mut i);
            let fp = i.fingerprint();
            assert!(!seen.contains(&fp));
            seen.push(fp);
        };
        with(&|i| i.command = "d".into());
        with(&|i| {
            i.deps.insert("a".into(), "1".into());
        });
        with(&|i| {
            i.params.insert("a".into(), "1".into());
        });
        with(&|i| {
            i.env.insert("a".into(), "1".into());
        });
        with(&|i| {
            i.tools.insert("a".into(), "1".into());
        });
        with(&|i| i.hardware = Some("L4".into()));
        with(&|i| {
            i.upstream.insert("a".into(), "1".into());
        });
        with(&|i| {
            i.overrides.insert("budget".into(), "8".into());
        });
    }
}
