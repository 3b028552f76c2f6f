//! How a stage ends: settled without running, or its outputs moved in and recorded, or restored.

use super::Run;
use crate::run_record;
use crate::runner::ended::Ended;
use crate::staging;
use crate::statcache::StatCache;
use crate::{lockfile::LockEntry, lockfile::LockFile};
use crate::{status, status::State};
use repro_pipeline::kind::StageOutcome;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Run<'_> {
    pub(super) fn settle_up_to_date(&mut self, i: usize, lock: &LockFile) {
        let status = &self.statuses[i];
        if let State::Kept {
            reason, sources, ..
        } = &status.state
        {
            let ended = Ended::Kept {
                reason: reason.clone(),
                origin: origin(lock, &self.project.stages[i].name),
                not_current: not_current(sources),
            };
            if !self.req.dry_run {
                self.progress.info(&format!(
                    "· {} {}",
                    self.project.stages[i].name,
                    ended.label()
                ));
            }
            self.end(i, ended);
            return;
        }
        // Not even formatted when nothing would show it (`-q`: thousands of stages).
        if !self.req.dry_run && !self.progress.is_quiet() {
            let mut text = format!(
                "· {} up-to-date (fingerprint {} unchanged)",
                self.project.stages[i].name,
                &status.fingerprint[..12]
            );
            if let Some(g) = &status.gate_failed {
                text.push_str(&format!("; gate failed: {g}"));
            }
            self.progress.info(&text);
        }
        let ended = match &status.gate_failed {
            Some(g) => Ended::GateFailed(g.clone()),
            None => Ended::UpToDate,
        };
        // A failure on other inputs is superseded: these inputs are the recorded run's.
        let name = &self.project.stages[i].name;
        let stale_failure = self
            .records
            .get(name)
            .is_some_and(|r| r.failure().is_some() && r.fingerprint != status.fingerprint);
        if stale_failure && !self.req.dry_run {
            run_record::forget(&self.project.root, name);
        }
        self.end(i, ended);
    }

    /// Settle a stage that returned: move outputs in and record it, or restore.
    pub(super) fn finish(
        &mut self,
        i: usize,
        result: anyhow::Result<StageOutcome>,
        guard: &staging::Guard,
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> Ended {
        let project = self.project;
        let stage = &project.stages[i];
        self.executed.insert(i);
        // The stage wrote: what was digested before may have changed.
        cache.forget_seen();
        let rollback = |why: Ended| {
            self.put_back(i, guard);
            why
        };
        if self.interrupted.load(Ordering::SeqCst) {
            return rollback(Ended::Interrupted);
        }
        let outcome = match result {
            Ok(o) => o,
            // Killed because another stage failed under --fail-fast.
            Err(_) if self.cancel.load(Ordering::SeqCst) => {
                return rollback(Ended::NotRun("stopped by --fail-fast".into()));
            }
            Err(e) => return rollback(Ended::Failed(format!("{e:#}"))),
        };
        if let StageOutcome::Skipped { reason, fix } = &outcome {
            let here = self.statuses[i].inputs.hardware.as_deref();
            if let Some(origin) = kept_results(lock, &stage.name, here) {
                // A stage that cannot run here never touches results measured elsewhere.
                let changes = match &self.statuses[i].state {
                    State::Stale(c) => c.clone(),
                    _ => Vec::new(),
                };
                let entry = lock.stages.get(&stage.name);
                let kept = State::kept(self.project, i, entry, reason.clone(), changes);
                let ended = rollback(Ended::Kept {
                    reason: reason.clone(),
                    origin,
                    not_current: match &kept {
                        State::Kept { sources, .. } => not_current(sources),
                        _ => None,
                    },
                });
                // The one place the reason is said (hidden by --quiet; the final table
                // still says the stage kept its results, and whether they are current).
                let lead = match &ended {
                    Ended::Kept {
                        not_current: None, ..
                    } => "note",
                    _ => "warning",
                };
                self.progress.warn(&format!(
                    "{lead}: stage `{}` {}; not re-run here: {reason}\n  help: {fix}",
                    stage.name,
                    ended.label()
                ));
                self.statuses[i].state = kept;
                return ended;
            }
            let written = guard.write_root(&project.root);
            if !stage.outputs.iter().any(|o| written.join(o).exists()) {
                // Nothing to keep and nothing written: the lock records the skip, with no
                // outputs, so it is not retried until an input changes.
                self.progress.error(&format!(
                    "warning: stage `{}` skipped: {reason}\n  help: {fix}",
                    stage.name
                ));
                let ended = rollback(Ended::Skipped(reason.clone()));
                if let Err(e) = self.record_success(i, &outcome, lock, cache) {
                    return Ended::Failed(format!("{e:#}"));
                }
                return ended;
            }
        }
        if let Err(e) = guard.commit(&project.root, &stage.outputs, &stage.optional_outputs) {
            return rollback(Ended::Failed(format!("{e:#}")));
        }
        // The new outputs are in place; if the lock cannot be written, the stage shows as
        // stale next time (its outputs differ from the lock) and reruns.
        if let Err(e) = self.record_success(i, &outcome, lock, cache) {
            return Ended::Failed(format!("{e:#}"));
        }
        match outcome {
            StageOutcome::Passed => Ended::Passed,
            StageOutcome::GateFailed(g) => Ended::GateFailed(g),
            StageOutcome::Skipped { reason, fix } => {
                self.progress.warn(&format!(
                    "warning: stage `{}` skipped: {reason}\n  help: {fix}",
                    stage.name
                ));
                Ended::Skipped(reason)
            }
        }
    }

    fn record_success(
        &mut self,
        i: usize,
        outcome: &StageOutcome,
        lock: &mut LockFile,
        cache: &mut StatCache,
    ) -> anyhow::Result<()> {
        let project = self.project;
        let stage = &project.stages[i];
        let mut outputs = BTreeMap::new();
        let skipped = matches!(outcome, StageOutcome::Skipped { .. });
        for out in &stage.outputs {
            let optional = skipped || stage.optional_outputs.contains(out);
            if optional && !project.root.join(out).exists() {
                continue;
            }
            outputs.extend(cache.digest_tree(&project.root, out)?);
        }
        let status = &self.statuses[i];
        lock.record(
            &project.root,
            &stage.name,
            LockEntry {
                fingerprint: status.fingerprint.clone(),
                gate_failed: match outcome {
                    StageOutcome::GateFailed(g) => Some(g.clone()),
                    _ => None,
                },
                skipped: match outcome {
                    StageOutcome::Skipped { reason, .. } => Some(reason.clone()),
                    _ => None,
                },
                inputs: status.inputs.clone().into(),
                outputs,
            },
        )
    }
}

/// For a stage that keeps earlier results: what changed in the sources since they were
/// measured (the first change and how many more), or `None` when only the machine differs.
fn not_current(sources: &[status::Change]) -> Option<String> {
    let first = sources.first()?.line(60);
    Some(match sources.len() {
        1 => first,
        n => format!("{first}, and {} more", n - 1),
    })
}

/// When a stage's recorded results are worth keeping where it cannot run (`here`, this
/// machine's hardware): measurements, or a skip decided on another machine (a tune stage
/// skipped by its `archs:` on a GPU) that this one could not have judged. Gives where they
/// came from, if the stage records it.
fn kept_results(lock: &LockFile, stage: &str, here: Option<&str>) -> Option<Option<String>> {
    lock.stages
        .get(stage)
        .filter(|entry| entry.skipped.is_none() || entry.inputs.hardware.as_deref() != here)
        .map(|_| origin(lock, stage))
}

/// `measured on <GPU>` (or `skipped on <GPU>`, for a recorded skip): where a stage's
/// recorded results came from, as its lock entry names the machine.
fn origin(lock: &LockFile, stage: &str) -> Option<String> {
    let entry = lock.stages.get(stage)?;
    Some(entry.origin_on(entry.inputs.hardware.as_deref()?))
}
