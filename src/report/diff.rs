//! `repro diff [REV]`: the bench and ncu results in the working tree against those committed
//! at REV (read from git objects, no checkout), as a markdown table fit for a pull-request
//! comment, or JSON.
//!
//! Verdict rule, per (variant, shape), on the median p50 over seeds of each side:
//! - each side's noise is the larger of its widest ci95 half-width and half the range of
//!   its per-seed p50s; the combined noise is `sqrt(noise_before² + noise_after²)`;
//! - `Δ = after − before`; the change matters when `|Δ| ≥ 2 %` of before
//!   ([`MIN_REL_CHANGE`]) and is significant when `|Δ|` exceeds the combined noise;
//! - FASTER / SLOWER: matters and significant; SAME: does not matter (below 2 %);
//!   UNCLEAR: matters but within the noise, or a side has no p50 or no spread;
//! - LOST: measured before, not measured now (a skipped stage, a machine without a GPU);
//! - OTHER GPU: the two sides were measured on different GPU models, which are not
//!   compared for speed (the numbers are shown, the verdict is not given).
//!
//! Exit status: 1 when a row is SLOWER or LOST, or a gate went from pass to fail or from
//! checked to not checked; 0 otherwise. A revision that does not exist is bad usage (2).

use super::artifacts::{parse_record, Artifacts};
use super::context::{num, shape_p50, shapes_in_order};
use crate::schema::{BenchFile, BenchResult, NcuSummary, NcuTarget};
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Changes smaller than this fraction of the before p50 are SAME, whatever the noise.
pub const MIN_REL_CHANGE: f64 = 0.02;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Unclear,
    Lost,
    #[serde(rename = "OTHER GPU")]
    OtherGpu,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "FASTER",
            Verdict::Slower => "SLOWER",
            Verdict::Same => "SAME",
            Verdict::Unclear => "UNCLEAR",
            Verdict::Lost => "LOST",
            Verdict::OtherGpu => "OTHER GPU",
        }
    }
}

/// A side's p50 and its noise (µs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Measure {
    pub p50_us: f64,
    pub noise_us: Option<f64>,
}

/// Decide the verdict (see the module doc).
pub fn verdict(before: Option<Measure>, after: Option<Measure>) -> Verdict {
    let (Some(b), Some(a)) = (before, after) else {
        return Verdict::Unclear;
    };
    if !(b.p50_us > 0.0 && a.p50_us.is_finite()) {
        return Verdict::Unclear;
    }
    let delta = a.p50_us - b.p50_us;
    if (delta / b.p50_us).abs() < MIN_REL_CHANGE {
        return Verdict::Same;
    }
    let (Some(nb), Some(na)) = (b.noise_us, a.noise_us) else {
        return Verdict::Unclear;
    };
    if delta.abs() <= (nb * nb + na * na).sqrt() {
        Verdict::Unclear
    } else if delta < 0.0 {
        Verdict::Faster
    } else {
        Verdict::Slower
    }
}

