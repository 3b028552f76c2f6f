//! `repro diff [REV]`: the bench and ncu results in the working tree against those committed
//! at REV (read from git objects, no checkout), as a markdown table fit for a pull-request
//! comment ([`markdown`]), or JSON.
//!
//! Verdict rule, per (variant, shape) ([`verdict`]):
//! - NOT MEASURED: the working tree's record was kept from another build of its variant
//!   (a machine that cannot measure kept it after an edit); it says nothing of this code;
//! - NEW / REMOVED: only one side has the variant;
//! - LOST: measured before, not measured now (a skipped stage, a machine without a GPU);
//! - OTHER GPU: the two sides were measured on different GPU models, which are not
//!   compared for speed (the numbers are shown, the verdict is not given);
//! - SAME: both sides measured the very same program (cubin, workload, harness options)
//!   on the same GPU model and driver: any difference is run-to-run noise;
//! - otherwise, on the median p50 over seeds of each side, with each side's noise as
//!   [`verdict::measure`] documents (at least a floor for run-to-run drift), and the
//!   combined noise `sqrt(noise_before² + noise_after²)`: FASTER / SLOWER when
//!   `|Δ| ≥ 2 %` of before ([`MIN_REL_CHANGE`]) and `|Δ|` exceeds the combined noise; SAME
//!   below 2 %; UNCLEAR when within the noise.
//!
//! Exit status: 1 when a row is SLOWER, LOST or NOT MEASURED, or a gate went from pass to
//! fail or from checked to not checked; 0 otherwise. A revision that does not exist is bad
//! usage (2).

mod markdown;
mod verdict;

pub use markdown::markdown;
pub use verdict::{measure, verdict, Measure, Verdict, MIN_REL_CHANGE};
use verdict::{row_verdict, Sides};

use crate::{artifacts::parse_record, artifacts::Artifacts};
use crate::{context::num, context::shapes_in_order};
use anyhow::Context;
use repro_schema::{BenchFile, BenchResult, NcuSummary, NcuTarget};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// The one line a reviewer reads first: what the whole comparison amounts to, then the
    /// rows per verdict and the gates that flipped, e.g. `**No change**: 55 SAME; no gate
    /// flipped.`
    pub fn verdict_line(&self) -> String {
        let order = [
            Verdict::Slower,
            Verdict::Lost,
            Verdict::NotMeasured,
            Verdict::Faster,
            Verdict::Unclear,
            Verdict::OtherGpu,
            Verdict::New,
            Verdict::Removed,
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
        let unmeasured = self.count(Verdict::NotMeasured);
        let overall = if self.rows.iter().any(|r| r.verdict == Verdict::Slower) {
            "❌ Regressed".to_string()
        } else if unmeasured > 0 {
            format!("⏸ {unmeasured} not measured: run on a GPU")
        } else if self.regressed() {
            "❌ Regressed".to_string()
        } else if self.rows.iter().any(|r| r.verdict == Verdict::Faster) {
            "✅ Faster, nothing slower".to_string()
        } else if all_same && self.flipped_gates.is_empty() && self.ncu.is_empty() {
            "No change".to_string()
        } else {
            "Nothing slower".to_string()
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

    /// How many rows have `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }

    /// Something got slower, a measurement was lost or is not of this code, or a gate went
    /// from pass to fail or from checked to not checked.
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| {
            matches!(
                r.verdict,
                Verdict::Slower | Verdict::Lost | Verdict::NotMeasured
            )
        }) || !self.lost_profiles.is_empty()
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
            repro_base::errors::UsageError(format!(
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
    let builds = after.builds.as_deref().unwrap_or_default();
    let mut rows = compare(
        before.baselines.as_deref().unwrap_or_default(),
        after.baselines.as_deref().unwrap_or_default(),
        "baseline",
        builds,
    );
    rows.extend(compare(before_bench, after_bench, "variant", builds));
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
        .filter(|r| r.status.is_ok())
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
        .filter(|r| r.shape == shape && r.status.is_ok())
        .find_map(|r| r.device_name.clone())
}

/// Compare one kind of results file (`variant` or `baseline`) side by side, shape by
/// shape; `builds` are the after side's build records, which its records must match.
fn compare(
    before: &[BenchFile],
    after: &[BenchFile],
    kind: &str,
    builds: &[repro_schema::BuildRecord],
) -> Vec<Row> {
    let mut names: Vec<&str> = before
        .iter()
        .chain(after)
        .map(|f| f.name.as_str())
        .collect();
    names.sort();
    names.dedup();
    fn find<'f>(side: &'f [BenchFile], name: &str) -> Option<&'f BenchFile> {
        side.iter().find(|f| f.name == name)
    }
    let mut rows = Vec::new();
    for name in names {
        let (fb, fa) = (find(before, name), find(after, name));
        let b = fb.map(|f| f.results.clone()).unwrap_or_default();
        let a = fa.map(|f| f.results.clone()).unwrap_or_default();
        let key = |f: Option<&BenchFile>| f.and_then(|f| f.measured.clone()).map(|m| m.key);
        let same_build = key(fb).is_some() && key(fb) == key(fa);
        let not_measured = fa.is_some_and(|f| crate::measured::bench_file(f, builds).is_some());
        let files: Vec<BenchFile> = fb.into_iter().chain(fa).cloned().collect();
        for shape in shapes_in_order(&files) {
            let (mb, ma) = (measure(&b, &shape), measure(&a, &shape));
            let sides = Sides {
                present: (fb.is_some(), fa.is_some()),
                gpus: (gpu_of(&b, &shape), gpu_of(&a, &shape)),
                same_build,
                not_measured,
            };
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
                verdict: row_verdict(mb, ma, &sides),
            });
        }
    }
    rows
}

/// Every pass/fail a side records, keyed by a readable name.
fn gate_states(a: &Artifacts) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for b in a.builds.as_deref().unwrap_or_default() {
        out.insert(format!("build {}: compiles", b.variant), b.status.is_ok());
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

#[cfg(test)]
mod tests;
