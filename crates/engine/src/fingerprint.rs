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
use repro_pipeline::spec::Command;
use repro_pipeline::{Project, Stage};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
        hex(&Sha256::digest(self.json()))
    }

    /// The JSON serde_json writes for these inputs (fields in declaration order, empty parts
    /// left out, maps sorted), written here: serde_json looks at each byte of each string
    /// for one to escape, and at thousands of stages that was most of the fingerprints'
    /// time. [`json_string`] checks a whole string at once.
    fn json(&self) -> Vec<u8> {
        let Inputs {
            kind,
            command,
            options,
            deps,
            params,
            env,
            tools,
            hardware,
            overrides,
            upstream,
        } = self;
        // Sized for a stage with a few dozen deps, so the text is rarely copied as it grows.
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(b"{\"kind\":");
        json_string(&mut out, kind);
        out.extend_from_slice(b",\"command\":");
        json_string(&mut out, command);
        json_map(&mut out, "options", options);
        json_map(&mut out, "deps", deps);
        json_map(&mut out, "params", params);
        json_map(&mut out, "env", env);
        json_map(&mut out, "tools", tools);
        if let Some(hardware) = hardware {
            out.extend_from_slice(b",\"hardware\":");
            json_string(&mut out, hardware);
        }
        json_map(&mut out, "overrides", overrides);
        json_map(&mut out, "upstream", upstream);
        out.push(b'}');
        out
    }
}

/// `,"name":{…}` for a map that is not empty, as serde_json writes it.
fn json_map(out: &mut Vec<u8>, name: &str, map: &BTreeMap<String, String>) {
    if map.is_empty() {
        return;
    }
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":{");
    for (n, (key, value)) in map.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        json_string(out, key);
        out.push(b':');
        json_string(out, value);
    }
    out.push(b'}');
}

/// `s` as a JSON string, as serde_json writes it. One pass without an early exit (which
/// the compiler turns into a check of many bytes at once) tells whether it holds anything
/// JSON escapes (a control character, `"` or `\`); only a string that does is left to
/// serde_json.
fn json_string(out: &mut Vec<u8>, s: &str) {
    let escaped = s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    });
    if escaped {
        serde_json::to_writer(out, s).expect("a string serializes");
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
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
        let mut deps = BTreeMap::new();
        let read = stage.spec.deps.iter().map(Path::new).try_for_each(|file| {
            digest_dep(&project.root, file, cache, &mut deps)
                .with_context(|| cannot_read_dep(file, stage))
        });
        Declared {
            command: command_digest(&stage.spec.run, stage.spec.shell, &stage.outputs),
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

/// The digest of a stage's command: `run`, `shell` and its outputs, as the canonical JSON
/// `{"outs":…,"run":…,"shell":…}` (keys sorted; no value holds a mapping, so each is
/// written as serde_json writes it, without building a `Value` to sort).
fn command_digest(run: &Option<Command>, shell: bool, outputs: &[PathBuf]) -> String {
    let mut json = Vec::with_capacity(256);
    json.extend_from_slice(b"{\"outs\":");
    serde_json::to_writer(&mut json, outputs).expect("the outputs are UTF-8 paths");
    json.extend_from_slice(b",\"run\":");
    serde_json::to_writer(&mut json, run).expect("a command serializes");
    json.extend_from_slice(b",\"shell\":");
    serde_json::to_writer(&mut json, &shell).expect("a bool serializes");
    json.push(b'}');
    hex(&Sha256::digest(&json))[..16].to_string()
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
    fn the_fingerprinted_json_is_what_serde_json_writes() {
        let odd = [
            "",
            "plain",
            "quote \" and \\",
            "tab\tnew\nline\u{1}",
            "\u{7f} é 名",
        ];
        let map = |tag: &str| -> BTreeMap<String, String> {
            odd.iter()
                .map(|s| (format!("{tag}{s}"), format!("{s}{tag}")))
                .collect()
        };
        let full = Inputs {
            kind: odd[2].into(),
            command: odd[3].into(),
            options: map("o"),
            deps: map("d"),
            params: map("p"),
            env: map("e"),
            tools: map("t"),
            hardware: Some(odd[4].into()),
            overrides: map("v"),
            upstream: map("u"),
        };
        let sparse = Inputs {
            deps: map(""),
            upstream: map("u"),
            ..Default::default()
        };
        for inputs in [Inputs::default(), sparse, full] {
            assert_eq!(inputs.json(), serde_json::to_vec(&inputs).unwrap());
        }
    }

    #[test]
    fn the_command_digest_is_that_of_its_canonical_json() {
        let outputs = [PathBuf::from("out/a b.txt"), PathBuf::from("o/\"q\"\\é")];
        let commands = [
            None,
            Some(Command::Argv(vec![
                "sh".into(),
                "-c".into(),
                "echo \"$X\"\n".into(),
            ])),
            Some(Command::Line("make all && echo done\t".into())),
        ];
        for run in &commands {
            for shell in [false, true] {
                let json = serde_json::json!({"run": run, "shell": shell, "outs": outputs});
                let canonical =
                    hex(&Sha256::digest(canonical_json(&json).as_bytes()))[..16].to_string();
                assert_eq!(command_digest(run, shell, &outputs), canonical);
            }
        }
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