/// One side's measure for `shape`: median p50 over seeds, noise as in the module doc.
pub fn measure(results: &[BenchResult], shape: &str) -> Option<Measure> {
    let p50 = shape_p50(results, shape)?;
    let ok: Vec<&BenchResult> = results
        .iter()
        .filter(|r| r.shape == shape && r.status == "ok")
        .collect();
    let ci = ok.iter().filter_map(|r| r.ci95_us).max_by(f64::total_cmp);
    let seeds: Vec<f64> = ok.iter().filter_map(|r| r.p50_us).collect();
    let half_range = if seeds.len() > 1 {
        let lo = seeds.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = seeds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((hi - lo) / 2.0)
    } else {
        None
    };
    let noise = match (ci, half_range) {
        (Some(c), Some(h)) => Some(c.max(h)),
        (c, h) => c.or(h),
    };
    Some(Measure {
        p50_us: p50,
        noise_us: noise,
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub name: String,
    /// `baseline` or `variant`.
    pub kind: String,
    pub shape: String,
    pub before: Option<Measure>,
    pub after: Option<Measure>,
    pub change_pct: Option<f64>,
    pub verdict: Verdict,
}

/// A gate's result on one side: checked (pass or fail) or absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlippedGate {
    pub gate: String,
    pub before: bool,
    /// `None`: the gate is no longer checked (its measurement is missing).
    pub after: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricChange {
    pub target: String,
    pub metric: String,
    pub before: Option<f64>,
    pub after: Option<f64>,
    pub change_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffReport {
    pub rev: String,
    pub commit: String,
    /// The GPU models each side's bench records name (sorted; empty: none measured).
    pub gpus_before: Vec<String>,
    pub gpus_after: Vec<String>,
    pub min_rel_change: f64,
    pub rows: Vec<Row>,
    pub flipped_gates: Vec<FlippedGate>,
    pub ncu: Vec<MetricChange>,
    /// ncu targets profiled at REV and not profiled now.
    pub lost_profiles: Vec<String>,
}

impl DiffReport {
    /// Something got slower, a measurement was lost, or a gate went from pass to fail or
    /// from checked to not checked.
    /// The one line a reviewer reads first: what the whole comparison amounts to, then the
    /// rows per verdict and the gates that flipped, e.g. `**No change**: 55 SAME; no gate
    /// flipped.`
    pub fn verdict_line(&self) -> String {
        let order = [
            Verdict::Slower,
            Verdict::Lost,
            Verdict::Faster,
            Verdict::Unclear,
            Verdict::OtherGpu,
            Verdict::Same,
        ];
        let counts: Vec<String> = order
            .iter()
            .filter_map(|v| {
                let n = self.rows.iter().filter(|r| r.verdict == *v).count();
                (n > 0).then(|| format!("{n} {}", v.as_str()))
            })
            .collect();
        let all_same = self.rows.iter().all(|r| r.verdict == Verdict::Same);
        let overall = if self.regressed() {
            "❌ Regressed"
        } else if self.rows.iter().any(|r| r.verdict == Verdict::Faster) {
            "✅ Faster, nothing slower"
        } else if all_same && self.flipped_gates.is_empty() && self.ncu.is_empty() {
            "No change"
        } else {
            "Nothing slower"
        };
        let rows = if counts.is_empty() {
            "no measurement on either side".to_string()
        } else {
            counts.join(", ")
        };
        let gates = match self.flipped_gates.len() {
            0 => "no gate flipped".to_string(),
            1 => "1 gate flipped".to_string(),
            n => format!("{n} gates flipped"),
        };
        format!("**{overall}**: {rows}; {gates}.")
    }

    pub fn regressed(&self) -> bool {
        self.rows
            .iter()
            .any(|r| matches!(r.verdict, Verdict::Slower | Verdict::Lost))
            || !self.lost_profiles.is_empty()
            || self
                .flipped_gates
                .iter()
                .any(|g| g.after.is_none() || (g.before && g.after == Some(false)))
    }
}

/// The folder of the pipeline file (the project root).
pub fn project_root(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Compare the working tree at `root` with `rev`.
pub fn diff(root: &Path, rev: &str) -> anyhow::Result<DiffReport> {
    let repo = git2::Repository::discover(root).map_err(|e| {
        anyhow::anyhow!(
            "{} is not inside a git repository ({}); `repro diff` compares with a commit",
            root.display(),
            e.message()
        )
    })?;
    let prefix = repo_prefix(&repo, root)?;
    let commit = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| {
            crate::engine::runner::UsageError(format!(
                "revision `{rev}` not found: {}\n  help: pick one from `git log --oneline`",
                e.message()
            ))
        })?;
    let short = commit.id().to_string()[..10].to_string();
    let at = Revision {
        rev,
        short: &short,
        prefix: &prefix,
    };
    let before = artifacts_at(&repo, &commit.tree()?, &at)?;
    let Some(before_bench) = before.benches.as_ref().filter(|b| !b.is_empty()) else {
        anyhow::bail!(
            "commit {short} (`{rev}`) has no {}artifacts/bench/*.json: nothing to compare against; commit results there with `repro commit`, or name another revision",
            prefix_text(&prefix)
        );
    };
    let after = Artifacts::load(root)?;
    let Some(after_bench) = after.benches.as_ref().filter(|b| !b.is_empty()) else {
        anyhow::bail!(
            "the working tree has no {}: run `repro run` (or `repro stage bench`) first",
            root.join("artifacts/bench/*.json").display()
        );
    };
    let gpus_before = gpu_models(&before);
    let gpus_after = gpu_models(&after);
    let mut rows = compare(
        before.baselines.as_deref().unwrap_or_default(),
        after.baselines.as_deref().unwrap_or_default(),
        "baseline",
    );
    rows.extend(compare(before_bench, after_bench, "variant"));
    Ok(DiffReport {
        rev: rev.to_string(),
        commit: short,
        gpus_before,
        gpus_after,
        min_rel_change: MIN_REL_CHANGE,
        rows,
        flipped_gates: flipped(&gate_states(&before), &gate_states(&after)),
        ncu: ncu_changes(before.ncu.as_ref(), after.ncu.as_ref()),
        lost_profiles: lost_profiles(before.ncu.as_ref(), after.ncu.as_ref()),
    })
}

fn prefix_text(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    }
}

/// The project root relative to the repository's working folder (`""` at its top).
pub fn repo_prefix(repo: &git2::Repository, root: &Path) -> anyhow::Result<String> {
    let workdir = repo
        .workdir()
        .context("the repository is bare; run repro in a working tree")?
        .canonicalize()?;
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", root.display()))?;
    let rel = root.strip_prefix(&workdir).unwrap_or(Path::new(""));
    Ok(rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/"))
}

/// The revision `repro diff` reads records from, as its errors name it.
struct Revision<'a> {
    rev: &'a str,
    short: &'a str,
    /// The project root relative to the repository's top (`""` at the top).
    prefix: &'a str,
}

impl Revision<'_> {
    /// Parse the record at `path` (from the repository's top) as this revision has it: an
    /// error names the revision and the path there, never the working tree's file.
    fn parse<T: serde::de::DeserializeOwned>(&self, text: &str, path: &str) -> anyhow::Result<T> {
        let rel = path.strip_prefix(&prefix_text(self.prefix)).unwrap_or(path);
        parse_record(
            text,
            &format!("{}:{path}", self.rev),
            &format!(
                "that is the file as commit {} (`{}`) has it, not the working tree's: compare with another revision (`git log --oneline -- {rel}` lists the commits that changed it)",
                self.short, self.rev
            ),
        )
    }
}

/// The bench, build and ncu records as committed in `tree`.
fn artifacts_at(
    repo: &git2::Repository,
    tree: &git2::Tree,
    rev: &Revision,
) -> anyhow::Result<Artifacts> {
    let at = |rel: &str| format!("{}{rel}", prefix_text(rev.prefix));
    let mut benches: Option<Vec<BenchFile>> = json_files(repo, tree, &at("artifacts/bench"), rev)?;
    if let Some(b) = benches.as_mut() {
        b.sort_by(|x, y| x.name.cmp(&y.name));
    }
    let mut baselines: Option<Vec<BenchFile>> =
        json_files(repo, tree, &at("artifacts/bench/baselines"), rev)?;
    if let Some(b) = baselines.as_mut() {
        b.sort_by(|x, y| x.name.cmp(&y.name));
    }
    let ncu = match blob_text(repo, tree, &at("artifacts/ncu/summary.json"))? {
        Some(text) => Some(rev.parse::<NcuSummary>(&text, &at("artifacts/ncu/summary.json"))?),
        None => None,
    };
    Ok(Artifacts {
        builds: json_files(repo, tree, &at("artifacts/build"), rev)?,
        benches,
        baselines,
        tune: None,
        tunes: Default::default(),
        ncu,
    })
}

fn blob_text(
    repo: &git2::Repository,
    tree: &git2::Tree,
    path: &str,
) -> anyhow::Result<Option<String>> {
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    let obj = entry.to_object(repo)?;
    let Some(blob) = obj.as_blob() else {
        return Ok(None);
    };
    Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
}

/// The `*.json` blobs directly in the folder `dir` of `tree` (`rev`'s), parsed, sorted by
/// path.
fn json_files<T: serde::de::DeserializeOwned>(
    repo: &git2::Repository,
    tree: &git2::Tree,
    dir: &str,
    rev: &Revision,
) -> anyhow::Result<Option<Vec<T>>> {
    let Ok(entry) = tree.get_path(Path::new(dir)) else {
        return Ok(None);
    };
    let obj = entry.to_object(repo)?;
    let Some(sub) = obj.as_tree() else {
        return Ok(None);
    };
    let mut names: Vec<String> = sub
        .iter()
        .filter(|e| e.kind() == Some(git2::ObjectType::Blob))
        .filter_map(|e| e.name().map(str::to_string))
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            let path = format!("{dir}/{n}");
            let text = blob_text(repo, tree, &path)?.unwrap_or_default();
            rev.parse(&text, &path)
        })
        .collect::<anyhow::Result<Vec<T>>>()
        .map(Some)
}

