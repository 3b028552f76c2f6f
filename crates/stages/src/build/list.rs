//! `repro build --list`: the variants' resource usage as a table, read from the recorded
//! `artifacts/build/<variant>.json` (nothing is compiled), then the tail paths each
//! variant's declared shapes reach.

use super::record_path;
use anyhow::Context;
use repro_pipeline::Pipeline;
use repro_pipeline::{workload::tails, workload::Workloads};
use repro_schema::BuildRecord;
use std::path::Path;

/// The table for `variants`, from the records under `root`.
pub fn render(root: &Path, variants: &[&str]) -> anyhow::Result<String> {
    if variants.is_empty() {
        return Ok("pipeline.yaml declares no variants.\n".into());
    }
    let mut rows = vec![[
        "VARIANT",
        "ENTRY",
        "ARCH",
        "REGS",
        "SMEM",
        "DYN SMEM",
        "STACK",
        "SPILL ST/LD",
        "BARRIERS",
        "GATES",
    ]
    .map(String::from)
    .to_vec()];
    let mut missing = 0;
    for v in variants {
        let path = root.join(record_path(v));
        if !path.is_file() {
            missing += 1;
            rows.push(vec![
                v.to_string(),
                "not built yet — run `repro build`".into(),
            ]);
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let rec: BuildRecord = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a build record; rerun `repro build`",
                path.display()
            )
        })?;
        rows.extend(record_rows(&rec));
    }
    if missing == variants.len() {
        return Ok("No variant is built yet — run `repro build`.\n".into());
    }
    Ok(table(&rows))
}

/// The tail paths each variant's kernel declares (`kernels.<name>.tails`) with the declared
/// shapes that reach each (`repro_pipeline::workload::tails`), and a warning for each path a variant
/// has that no shape reaches; no text when no kernel declares tails. `file` is where `p`
/// was read, for the `file:line:column` of an expression that cannot be evaluated.
pub fn tails(p: &Pipeline, file: &Path) -> anyhow::Result<(String, Vec<String>)> {
    let workloads = Workloads::of(p);
    let mut rows = vec![["VARIANT", "TAIL", "CONDITION", "REACHED BY"]
        .map(String::from)
        .to_vec()];
    let mut warnings = Vec::new();
    for v in p.variants.keys() {
        let reach = tails::of_variant(p, v)
            .map_err(|e| anyhow::anyhow!(repro_pipeline::workload::render(p, file, &e)))?;
        for r in reach {
            let shapes = match &r.shapes {
                None => "- (the variant has no such path)".to_string(),
                Some(s) if s.is_empty() => "⚠ no declared shape".to_string(),
                Some(s) => s.join(", "),
            };
            if r.unreached() {
                let w = workloads.of_variant(p, v).map_or("", |(w, _)| w);
                // A declared workload's shapes, or the built-in `workload:`'s.
                let key = if p.workloads.contains_key(w) {
                    format!("workloads.{w}.shapes")
                } else {
                    "workload.shapes".to_string()
                };
                warnings.push(format!(
                    "variant `{v}` never runs its tail path `{}`: no shape of workload `{w}` has {}; add one under `{key}` in {}",
                    r.tail,
                    r.condition,
                    file.display()
                ));
            }
            rows.push(vec![v.clone(), r.tail, r.condition, shapes]);
        }
    }
    if rows.len() == 1 {
        return Ok((String::new(), warnings));
    }
    let title = "\nTail paths (kernels.<kernel>.tails in pipeline.yaml) and the declared shapes that reach them:\n";
    Ok((format!("{title}{}", table(&rows)), warnings))
}

/// One row per (architecture, entry function) of a record, or one per architecture that
/// failed to compile.
fn record_rows(rec: &BuildRecord) -> Vec<Vec<String>> {
    let num = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    let mut rows = Vec::new();
    for (arch, build) in &rec.archs {
        if !build.ok() {
            // The compiler's first error line says more than the exit status above it.
            let error = build.error.as_deref().unwrap_or("");
            let why = error
                .lines()
                .find(|l| l.contains("error"))
                .or_else(|| error.lines().next())
                .unwrap_or("")
                .trim();
            rows.push(vec![
                rec.variant.clone(),
                rec.entry.clone(),
                arch.clone(),
                format!("{}: {why}", build.status),
            ]);
            continue;
        }
        for e in &build.entries {
            let failed: Vec<String> = build
                .gates
                .iter()
                .filter(|g| g.subject == e.name && !g.pass)
                .map(|g| {
                    let name = g.gate.trim_start_matches("ptxas.");
                    format!("{name} {}>{}", g.measured, g.threshold)
                })
                .collect();
            let has_gates = build.gates.iter().any(|g| g.subject == e.name);
            let gates = match (has_gates, failed.is_empty()) {
                (false, _) => "-".to_string(),
                (true, true) => "✅ pass".to_string(),
                (true, false) => format!("❌ {}", failed.join(", ")),
            };
            rows.push(vec![
                rec.variant.clone(),
                e.name.clone(),
                arch.clone(),
                num(e.registers.map(u64::from)),
                num(e.smem_bytes),
                if e.name == rec.entry {
                    num(build.dynamic_smem_bytes)
                } else {
                    "-".into()
                },
                num(e.stack_bytes),
                format!("{}/{}", num(e.spill_store_bytes), num(e.spill_load_bytes)),
                num(e.barriers.map(u64::from)),
                gates,
            ]);
        }
    }
    rows
}

/// Left-aligned columns separated by two spaces; short rows span the rest.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; cols];
    for row in rows.iter().filter(|r| r.len() == cols) {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                line.push_str(&format!("{cell:<w$}  ", w = width[i]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
