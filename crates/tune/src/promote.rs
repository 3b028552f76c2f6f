//! `repro promote <trial-or-source> --name <variant>`: a tune trial becomes a shipped
//! variant. A trial on a proposed source gets the source as `kernels/<name>.cu` (beside
//! the tuned kernel, so its local headers resolve) and a `kernels:` entry copied from the
//! tuned kernel; every promoted trial gets a `variants:` entry with the base variant's
//! defines overridden by the trial's configuration.
//!
//! pipeline.yaml is edited as text (one line appended to each block), so its comments and
//! layout stay; the edited text must load before anything is written, and a failure
//! leaves every file as it was.

use super::options::TuneOptions;
use super::proposer::store;
use super::proposer::store::short;
use super::proposer::store::SOURCES_DIR;
use super::space::Config;
use anyhow::bail;
use anyhow::Context;
use repro_pipeline::builtin_kind::BuiltinKind;
use repro_pipeline::KernelSpec;
use repro_pipeline::Project;
use repro_schema::TuneTrial;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

/// What a promotion did.
#[derive(Debug, Clone, PartialEq)]
pub struct Promoted {
    pub trial: u32,
    /// Short digest of the proposed source; `None`: the kernel's own.
    pub source: Option<String>,
    /// The kernel the variant builds (the new one for a proposed source).
    pub kernel: String,
    /// The source file written, relative to the root.
    pub file: Option<PathBuf>,
    /// The variant's defines.
    pub defines: BTreeMap<String, String>,
}