/// The GPU models a side's bench and baseline records were measured on.
fn gpu_models(a: &Artifacts) -> Vec<String> {
    let mut models: Vec<String> = a
        .benches
        .iter()
        .chain(&a.baselines)
        .flatten()
        .flat_map(|f| &f.results)
        .filter(|r| r.status == "ok")
        .filter_map(|r| r.device_name.clone())
        .collect();
    models.sort();
    models.dedup();
    models
}

/// The GPU model one side's records of `shape` were measured on.
fn gpu_of(results: &[BenchResult], shape: &str) -> Option<String> {
    results
        .iter()
        .filter(|r| r.shape == shape && r.status == "ok")
        .find_map(|r| r.device_name.clone())
}

/// The verdict of one row: LOST when only the old side measured it, OTHER GPU when the
/// sides ran on different GPU models, else the noise rule.
fn row_verdict(
    before: Option<Measure>,
    after: Option<Measure>,
    gpus: (Option<String>, Option<String>),
) -> Verdict {
    match (before, after, gpus) {
        (Some(_), None, _) => Verdict::Lost,
        (Some(_), Some(_), (Some(b), Some(a))) if a != b => Verdict::OtherGpu,
        _ => verdict(before, after),
    }
}

fn compare(before: &[BenchFile], after: &[BenchFile], kind: &str) -> Vec<Row> {
    let mut names: Vec<&str> = before
        .iter()
        .chain(after)
        .map(|f| f.name.as_str())
        .collect();
    names.sort();
    names.dedup();
    let find = |side: &'_ [BenchFile], name: &str| {
        side.iter()
            .find(|f| f.name == name)
            .map(|f| f.results.clone())
    };
    let mut rows = Vec::new();
    for name in names {
        let b = find(before, name).unwrap_or_default();
        let a = find(after, name).unwrap_or_default();
        let files: Vec<BenchFile> = before
            .iter()
            .chain(after)
            .filter(|f| f.name == name)
            .cloned()
            .collect();
        for shape in shapes_in_order(&files) {
            let (mb, ma) = (measure(&b, &shape), measure(&a, &shape));
            rows.push(Row {
                name: name.to_string(),
                kind: kind.to_string(),
                shape: shape.clone(),
                before: mb,
                after: ma,
                change_pct: mb
                    .zip(ma)
                    .filter(|(b, _)| b.p50_us > 0.0)
                    .map(|(b, a)| (a.p50_us - b.p50_us) / b.p50_us * 100.0),
                verdict: row_verdict(mb, ma, (gpu_of(&b, &shape), gpu_of(&a, &shape))),
            });
        }
    }
    rows
}

