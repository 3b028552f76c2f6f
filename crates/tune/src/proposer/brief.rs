//! What a proposer reads: the kernel and its own source, the define space, the elite (each
//! with its configuration, p50 per shape, resources, lineage, diff against the kernel's
//! own source and, when an earlier run profiled it, its Nsight Compute summary), the
//! failures of recent children with their reasons, and every earlier proposal. It holds no
//! timestamps: the same search state gives the same brief, byte for byte.

use super::lineage::{lineage, Origin};
use super::store::{short, SourceStore};
use crate::search::Trial;
use crate::search::View;
use crate::space::Config;
use repro_schema::TrialStatus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema version of [`Brief`].
pub const VERSION: u32 = 1;
/// Longest gate or compiler message passed on per trial, in characters.
const REASON_CHARS: usize = 800;
/// Most recent failures passed on.
const RECENT_FAILURES: usize = 16;

/// The brief, as JSON in the file `$REPRO_BRIEF`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    pub repro_brief: u32,
    /// The generation the candidates are for.
    pub generation: u32,
    /// The most candidates used from the answer.
    pub max_candidates: usize,
    pub kernel: KernelBrief,
    /// Each define of the space with its values.
    pub space: BTreeMap<String, Vec<i64>>,
    /// What the p50 is and which way is better.
    pub objective: String,
    /// The best trials so far, best first.
    pub elite: Vec<EliteBrief>,
    /// Failed trials of the last two generations, oldest first.
    pub recent_failures: Vec<TrialBrief>,
    /// Every trial a proposer made so far, in order.
    pub proposals: Vec<TrialBrief>,
}

/// The kernel being tuned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelBrief {
    /// Its name under `kernels:`.
    pub name: String,
    /// Its source file, relative to the project root (what patches name).
    pub path: String,
    pub entry: String,
    /// Defines every trial starts from (the base variant's); a configuration overrides them.
    pub base_defines: BTreeMap<String, String>,
    /// The whole source file.
    pub source: String,
}

/// One trial, as a proposer sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialBrief {
    pub trial: u32,
    pub generation: u32,
    pub parents: Vec<u32>,
    pub config: Config,
    /// First 16 hex digits of its proposed source's SHA-256; `null`: the kernel's own.
    pub source: Option<String>,
    /// First 16 hex digits of the SHA-256 of the patch that made it, when a proposer sent one.
    pub patch: Option<String>,
    /// The proposer's note on it, when a proposer made it.
    pub note: String,
    /// `ok`, or the first gate it failed.
    pub status: TrialStatus,
    pub p50_us: Option<f64>,
    /// Why it failed (compiler errors, gate figures), or what was measured.
    pub reason: String,
}

/// One member of the elite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EliteBrief {
    pub rank: u32,
    #[serde(flatten)]
    pub trial: TrialBrief,
    /// p50 of each timed shape, µs.
    pub p50_us_by_shape: BTreeMap<String, f64>,
    pub registers: Option<u32>,
    pub spill_bytes: Option<u64>,
    /// Its ancestors through first parents, oldest first, itself last.
    pub lineage: Vec<TrialBrief>,
    /// Its source's unified diff against the kernel's own (`null`: the kernel's own).
    pub diff: Option<String>,
    /// The Nsight Compute summary of an earlier run's profile of the same source and
    /// configuration (`artifacts/ncu/summary.json`), when there is one.
    pub ncu: Option<serde_json::Value>,
}

impl TrialBrief {
    pub fn of(t: &Trial) -> TrialBrief {
        let c = &t.candidate;
        let e = &t.evaluation;
        let origin = Origin::of(c);
        TrialBrief {
            trial: c.trial,
            generation: c.generation,
            parents: c.parents.clone(),
            config: c.config.clone(),
            source: origin.source,
            patch: origin.patch,
            note: origin.note,
            status: e.status.clone(),
            p50_us: e.score,
            reason: e.note.chars().take(REASON_CHARS).collect(),
        }
    }
}

/// Profiles from an earlier run, by (short source digest, configuration).
pub type Profiles = BTreeMap<(Option<String>, Config), serde_json::Value>;

/// What the brief says about the tune beside the search state.
pub struct Setting<'a> {
    pub kernel: &'a KernelBrief,
    pub objective: &'a str,
    pub store: &'a SourceStore,
    pub profiles: &'a Profiles,
}