/// Promote the trial `what` names (a trial number, or the leading hex digits of a proposed
/// source's digest: its best passing trial) of tune stage `stage` (default: the only one)
/// to the variant `name` of `project`.
pub fn promote(
    project: &Project,
    what: &str,
    name: &str,
    stage: Option<&str>,
) -> anyhow::Result<Promoted> {
    let root = &project.root;
    let pipeline = &project.pipeline;
    if !valid_name(name) {
        bail!("`{name}` is not a usable variant name: letters, digits, `-`, `_` and `.`, starting with a letter or digit");
    }
    if pipeline.variants.contains_key(name) || pipeline.kernels.contains_key(name) {
        bail!(
            "`{name}` is already a variant or kernel in {}; pick another --name",
            project.file.display()
        );
    }
    let tunes: Vec<_> = project
        .stages
        .iter()
        .filter(|s| s.kind.kind() == BuiltinKind::Tune.as_str())
        .collect();
    let names = || {
        tunes
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let stage = match (stage, tunes.as_slice()) {
        (Some(n), _) => tunes.iter().find(|s| s.name == n).with_context(|| {
            format!(
                "no tune stage `{n}` in {} (tune stages: {})",
                project.file.display(),
                names()
            )
        })?,
        (None, [one]) => one,
        (None, []) => bail!("{} has no tune stage", project.file.display()),
        (None, _) => bail!(
            "{} has several tune stages ({}): say which with --stage NAME",
            project.file.display(),
            names()
        ),
    };
    let o: &TuneOptions = stage.config.of();
    let tune_log = o.file("tune_log.csv");
    let log_text = std::fs::read_to_string(root.join(&tune_log)).with_context(|| {
        format!("cannot read {tune_log}: run the tune stage first (`repro tune`)")
    })?;
    let rows = repro_schema::parse_tune_log(&log_text, &tune_log)?;
    let row = pick(&rows, what, &tune_log)?;
    if !row.status.is_ok() {
        bail!(
            "trial {} did not pass (status `{}`): only a trial that passed every gate can be promoted",
            row.trial,
            row.status
        );
    }
    let config: Config = serde_json::from_str(&row.config)
        .with_context(|| format!("{tune_log}: trial {} has no readable config", row.trial))?;
    let mut defines = o.base_defines.clone();
    for (k, v) in &config {
        defines.insert(k.clone(), v.to_string());
    }
    let tuned = &pipeline.kernels[&o.kernel];
    let pipeline_text = std::fs::read_to_string(&project.file)
        .with_context(|| format!("cannot read {}", project.file.display()))?;
    let mut text = pipeline_text.clone();
    let origin = match row.source.as_str() {
        "" => format!("tune trial {}", row.trial),
        s => format!("tune trial {} (source {s})", row.trial),
    };
    let (kernel, file) = if row.source.is_empty() {
        (o.kernel.clone(), None)
    } else {
        let source = source_text(root, &row.source, tuned, &o.file("proposals"))?;
        let dir = Path::new(&tuned.source).parent().unwrap_or(Path::new(""));
        let file = dir.join(format!("{name}.cu"));
        if root.join(&file).exists() {
            bail!("{} exists already; pick another --name", file.display());
        }
        let entry = KernelSpec {
            source: file.to_string_lossy().into_owned(),
            ..tuned.clone()
        };
        text = add_entry(&text, "kernels", name, &kernel_flow(&entry), &origin)?;
        (name.to_string(), Some((file, source)))
    };
    text = add_entry(
        &text,
        "variants",
        name,
        &variant_flow(&kernel, &defines),
        &origin,
    )?;

    if let Some((file, source)) = &file {
        std::fs::write(root.join(file), source)
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    let checked = repro_pipeline::load::load_str(&text, &project.file, root, &project.kinds);
    let written = checked.map_err(|e| anyhow::anyhow!("{e}")).and_then(|_| {
        let tmp = project.file.with_extension("yaml.promote");
        std::fs::write(&tmp, &text)
            .and_then(|_| std::fs::rename(&tmp, &project.file))
            .with_context(|| format!("cannot write {}", project.file.display()))
    });
    if let Err(e) = written {
        if let Some((file, _)) = &file {
            let _ = std::fs::remove_file(root.join(file));
        }
        return Err(e.context(format!("{} was left as it was", project.file.display())));
    }
    Ok(Promoted {
        trial: row.trial,
        source: (!row.source.is_empty()).then(|| row.source.clone()),
        kernel,
        file: file.map(|(f, _)| f),
        defines,
    })
}

/// The row `what` names: a trial number, or a source prefix (its best passing trial).
fn pick<'a>(rows: &'a [TuneTrial], what: &str, log: &str) -> anyhow::Result<&'a TuneTrial> {
    if let Ok(n) = what.parse::<u32>() {
        return rows
            .iter()
            .find(|r| r.trial == n)
            .with_context(|| format!("no trial {n} in {log}"));
    }
    let prefix = what.to_ascii_lowercase();
    if prefix.len() < 4 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("`{what}`: expected a trial number or at least 4 hex digits of a `source` of {log}");
    }
    let matching: Vec<&TuneTrial> = rows
        .iter()
        .filter(|r| !r.source.is_empty() && r.source.starts_with(&prefix))
        .collect();
    let sources: std::collections::BTreeSet<&str> =
        matching.iter().map(|r| r.source.as_str()).collect();
    if sources.len() > 1 {
        let list: Vec<&str> = sources.into_iter().collect();
        bail!(
            "`{what}` matches several sources ({}); give more digits",
            list.join(", ")
        );
    }
    matching
        .iter()
        .filter(|r| r.status.is_ok())
        .min_by(|a, b| {
            a.p50_us
                .partial_cmp(&b.p50_us)
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .or(matching.first())
        .copied()
        .with_context(|| format!("no trial of {log} compiled a source starting `{what}`"))
}

/// The text of the proposed source `digest` (short): kept under `.repro/`, else rebuilt
/// from its diff in the tune's `proposals/` and the kernel's source.
fn source_text(
    root: &Path,
    digest: &str,
    kernel: &KernelSpec,
    proposals: &str,
) -> anyhow::Result<String> {
    let name = Path::new(&kernel.source).file_name().unwrap_or_default();
    let kept = root.join(SOURCES_DIR).join(digest).join(name);
    if let Ok(text) = std::fs::read_to_string(&kept) {
        if short(&store::digest(&text)) == digest {
            return Ok(text);
        }
    }
    let diff_file = format!("{proposals}/{digest}.patch");
    let Ok(diff) = std::fs::read_to_string(root.join(&diff_file)) else {
        bail!("no copy of source {digest}: not under {SOURCES_DIR}/ (a fresh clone has none) nor as {diff_file} (kept for the elite only); rerun the tune")
    };
    let base = std::fs::read_to_string(root.join(&kernel.source))
        .with_context(|| format!("cannot read {}", kernel.source))?;
    let text = store::apply(&base, &diff).map_err(|e| {
        anyhow::anyhow!(
            "{diff_file}: {e} to {} (it changed since the tune)",
            kernel.source
        )
    })?;
    if short(&store::digest(&text)) != digest {
        bail!(
            "{diff_file} applied to {} gives another source than the tune's (the kernel changed since the tune)",
            kernel.source
        );
    }
    Ok(text)
}

fn valid_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A YAML string scalar: plain when YAML reads it back as that string, else double-quoted.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./+=".contains(c))
        && s.parse::<f64>().is_err()
        && !["true", "false", "null", "yes", "no", "on", "off"]
            .contains(&s.to_ascii_lowercase().as_str());
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

fn kernel_flow(k: &KernelSpec) -> String {
    let mut parts = vec![
        format!("source: {}", scalar(&k.source)),
        format!("entry: {}", scalar(&k.entry)),
    ];
    if !k.flags.is_empty() {
        let flags: Vec<String> = k.flags.iter().map(|f| scalar(f)).collect();
        parts.push(format!("flags: [{}]", flags.join(", ")));
    }
    if let Some(p) = &k.precision {
        parts.push(format!("precision: {}", scalar(p)));
    }
    if let Some(g) = &k.ptxas {
        // The promoted kernel is judged by the gates its trial passed.
        let limits = [
            ("max_registers", g.max_registers.map(u64::from)),
            ("max_smem_bytes", g.max_smem_bytes),
            ("max_spill_bytes", g.max_spill_bytes),
        ];
        let named: Vec<String> = limits
            .iter()
            .filter_map(|(key, v)| v.map(|v| format!("{key}: {v}")))
            .collect();
        parts.push(format!("ptxas: {{{}}}", named.join(", ")));
    }
    format!("{{{}}}", parts.join(", "))
}

fn variant_flow(kernel: &str, defines: &BTreeMap<String, String>) -> String {
    let defines: Vec<String> = defines
        .iter()
        .map(|(k, v)| match v.parse::<i64>() {
            Ok(n) => format!("{k}: {n}"),
            Err(_) => format!("{k}: {}", scalar(v)),
        })
        .collect();
    format!(
        "{{kernel: {}, defines: {{{}}}}}",
        scalar(kernel),
        defines.join(", ")
    )
}

/// `text` with `name: value  # promoted from <origin>` as the last entry of the
/// top-level block `key:` (a new block at the end when there is none).
fn add_entry(
    text: &str,
    key: &str,
    name: &str,
    value: &str,
    origin: &str,
) -> anyhow::Result<String> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .is_some_and(|r| {
                r.trim().is_empty()
                    || r.trim_start().starts_with('#')
                    || r.trim_start().starts_with('{')
            })
    });
    let line = |indent: &str| format!("{indent}{name}: {value}   # promoted from {origin}");
    let Some(h) = header else {
        let mut out = text.trim_end_matches('\n').to_string();
        out.push_str(&format!("\n\n{key}:\n{}\n", line("  ")));
        return Ok(out);
    };
    let rest = lines[h][key.len() + 1..].trim_start();
    if rest.starts_with('{') {
        bail!("`{key}:` at line {} is one inline mapping; write it one entry per line so an entry can be added", h + 1);
    }
    let block = lines[h + 1..]
        .iter()
        .take_while(|l| l.is_empty() || l.starts_with([' ', '\t', '#']))
        .count();
    let entries: Vec<usize> = (h + 1..h + 1 + block)
        .filter(|&i| lines[i].starts_with([' ', '\t']) && !lines[i].trim().is_empty())
        .collect();
    let indent: String = entries
        .iter()
        .map(|&i| lines[i])
        .find(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
        .unwrap_or_else(|| "  ".into());
    let after = entries.last().copied().unwrap_or(h);
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out.insert(after + 1, line(&indent));
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "version: 1   # top\nkernels:\n  k: {source: kernels/k.cu, entry: f}   # the kernel\n\n# variants below\nvariants:\n  a: {kernel: k}\n  # a comment inside\n  b: {kernel: k}\n\nstages:\n  build: {uses: build}\n";

    #[test]
    fn entries_go_last_in_their_block_and_comments_stay() {
        let out = add_entry(YAML, "variants", "c", "{kernel: k}", "tune trial 3").unwrap();
        assert!(
            out.contains(
                "  b: {kernel: k}\n  c: {kernel: k}   # promoted from tune trial 3\n\nstages:"
            ),
            "{out}"
        );
        assert!(
            out.contains("# a comment inside")
                && out.contains("# variants below")
                && out.contains("# top")
        );
        let out = add_entry(
            YAML,
            "kernels",
            "k2",
            "{source: kernels/k2.cu, entry: f}",
            "x",
        )
        .unwrap();
        assert!(out.contains("# the kernel\n  k2: {source: kernels/k2.cu, entry: f}   # promoted from x\n\n# variants below"), "{out}");
        let none = add_entry("version: 1\n", "variants", "c", "{kernel: k}", "x").unwrap();
        assert_eq!(
            none,
            "version: 1\n\nvariants:\n  c: {kernel: k}   # promoted from x\n"
        );
        let e = add_entry("variants: {a: {kernel: k}}\n", "variants", "c", "{}", "x").unwrap_err();
        assert!(e.to_string().contains("one inline mapping"), "{e}");
    }

    #[test]
    fn values_are_flow_yaml() {
        let d = BTreeMap::from([
            ("A".to_string(), "1".to_string()),
            ("B".to_string(), "x y".to_string()),
        ]);
        assert_eq!(
            variant_flow("k", &d),
            r#"{kernel: k, defines: {A: 1, B: "x y"}}"#
        );
        let mut k = KernelSpec {
            source: "kernels/k.cu".into(),
            entry: "k_fwd".into(),
            flags: vec!["-lineinfo".into()],
            precision: None,
            ptxas: Some(repro_pipeline::PtxasGates {
                max_registers: Some(168),
                max_smem_bytes: Some(232448),
                max_spill_bytes: None,
            }),
            ..KernelSpec::default()
        };
        assert_eq!(
            kernel_flow(&k),
            "{source: kernels/k.cu, entry: k_fwd, flags: [-lineinfo], ptxas: {max_registers: 168, max_smem_bytes: 232448}}"
        );
        k.ptxas = None;
        assert_eq!(
            kernel_flow(&k),
            "{source: kernels/k.cu, entry: k_fwd, flags: [-lineinfo]}"
        );
        assert_eq!(scalar("1.5"), "\"1.5\"");
        assert_eq!(scalar("true"), "\"true\"");
        assert_eq!(scalar("kernels/k.cu"), "kernels/k.cu");
        assert!(valid_name("mma-evo.1") && !valid_name("-x") && !valid_name("a b"));
    }
}