/// Every pass/fail a side records, keyed by a readable name.
fn gate_states(a: &Artifacts) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for b in a.builds.as_deref().unwrap_or_default() {
        out.insert(format!("build {}: compiles", b.variant), b.status == "ok");
        for (arch, g) in b.gates() {
            out.insert(
                format!("{} {} ({arch}) {}", g.gate, b.variant, g.subject)
                    .trim_end()
                    .to_string(),
                g.pass,
            );
        }
    }
    for f in a.benches.iter().chain(&a.baselines).flatten() {
        for g in &f.gates {
            out.insert(
                format!("{} {} {}", g.gate, f.name, g.subject)
                    .trim_end()
                    .to_string(),
                g.pass,
            );
        }
        for r in &f.results {
            if let Some(pass) = r.correctness_pass {
                out.insert(format!("correctness {} {}", f.name, r.run_subject()), pass);
            }
        }
    }
    out
}

/// Gates whose result changed, including gates checked before and not checked now. A
/// performance gate judges whichever variant is best: when another variant became the best,
/// the gate moved to it (it is checked on the new side) and is not reported as unchecked.
fn flipped(before: &BTreeMap<String, bool>, after: &BTreeMap<String, bool>) -> Vec<FlippedGate> {
    let moved = |key: &str| {
        let gate = key.split(' ').next().unwrap_or(key);
        gate.starts_with("performance.") && after.keys().any(|k| k.split(' ').next() == Some(gate))
    };
    before
        .iter()
        .filter(|(k, _)| after.contains_key(*k) || !moved(k))
        .filter_map(|(k, b)| {
            let a = after.get(k).copied();
            (a != Some(*b)).then(|| FlippedGate {
                gate: k.clone(),
                before: *b,
                after: a,
            })
        })
        .collect()
}

