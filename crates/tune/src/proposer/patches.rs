//! `repro propose patches --dir DIR`: the scripted, deterministic proposer. Its candidates
//! are the unified diffs `DIR/*.patch` (in name order), written against the kernel's own
//! source; a patch may start with free text, whose first line is its note.
//!
//! Each generation it proposes, on the best trial so far, first every patch no proposal
//! has used yet, then — stacking — every patch that passed on some trial and is not yet in
//! the best trial's lineage nor tried on it. It answers nothing while no trial has passed.
//! What it proposes depends only on the brief and the folder.

use super::answer::{Answer, CandidateAnswer};
use super::brief::Brief;
use super::store::{digest, short};
use anyhow::Context;
use std::collections::BTreeSet;
use std::path::Path;

/// One patch file.
struct PatchFile {
    text: String,
    /// Short digest, as briefs name patches.
    digest: String,
    note: String,
}

/// The answer for `brief` from the patches in `dir`.
pub fn propose(brief: &Brief, dir: &Path) -> anyhow::Result<Answer> {
    let patches = read_dir(dir)?;
    let Some(best) = brief.elite.first() else {
        return Ok(Answer { candidates: vec![] });
    };
    let best_trial = best.trial.trial;
    let used: BTreeSet<&str> = brief
        .proposals
        .iter()
        .filter_map(|t| t.patch.as_deref())
        .collect();
    let passed: BTreeSet<&str> = brief
        .proposals
        .iter()
        .filter(|t| t.status.is_ok())
        .filter_map(|t| t.patch.as_deref())
        .collect();
    let in_lineage: BTreeSet<&str> = best
        .lineage
        .iter()
        .filter_map(|t| t.patch.as_deref())
        .collect();
    let tried_on_best: BTreeSet<&str> = brief
        .proposals
        .iter()
        .filter(|t| t.parents.first() == Some(&best_trial))
        .filter_map(|t| t.patch.as_deref())
        .collect();
    let fresh = patches.iter().filter(|p| !used.contains(p.digest.as_str()));
    let stacked = patches.iter().filter(|p| {
        let d = p.digest.as_str();
        passed.contains(d) && !in_lineage.contains(d) && !tried_on_best.contains(d)
    });
    let candidates = fresh
        .chain(stacked)
        .take(brief.max_candidates)
        .map(|p| {
            serde_json::to_value(CandidateAnswer {
                patch: Some(p.text.clone()),
                parent: Some(best_trial),
                note: Some(p.note.clone()),
                ..CandidateAnswer::default()
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Answer { candidates })
}

fn read_dir(dir: &Path) -> anyhow::Result<Vec<PatchFile>> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list the patch folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "patch"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let note = text
                .lines()
                .take_while(|l| {
                    !(l.starts_with("--- ") || l.starts_with("diff ") || l.starts_with("@@"))
                })
                .map(|l| l.trim_start_matches('#').trim())
                .find(|l| !l.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| {
                    path.file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned()
                });
            Ok(PatchFile {
                digest: short(&digest(&text)).to_string(),
                text,
                note,
            })
        })
        .collect()
}
