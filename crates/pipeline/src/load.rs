//! Finding and loading `pipeline.yaml` into a validated [`Project`]: the typed pipeline,
//! its stages resolved to their kinds, and the stage graph.

use super::dag::Dag;
use super::diag::{did_you_mean, quoted_list, Diagnostic, PipelineError};
use super::spans::{DuplicateKey, SpanIndex, ALIAS_FACTOR, MAX_DEPTH};
use super::spec::{Pipeline, StageSpec};
use super::validate;
use crate::kind::{Config, Configs, Configured, Kinds, StageKind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A loaded, valid pipeline and where it lives.
pub struct Project {
    /// The pipeline file as the user named it (for messages).
    pub file: PathBuf,
    /// The project root (the pipeline file's folder), absolute.
    pub root: PathBuf,
    pub pipeline: Pipeline,
    /// In declaration order; index `i` is node `i` of `dag`.
    pub stages: Vec<Stage>,
    pub dag: Dag,
    /// The stage kinds it was loaded with, to load an edited text of it again.
    pub kinds: Kinds,
    /// Every stage's options as its kind decoded them.
    pub configs: Configs,
}

/// One stage resolved to its kind.
pub struct Stage {
    pub name: String,
    pub spec: Arc<StageSpec>,
    pub kind: Arc<dyn StageKind>,
    /// Declared outputs (from the kind), clean relative paths.
    pub outputs: Vec<PathBuf>,
    /// Those of `outputs` the kind may leave unwritten.
    pub optional_outputs: Vec<PathBuf>,
    /// What the kind decoded from the stage's options at load.
    pub config: Config,
}

impl Stage {
    /// The stage as its kind's methods take it, among the `peers` of its project.
    pub fn configured<'a>(&'a self, peers: &'a Configs) -> Configured<'a> {
        Configured {
            name: &self.name,
            spec: &self.spec,
            config: &self.config,
            peers,
        }
    }
}

impl Project {
    pub fn stage(&self, name: &str) -> Option<&Stage> {
        self.dag.index(name).map(|i| &self.stages[i])
    }
}

/// Why a pipeline could not be loaded. Both are exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {}: {source}\n  help: run repro in the project folder, or name the file with `-f path/to/pipeline.yaml`", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Invalid(#[from] PipelineError),
}

/// Read, parse and validate `file`, resolving each stage's `uses:` among `kinds`.
pub fn load(file: &Path, kinds: &Kinds) -> Result<Project, LoadError> {
    let (text, root) = read(file)?;
    load_str(&text, file, &root, kinds)
}

/// Read and parse `file` without validating it: the first half of [`load`] (the scan and
/// the typed parse, each remembered by the text's SHA-256, their errors at
/// `file:line:column`). For `repro exec`, which reads only the declarations it runs, and
/// runs where the files the stages name may be absent (a lone copy of pipeline.yaml).
pub fn parse(file: &Path) -> Result<Pipeline, LoadError> {
    let (text, root) = read(file)?;
    Ok(parse_str(&text, file, &root)?.0)
}

/// The text of `file` and the project root (its folder), absolute.
fn read(file: &Path) -> Result<(String, PathBuf), LoadError> {
    let read_error = |source| LoadError::Read {
        file: file.to_path_buf(),
        source,
    };
    let mut bytes = read_regular(file).map_err(read_error)?;
    let bom = bytes.len()
        - decode(&bytes, file)
            .map_err(|d| PipelineError(vec![d]))?
            .len();
    let root = project_root(file).map_err(read_error)?;
    // The decoded bytes become the text without a copy.
    bytes.drain(..bom);
    Ok((String::from_utf8(bytes).expect("decoded as UTF-8"), root))
}

/// The root of the project whose pipeline file is `file`: the file's folder, absolute.
pub fn project_root(file: &Path) -> std::io::Result<PathBuf> {
    let root = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::path::absolute(root)
}