/// Targets with a kernel time before and none after.
fn lost_profiles(before: Option<&NcuSummary>, after: Option<&NcuSummary>) -> Vec<String> {
    let measured = |s: Option<&NcuSummary>| -> Vec<String> {
        s.map(|s| {
            s.targets
                .iter()
                .filter(|t| t.kernel_time_us.is_some())
                .map(|t| t.target.clone())
                .collect()
        })
        .unwrap_or_default()
    };
    let now = measured(after);
    measured(before)
        .into_iter()
        .filter(|t| !now.contains(t))
        .collect()
}

/// Reads one named metric of a profiled target.
type MetricGetter = fn(&NcuTarget) -> Option<f64>;

/// The named ncu metrics of each target present on both sides, where they changed.
fn ncu_changes(before: Option<&NcuSummary>, after: Option<&NcuSummary>) -> Vec<MetricChange> {
    let (Some(b), Some(a)) = (before, after) else {
        return Vec::new();
    };
    let fields: [(&str, MetricGetter); 7] = [
        ("kernel_time_us", |t| t.kernel_time_us),
        ("sm_util_pct", |t| t.sm_util_pct),
        ("tensor_core_util_pct", |t| t.tensor_core_util_pct),
        ("achieved_occupancy_pct", |t| t.achieved_occupancy_pct),
        ("registers_per_thread", |t| t.registers_per_thread),
        ("l2_hit_rate_pct", |t| t.l2_hit_rate_pct),
        ("dram_bw_pct_peak", |t| t.dram_bw_pct_peak),
    ];
    let mut out = Vec::new();
    let mut targets: Vec<&NcuTarget> = a.targets.iter().collect();
    targets.sort_by(|x, y| x.target.cmp(&y.target));
    for ta in targets {
        let Some(tb) = b.targets.iter().find(|t| t.target == ta.target) else {
            continue;
        };
        for (metric, get) in fields {
            let (vb, va) = (get(tb), get(ta));
            if num(vb, 2) == num(va, 2) {
                continue;
            }
            out.push(MetricChange {
                target: ta.target.clone(),
                metric: metric.to_string(),
                before: vb,
                after: va,
                change_pct: vb
                    .zip(va)
                    .filter(|(b, _)| *b != 0.0)
                    .map(|(b, a)| (a - b) / b * 100.0),
            });
        }
    }
    out
}

fn signed_pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:+.1}%"),
        _ => "n/a".into(),
    }
}

fn pass_mark(pass: bool) -> &'static str {
    if pass {
        "✅"
    } else {
        "❌"
    }
}