/// The brief for the generation `view` is about.
pub fn build(view: &View, setting: &Setting) -> anyhow::Result<Brief> {
    let trials = view.trials;
    let mut elite = Vec::new();
    for (rank, &i) in (1u32..).zip(view.elite) {
        let t = &trials[i];
        let source = t.candidate.source.as_ref();
        let diff = match source {
            Some(s) => Some(setting.store.diff_from_base(&setting.store.text(Some(s))?)),
            None => None,
        };
        let key = (
            source.map(|s| short(&s.digest).to_string()),
            t.candidate.config.clone(),
        );
        elite.push(EliteBrief {
            rank,
            trial: TrialBrief::of(t),
            p50_us_by_shape: t
                .evaluation
                .bench
                .iter()
                .filter_map(|r| Some((r.shape.clone(), r.p50_us?)))
                .collect(),
            registers: t.evaluation.registers,
            spill_bytes: t.evaluation.spill_bytes,
            lineage: lineage(trials, i)
                .into_iter()
                .map(|j| TrialBrief::of(&trials[j]))
                .collect(),
            diff,
            ncu: setting.profiles.get(&key).cloned(),
        });
    }
    let last = trials.last().map_or(0, |t| t.candidate.generation);
    let failures: Vec<TrialBrief> = trials
        .iter()
        .filter(|t| !t.evaluation.status.is_ok() && t.candidate.generation + 1 >= last)
        .map(TrialBrief::of)
        .collect();
    let skip = failures.len().saturating_sub(RECENT_FAILURES);
    Ok(Brief {
        repro_brief: VERSION,
        generation: view.generation,
        max_candidates: view.max,
        kernel: setting.kernel.clone(),
        space: view
            .space
            .params()
            .iter()
            .map(|p| (p.name.clone(), p.values.clone()))
            .collect(),
        objective: setting.objective.to_string(),
        elite,
        recent_failures: failures.into_iter().skip(skip).collect(),
        proposals: trials
            .iter()
            .filter(|t| t.candidate.proposal.is_some())
            .map(TrialBrief::of)
            .collect(),
    })
}

/// The profiles an earlier run made of a tune's elite (`<dir>/topk.json`, `artifacts/tune`
/// by default, and the `<prefix><k>` targets of `artifacts/ncu/summary.json`, `tune-top<k>`),
/// without the raw metrics. Empty when either file is missing or unreadable: a brief without
/// profiles is still a brief.
pub fn earlier_profiles(root: &std::path::Path, dir: &str, elite_prefix: &str) -> Profiles {
    use repro_schema::{EliteEntry, NcuSummary};
    let read = |p: &str| std::fs::read_to_string(root.join(p)).ok();
    let elite: Vec<EliteEntry> = read(&format!("{dir}/topk.json"))
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let Some(ncu) = read("artifacts/ncu/summary.json")
        .and_then(|t| serde_json::from_str::<NcuSummary>(&t).ok())
    else {
        return Profiles::new();
    };
    let mut out = Profiles::new();
    for e in elite {
        let variant = format!("{elite_prefix}{}", e.rank);
        if let Some(t) = ncu
            .targets
            .iter()
            .find(|t| t.variant == variant && t.status.is_ok())
        {
            let mut t = t.clone();
            t.raw.clear();
            t.metric_names.clear();
            if let Ok(v) = serde_json::to_value(&t) {
                out.insert((e.source.clone(), e.config.clone()), v);
            }
        }
    }
    out
}

/// A proposer's side: the brief from the file `$REPRO_BRIEF`, else from stdin.
pub fn read() -> anyhow::Result<Brief> {
    use anyhow::Context;
    use std::io::Read;
    let (text, from) = match std::env::var_os(super::BRIEF_ENV) {
        Some(path) => (
            std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read the brief {}", path.to_string_lossy()))?,
            path.to_string_lossy().into_owned(),
        ),
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the brief from stdin")?;
            (text, "stdin".into())
        }
    };
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{from} is not a repro brief (version {VERSION}; set ${} or pipe one on stdin)",
            super::BRIEF_ENV
        )
    })
}

#[cfg(test)]
mod tests {
    use super::earlier_profiles;
    use std::path::Path;

    /// The report fixture's elite and profiles, moved to another tune's folder and names.
    fn project_as(dir: &str, prefix: &str) -> tempfile::TempDir {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/report/green");
        let tmp = tempfile::tempdir().unwrap();
        let read = |p: &str| std::fs::read_to_string(repo.join(p)).unwrap();
        std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
        std::fs::create_dir_all(tmp.path().join("artifacts/ncu")).unwrap();
        let topk = read("artifacts/tune/topk.json");
        std::fs::write(tmp.path().join(dir).join("topk.json"), topk).unwrap();
        let ncu = read("artifacts/ncu/summary.json").replace("\"tune-top", &format!("\"{prefix}"));
        std::fs::write(tmp.path().join("artifacts/ncu/summary.json"), ncu).unwrap();
        tmp
    }

    #[test]
    fn a_tunes_elite_profiles_are_read_from_its_own_folder_and_names() {
        let tmp = project_as("artifacts/tune-mma", "tune-mma-top");
        let found = earlier_profiles(tmp.path(), "artifacts/tune-mma", "tune-mma-top");
        assert!(
            !found.is_empty(),
            "the elite's profiles under tune-mma-top<k>"
        );
        for v in found.values() {
            assert!(v["variant"].as_str().unwrap().starts_with("tune-mma-top"));
            assert!(v.get("tensor_core_util_pct").is_some());
        }
        let other = earlier_profiles(tmp.path(), "artifacts/tune", "tune-top");
        assert!(other.is_empty(), "another tune's folder has no elite here");
    }
}