/// The bytes of `file`, which must be a regular file (never a FIFO or `/dev/zero`).
fn read_regular(file: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    repro_base::fsio::open_regular(file)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The file's text: UTF-8, without a leading byte-order mark. Anything else is an error at
/// the first byte that is not UTF-8.
pub fn decode<'a>(bytes: &'a [u8], file: &Path) -> Result<&'a str, Diagnostic> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        // Valid by construction: it is the prefix from_utf8 accepted.
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let col = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        let byte = bytes[e.valid_up_to()];
        let utf16 = bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF");
        Diagnostic {
            file: file.to_path_buf(),
            line,
            col,
            message: format!("the file is not UTF-8 text (byte 0x{byte:02X})"),
            help: Some(if utf16 {
                "it starts with a UTF-16 byte-order mark: save it as UTF-8".into()
            } else {
                "save the file as UTF-8, or remove the stray byte".into()
            }),
        }
    })
}

/// Parse and validate pipeline text that lives at `file` in project `root`, resolving each
/// stage's `uses:` among `kinds`.
pub fn load_str(text: &str, file: &Path, root: &Path, kinds: &Kinds) -> Result<Project, LoadError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (pipeline, top_keys) = parse_str(text, file, root)?;
    let workload_diags = crate::workload::diagnostics(&pipeline, text, file, root);
    let workload_ok = workload_diags.is_empty();
    let (stages, dag, configs) =
        match validate::validate(&pipeline, text, &top_keys, file, root, workload_ok, kinds) {
            Ok(ok) if workload_ok => ok,
            Ok(_) => return Err(PipelineError(workload_diags).into()),
            Err(PipelineError(mut diags)) => {
                diags.extend(workload_diags);
                return Err(PipelineError(diags).into());
            }
        };
    Ok(Project {
        file: file.to_path_buf(),
        root: root.to_path_buf(),
        pipeline,
        stages,
        dag,
        kinds: kinds.clone(),
        configs,
    })
}

/// The typed pipeline of `text` (without a byte-order mark) and the keys written at its top
/// level: the scan (nesting, keys written twice, alias bombs), then the typed parse.
fn parse_str(
    text: &str,
    file: &Path,
    root: &Path,
) -> Result<(Pipeline, Vec<String>), PipelineError> {
    let sha256 = super::scan_cache::sha256_of(text);
    let scan = super::scan_cache::scan(text, &sha256, root);
    if let Some(pos) = scan.too_deep {
        return Err(PipelineError(vec![Diagnostic {
            file: file.to_path_buf(),
            line: pos.line,
            col: pos.col,
            message: format!("lists and mappings nest more than {MAX_DEPTH} levels deep here"),
            help: Some(
                "a pipeline needs a few levels: check for unclosed or repeated `[`, `{` or `- `"
                    .into(),
            ),
        }]));
    }
    if !scan.duplicates.is_empty() {
        return Err(PipelineError(duplicate_keys(&scan.duplicates, file)));
    }
    if let Some((pos, alias)) = scan.alias_bomb {
        return Err(PipelineError(vec![Diagnostic {
            file: file.to_path_buf(),
            line: pos.line,
            col: pos.col,
            message: format!(
                "the alias `{alias}` repeats its anchor's value, aliases inside it included, until the document is more than {ALIAS_FACTOR} times its size"
            ),
            help: Some("write the values out, or nest fewer aliases inside anchors".into()),
        }]));
    }
    let pipeline = match super::parse_cache::read(root, &sha256) {
        Some(pipeline) => pipeline,
        None => {
            let pipeline: Pipeline = serde_yaml::from_str(text)
                .map_err(|e| PipelineError(vec![from_serde(&e, file, &SpanIndex::build(text))]))?;
            super::parse_cache::remember(root, &sha256, &pipeline);
            pipeline
        }
    };
    Ok((pipeline, scan.top_keys))
}