/// The comparison as markdown (a pull-request comment).
pub fn markdown(r: &DiffReport) -> String {
    let side = |gpus: &[String]| {
        if gpus.is_empty() {
            "not measured".to_string()
        } else {
            gpus.join(", ")
        }
    };
    let mut s = format!(
        "### repro diff: working tree vs `{}` ({})\n\n{}\n\nGPU before: {}; GPU after: {}.\n\n",
        r.rev,
        r.commit,
        r.verdict_line(),
        side(&r.gpus_before),
        side(&r.gpus_after),
    );
    // Rows that all read SAME say nothing the verdict line did not: folded away.
    let fold = !r.rows.is_empty() && r.rows.iter().all(|row| row.verdict == Verdict::Same);
    if fold {
        s += "<details><summary>Every row</summary>\n\n";
    }
    s += "| Variant | Shape | Before p50 (µs) | After p50 (µs) | Change | Noise ± (µs, before / after) | Verdict |\n|---|---|---:|---:|---:|---:|---|\n";
    for row in &r.rows {
        let label = if row.kind == "baseline" {
            format!("{} (baseline)", row.name)
        } else {
            row.name.clone()
        };
        let noise = |m: Option<Measure>| num(m.and_then(|m| m.noise_us), 2);
        s += &format!(
            "| {label} | {} | {} | {} | {} | {} / {} | {} |\n",
            row.shape,
            num(row.before.map(|m| m.p50_us), 2),
            num(row.after.map(|m| m.p50_us), 2),
            signed_pct(row.change_pct),
            noise(row.before),
            noise(row.after),
            row.verdict.as_str()
        );
    }
    if fold {
        s += "\n</details>\n";
    }
    s += &format!(
        "\nFASTER/SLOWER: the change is at least {:.0}% and larger than the combined noise of both sides; SAME: below {:.0}%; UNCLEAR: within the noise or not measured on both sides; LOST: measured before, not now; OTHER GPU: measured on different GPU models, not compared.\n",
        r.min_rel_change * 100.0,
        r.min_rel_change * 100.0
    );
    s += "\n**Gates that flipped:**";
    if r.flipped_gates.is_empty() {
        s += " none.\n";
    } else {
        s += "\n\n";
        for g in &r.flipped_gates {
            s += &format!(
                "- {}: {} → {}\n",
                g.gate,
                pass_mark(g.before),
                g.after.map_or("not checked", pass_mark)
            );
        }
    }
    if !r.lost_profiles.is_empty() {
        s += &format!(
            "\n**Profiled before, not now:** {}.\n",
            r.lost_profiles.join(", ")
        );
    }
    s += "\n**Nsight Compute metrics that changed:**";
    if r.ncu.is_empty() {
        s += " none (or no profile on one side).\n";
    } else {
        s += "\n\n| Target | Metric | Before | After | Change |\n|---|---|---:|---:|---:|\n";
        for m in &r.ncu {
            s += &format!(
                "| {} | {} | {} | {} | {} |\n",
                m.target,
                m.metric,
                num(m.before, 2),
                num(m.after, 2),
                signed_pct(m.change_pct)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p50: f64, noise: f64) -> Option<Measure> {
        Some(Measure {
            p50_us: p50,
            noise_us: Some(noise),
        })
    }

    #[test]
    fn verdicts_follow_the_documented_rule() {
        assert_eq!(verdict(m(100.0, 1.0), m(90.0, 1.0)), Verdict::Faster);
        assert_eq!(verdict(m(100.0, 1.0), m(110.0, 1.0)), Verdict::Slower);
        assert_eq!(
            verdict(m(100.0, 0.1), m(101.0, 0.1)),
            Verdict::Same,
            "1% is below the minimum"
        );
        assert_eq!(
            verdict(m(100.0, 8.0), m(110.0, 8.0)),
            Verdict::Unclear,
            "10% but inside sqrt(64+64)=11.3"
        );
        assert_eq!(verdict(None, m(100.0, 1.0)), Verdict::Unclear);
        let no_noise = Some(Measure {
            p50_us: 100.0,
            noise_us: None,
        });
        assert_eq!(verdict(no_noise, m(80.0, 1.0)), Verdict::Unclear);
    }

    fn report(verdicts: &[Verdict]) -> DiffReport {
        DiffReport {
            rev: "HEAD~5".into(),
            commit: "abc".into(),
            gpus_before: vec!["H100".into()],
            gpus_after: vec!["H100".into()],
            min_rel_change: MIN_REL_CHANGE,
            rows: verdicts
                .iter()
                .enumerate()
                .map(|(i, v)| Row {
                    name: format!("v{i}"),
                    kind: "variant".into(),
                    shape: "mission".into(),
                    before: m(10.0, 0.1),
                    after: m(10.0, 0.1),
                    change_pct: Some(0.0),
                    verdict: *v,
                })
                .collect(),
            flipped_gates: vec![],
            ncu: vec![],
            lost_profiles: vec![],
        }
    }

    #[test]
    fn a_diff_says_in_one_line_what_it_amounts_to_and_folds_rows_that_all_read_same() {
        let same = report(&[Verdict::Same; 55]);
        assert_eq!(
            same.verdict_line(),
            "**No change**: 55 SAME; no gate flipped."
        );
        let md = markdown(&same);
        assert!(md.contains("\n\n**No change**: 55 SAME"), "{md}");
        assert!(md.contains("<details><summary>Every row</summary>"), "{md}");

        let mixed = report(&[Verdict::Same, Verdict::Slower, Verdict::Faster]);
        assert_eq!(
            mixed.verdict_line(),
            "**❌ Regressed**: 1 SLOWER, 1 FASTER, 1 SAME; no gate flipped."
        );
        assert!(
            !markdown(&mixed).contains("<details>"),
            "rows that differ are shown"
        );
        let faster = report(&[Verdict::Faster, Verdict::Same]);
        assert!(faster
            .verdict_line()
            .starts_with("**✅ Faster, nothing slower**"));
    }
}
