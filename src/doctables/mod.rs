//! `repro docs [--check]`: the measured figures in the documentation are generated. Each
//! table between `<!-- repro:table NAME -->` and `<!-- /repro:table -->` in README.md,
//! kernels/README.md and docs/**/*.md is rendered from the committed artifacts (or a
//! committed result file under `benches/results/`, or `cargo metadata` for the crate
//! graph) and written back; `--check` changes
//! nothing and exits 1 naming every table that is not current, so CI catches a doc that
//! was not regenerated after new results were committed.

pub mod crates;
pub mod dispatch;
pub mod tables;

use anyhow::Context;
use std::path::{Path, PathBuf};

const OPEN: &str = "<!-- repro:table ";
const CLOSE: &str = "<!-- /repro:table -->";

/// The documents scanned, relative to the project root.
pub fn doc_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = ["README.md", "kernels/README.md"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| root.join(p).is_file())
        .collect();
    let mut stack = vec![PathBuf::from("docs")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
            continue;
        };
        for e in entries {
            let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
            let rel = dir.join(e.file_name());
            if e.file_type()?.is_dir() {
                stack.push(rel);
            } else if rel.extension().is_some_and(|x| x == "md") {
                files.push(rel);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Rewrite every marked table of `text`; the new text and the names of tables that changed.
/// `Err` names the line of a malformed marker.
pub fn regenerate(
    text: &str,
    file: &str,
    render: &dyn Fn(&str) -> Result<String, String>,
) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = Vec::new();
    let mut lines = text.split_inclusive('\n').enumerate();
    while let Some((i, line)) = lines.next() {
        out.push_str(line);
        let trimmed = line.trim();
        if trimmed.starts_with(CLOSE) {
            return Err(format!(
                "{file}:{}: {CLOSE} without an opening marker",
                i + 1
            ));
        }
        let Some(rest) = trimmed.strip_prefix(OPEN) else {
            continue;
        };
        let Some(name) = rest.strip_suffix("-->").map(str::trim) else {
            return Err(format!(
                "{file}:{}: write the marker as `{OPEN}NAME -->`",
                i + 1
            ));
        };
        let mut old = String::new();
        let mut closed = false;
        for (_, l) in lines.by_ref() {
            if l.trim().starts_with(CLOSE) {
                let body = render(name).map_err(|e| format!("{file}:{}: {e}", i + 1))?;
                let body = format!("\n{}\n\n", body.trim_end());
                if body != old {
                    changed.push(name.to_string());
                }
                out.push_str(&body);
                out.push_str(l);
                closed = true;
                break;
            }
            old.push_str(l);
        }
        if !closed {
            return Err(format!(
                "{file}:{}: table {name:?} has no closing {CLOSE}",
                i + 1
            ));
        }
    }
    Ok((out, changed))
}

/// What `repro docs` found: how many marked tables there are, and which were not current
/// (`file: table`; rewritten unless only checking).
#[derive(Debug, Default)]
pub struct Refresh {
    pub tables: usize,
    pub stale: Vec<String>,
}

/// `repro docs`: regenerate (or with `check`, only compare) every marked table.
pub fn refresh(file: &Path, check: bool) -> anyhow::Result<Refresh> {
    let project = repro_stages::load(file)?;
    let root = repro_report::diff::project_root(file);
    let artifacts = repro_report::artifacts::Artifacts::load(&root)?;
    let workloads = repro_pipeline::workload::Workloads::of(&project.pipeline);
    let sources = tables::Sources {
        root: &root,
        pipeline: &project.pipeline,
        configs: &project.configs,
        artifacts: &artifacts,
        control: project.pipeline.control.as_deref(),
        primary: workloads.iter().next().map(|(_, d)| d.primary.as_str()),
    };
    let render = |name: &str| tables::render(name, &sources);
    let mut stale = Vec::new();
    let mut tables = 0;
    for rel in doc_files(&root)? {
        let path = root.join(&rel);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let shown = rel.display().to_string();
        let (new, changed) =
            regenerate(&text, &shown, &render).map_err(repro_base::errors::UsageError)?;
        tables += text.matches(OPEN).count();
        if changed.is_empty() {
            continue;
        }
        if !check {
            std::fs::write(&path, new)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        stale.extend(changed.into_iter().map(|n| format!("{shown}: {n}")));
    }
    Ok(Refresh { tables, stale })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(name: &str) -> Result<String, String> {
        match name {
            "a" => Ok("| x |\n|---|\n| 1 |\n".into()),
            _ => Err(format!("unknown table {name:?}")),
        }
    }

    #[test]
    fn rewrites_the_body_between_markers_and_keeps_the_rest() {
        let text = "intro\n<!-- repro:table a -->\nold figure 4.42\n<!-- /repro:table -->\nafter\n";
        let (new, changed) = regenerate(text, "d.md", &render).unwrap();
        assert_eq!(
            new,
            "intro\n<!-- repro:table a -->\n\n| x |\n|---|\n| 1 |\n\n<!-- /repro:table -->\nafter\n"
        );
        assert_eq!(changed, ["a"]);
        // Regenerating the result again changes nothing: --check passes.
        let (again, changed) = regenerate(&new, "d.md", &render).unwrap();
        assert_eq!(again, new);
        assert!(changed.is_empty());
    }

    #[test]
    fn malformed_markers_name_file_and_line() {
        let open = "x\n<!-- repro:table a -->\nbody\n";
        assert_eq!(
            regenerate(open, "d.md", &render).unwrap_err(),
            "d.md:2: table \"a\" has no closing <!-- /repro:table -->"
        );
        let unknown = "<!-- repro:table zz -->\n<!-- /repro:table -->\n";
        assert!(regenerate(unknown, "d.md", &render)
            .unwrap_err()
            .starts_with("d.md:1: unknown table \"zz\""));
        let stray = "<!-- /repro:table -->\n";
        assert!(regenerate(stray, "d.md", &render)
            .unwrap_err()
            .starts_with("d.md:1:"));
    }
}