/// One error per key written twice in the same mapping, at the second, naming the first.
fn duplicate_keys(duplicates: &[DuplicateKey], file: &Path) -> Vec<Diagnostic> {
    duplicates
        .iter()
        .map(|d| {
            let (key, parent) = d.path.split_last().expect("a key path names its key");
            let place = if parent.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in `{}`", parent.join("."))
            };
            Diagnostic {
                file: file.to_path_buf(),
                line: d.second.line,
                col: d.second.col,
                message: format!(
                    "duplicate key `{key}` {place}: first written at line {}, column {}",
                    d.first.line, d.first.col
                ),
                help: Some(
                    "a key may appear once per mapping (YAML would keep only one of them): remove or rename one".into(),
                ),
            }
        })
        .collect()
}

/// Turn serde_yaml's message into one with a position, the key at fault, and a fix.
fn from_serde(err: &serde_yaml::Error, file: &Path, spans: &SpanIndex) -> Diagnostic {
    let full = err.to_string();
    // serde_yaml appends " at line L column C"; we print the position ourselves.
    let text = without_position(&full);
    let text = text.as_str();
    // A leading "a.b.c: " is the key path of the problem.
    let (path, body) = match text.split_once(": ") {
        Some((p, rest)) if !p.contains(' ') && !p.is_empty() => (Some(p), rest),
        _ => (None, text),
    };
    // Errors inside a stage come without a position (its keys are buffered to collect the
    // kind's options); a message that starts with a `key` names where to point.
    let named_key = body
        .strip_prefix('`')
        .and_then(|rest| rest.split_once('`'))
        .map(|(k, _)| k);
    let mut segs: Vec<&str> = path.map(|p| p.split('.').collect()).unwrap_or_default();
    segs.extend(named_key);
    let (line, col) = match (spans.value(&segs), err.location()) {
        (Some(pos), _) if named_key.is_some() => (pos.line, pos.col),
        (_, Some(loc)) => (loc.line(), loc.column()),
        (_, None) => {
            let pos = spans.locate(&segs);
            (pos.line, pos.col)
        }
    };
    let place = path.map(|p| format!(" in `{p}`")).unwrap_or_default();
    let (message, help) = if let Some(rest) = body.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let options: Vec<&str> = expected
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s)
            .collect();
        let help = did_you_mean(key, options.iter().copied())
            .unwrap_or_else(|| format!("expected one of {}", quoted_list(options.iter().copied())));
        (format!("unknown key `{key}`{place}"), help)
    } else if let Some(rest) = body.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or(rest);
        (
            format!("missing key `{key}`{place}"),
            format!("add `{key}:`; see the pipeline.yaml reference in README.md"),
        )
    } else if err.location().is_some() && path.is_none() && !body.starts_with("invalid") {
        (
            format!("malformed YAML: {body}"),
            "fix the YAML syntax at this position (indentation, a missing `:` or an unclosed bracket)".into(),
        )
    } else {
        (
            format!("{body}{place}"),
            "see the pipeline.yaml reference in README.md for this key's type".into(),
        )
    };
    Diagnostic {
        file: file.to_path_buf(),
        line,
        col,
        message,
        help: Some(help),
    }
}

/// serde_yaml's message without its " at line L column C" (we print the position first).
fn without_position(message: &str) -> String {
    let Some(at) = message.find(" at line ") else {
        return message.to_string();
    };
    let rest = &message[at + " at line ".len()..];
    let after_numbers = rest
        .find(|c: char| {
            !(c.is_ascii_digit() || c == ' ' || c.is_ascii_alphabetic() && "column".contains(c))
        })
        .map_or("", |i| &rest[i..]);
    format!("{}{}", &message[..at], after_numbers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_serde_positions() {
        assert_eq!(
            without_position(
                "did not find expected ',' at line 4 column 1, while parsing a flow mapping"
            ),
            "did not find expected ',', while parsing a flow mapping"
        );
        assert_eq!(
            without_position("unknown field `x` at line 2 column 3"),
            "unknown field `x`"
        );
    }
}
