//! Running a proposer command between generations: write the brief, run the command (the
//! brief on its stdin and named by `$REPRO_BRIEF`)
//! through the stage's executor with a timeout, read its answer, and turn each candidate
//! into a source (a patch applied to its parent's source, or a whole file) paired with a
//! configuration. A proposer that hangs, crashes or prints garbage is reported and gives
//! no candidates: the generation goes on with the define space, and no finished trial is
//! lost. A candidate that cannot become a source fails alone, with the reason, and the
//! next brief carries it.
//!
//! Answers are kept under `.repro/cache/tune/answers/`, keyed by the brief and the
//! proposer's command and model: a resumed tune replays them, so it proposes the same
//! sources, finds their trials in the memo and measures nothing again.

use super::answer::Answer;
use super::answer::CandidateAnswer;
use super::brief;
use super::brief::KernelBrief;
use super::brief::Profiles;
use super::brief::Setting;
use super::lineage::position;
use super::model_from_env;
use super::redact;
use super::secrets_from_env;
use super::store;
use super::store::short;
use super::store::SourceStore;
use super::ProposerSpec;
use super::BRIEF_ENV;
use crate::search::Proposal;
use crate::search::Proposed;
use crate::search::Proposer;
use crate::search::View;
use crate::space::show;
use crate::space::Config;
use anyhow::Context;
use repro_executor::CancelFlag;
use repro_executor::Executor;
use repro_executor::ExitKind;
use repro_executor::Job;
use repro_schema::TrialStatus;
use serde::Deserialize;
use serde::Serialize;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

/// Where briefs and answers are kept, relative to the project root.
pub const BRIEFS_DIR: &str = ".repro/cache/tune/briefs";
pub const ANSWERS_DIR: &str = ".repro/cache/tune/answers";
/// Longest note kept from a proposer, in characters.
const NOTE_CHARS: usize = 200;

/// A proposer command and what it needs to write briefs and read answers.
pub struct CommandProposer<'a> {
    /// As written in pipeline.yaml (the answer cache's key).
    pub run: Vec<String>,
    /// As run (`repro` resolved to this binary).
    pub argv: Vec<String>,
    pub timeout: Duration,
    /// The most candidates it is asked for per generation (`candidates:`).
    pub candidates: usize,
    /// `$REPRO_PROPOSER_MODEL`, part of the answer cache's key.
    pub model: Option<String>,
    pub executor: &'a dyn Executor,
    pub cancel: &'a CancelFlag,
    pub root: &'a Path,
    pub store: SourceStore,
    pub kernel: KernelBrief,
    pub objective: String,
    pub profiles: Profiles,
    /// Stripped from whatever the proposer printed before it is shown or logged.
    pub secrets: Vec<(String, String)>,
    /// A progress line (the stage's live line and its log).
    pub say: &'a dyn Fn(&str),
    pub stats: Stats,
}

/// Where a proposer runs.
pub struct Host<'a> {
    pub executor: &'a dyn Executor,
    pub cancel: &'a CancelFlag,
    /// The project root: the command's working folder.
    pub root: &'a Path,
    /// The running repro binary, for a command that starts with `repro`.
    pub repro_exe: &'a Path,
    /// A progress line (the stage's live line and its log).
    pub say: &'a dyn Fn(&str),
}

impl<'a> CommandProposer<'a> {
    /// The proposer `spec` of a tune of `population` candidates per generation: the model
    /// and the secrets to strip from the environment; `profiles`, an earlier run's profiles
    /// of its elite ([`brief::earlier_profiles`]).
    pub fn new(
        spec: &ProposerSpec,
        population: u32,
        host: Host<'a>,
        profiles: Profiles,
        store: SourceStore,
        kernel: KernelBrief,
        objective: String,
    ) -> Self {
        CommandProposer {
            run: spec.run.clone(),
            argv: spec.argv(host.repro_exe),
            timeout: spec.timeout,
            candidates: spec.candidates(population) as usize,
            model: model_from_env(),
            executor: host.executor,
            cancel: host.cancel,
            root: host.root,
            store,
            kernel,
            objective,
            profiles,
            secrets: secrets_from_env(),
            say: host.say,
            stats: Stats::default(),
        }
    }
}

/// What the proposer did over a tune.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stats {
    pub calls: u32,
    /// Answers replayed from the cache.
    pub replayed: u32,
    /// Calls that gave no answer, with why.
    pub failures: Vec<String>,
    pub candidates: u32,
    /// Candidates that could not become a source.
    pub rejected: u32,
}

impl Stats {
    /// One line for the stage's summary.
    pub fn line(&self) -> String {
        let mut line = format!(
            "proposer: {} call(s) ({} replayed from the cache), {} candidate(s), {} could not become a source",
            self.calls, self.replayed, self.candidates, self.rejected
        );
        if !self.failures.is_empty() {
            line += &format!(
                "; {} call(s) failed: {}",
                self.failures.len(),
                self.failures.join("; ")
            );
        }
        line
    }
}

/// A kept answer.
#[derive(Serialize, Deserialize)]
struct Kept {
    /// When the proposer answered (RFC 3339, UTC): the time of the trials it failed.
    answered: String,
    answer: Answer,
}

impl Proposer for CommandProposer<'_> {
    fn propose(&mut self, view: &View) -> Vec<Proposed> {
        let g = view.generation;
        let view = &View {
            max: view.max.min(self.candidates),
            ..*view
        };
        match self.answer(view) {
            Ok(Some((answer, answered))) => {
                let out: Vec<Proposed> = answer
                    .entries()
                    .into_iter()
                    .take(view.max)
                    .enumerate()
                    .map(|(k, entry)| self.candidate(view, k + 1, entry, &answered))
                    .collect();
                let failed: Vec<String> = out
                    .iter()
                    .filter_map(|p| match p {
                        Proposed::Failed { reason, .. } => Some(reason.clone()),
                        Proposed::Ready { .. } => None,
                    })
                    .collect();
                self.stats.candidates += out.len() as u32;
                self.stats.rejected += failed.len() as u32;
                let extra = answer.candidates.len().saturating_sub(view.max);
                (self.say)(&format!(
                    "proposer: generation {g}: {} candidate(s), {} could not become a source{}{}",
                    out.len(),
                    failed.len(),
                    if failed.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", failed.join("; "))
                    },
                    if extra > 0 {
                        format!(
                            "; {extra} more than the {} asked for were ignored",
                            view.max
                        )
                    } else {
                        String::new()
                    }
                ));
                out
            }
            Ok(None) => Vec::new(),
            Err(e) => {
                let why = redact(&format!("{e:#}"), &self.secrets);
                (self.say)(&format!(
                    "warning: proposer: generation {g}: {why}; the generation goes on with the define space"
                ));
                self.stats.failures.push(format!("generation {g}: {why}"));
                Vec::new()
            }
        }
    }

    fn summary(&self) -> Option<String> {
        Some(self.stats.line())
    }
}

impl CommandProposer<'_> {
    /// The answer for this generation's brief (kept, or asked for) and when it was given;
    /// `None` when the run was interrupted.
    fn answer(&mut self, view: &View) -> anyhow::Result<Option<(Answer, String)>> {
        let setting = Setting {
            kernel: &self.kernel,
            objective: &self.objective,
            store: &self.store,
            profiles: &self.profiles,
        };
        let brief = serde_json::to_string_pretty(&brief::build(view, &setting)?)?;
        let mut key = brief.clone();
        for part in self.run.iter().chain(self.model.iter()) {
            key.push('\0');
            key.push_str(part);
        }
        let key = store::digest(&key);
        let kept_path = self
            .root
            .join(ANSWERS_DIR)
            .join(format!("{}.json", short(&key)));
        if let Some(kept) = std::fs::read(&kept_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Kept>(&b).ok())
        {
            self.stats.replayed += 1;
            return Ok(Some((kept.answer, kept.answered)));
        }
        let brief_path = self
            .root
            .join(BRIEFS_DIR)
            .join(format!("{}.json", short(&key)));
        write_atomic(&brief_path, &brief)?;
        self.stats.calls += 1;
        (self.say)(&format!(
            "proposer: generation {}: asking `{}` (brief {})",
            view.generation,
            self.run.join(" "),
            brief_path
                .strip_prefix(self.root)
                .unwrap_or(&brief_path)
                .display()
        ));
        let mut job = Job::new(
            format!("propose:{}", view.generation),
            self.argv.clone(),
            self.root,
        );
        job.env
            .insert(BRIEF_ENV.into(), brief_path.display().to_string());
        job.stdin = Some(brief_path.clone());
        job.timeout = Some(self.timeout);
        job.capture_stdout = true;
        let outcome = self
            .executor
            .run(&job, self.cancel)
            .with_context(|| format!("could not start `{}`", self.argv.join(" ")))?;
        let tail = || {
            let lines: Vec<&str> = outcome
                .tail
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            lines[lines.len().saturating_sub(3)..].join(" | ")
        };
        match outcome.exit {
            ExitKind::Code(0) => {}
            ExitKind::Cancelled => return Ok(None),
            ExitKind::TimedOut => anyhow::bail!(
                "the proposer timed out after {} s (`timeout:` under `proposer:`)",
                self.timeout.as_secs_f64()
            ),
            ExitKind::Code(code) => {
                anyhow::bail!("the proposer exited with code {code}: {}", tail())
            }
            ExitKind::Signal(sig) => {
                anyhow::bail!("the proposer was killed by signal {sig}: {}", tail())
            }
            ExitKind::Scheduler(reason) => anyhow::bail!("the proposer was ended: {reason}"),
        }
        let stdout = String::from_utf8_lossy(&outcome.stdout);
        let answer = Answer::parse(&stdout)
            .map_err(|e| anyhow::anyhow!("the proposer's answer is unusable: {e}"))?;
        let answered = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let kept = Kept { answered, answer };
        write_atomic(&kept_path, &serde_json::to_string(&kept)?)?;
        Ok(Some((kept.answer, kept.answered)))
    }

    /// Candidate `k` (1-based) of an answer given at `at`.
    fn candidate(
        &self,
        view: &View,
        k: usize,
        entry: Result<CandidateAnswer, String>,
        at: &str,
    ) -> Proposed {
        let (patch, note) = match &entry {
            Ok(c) => (
                c.patch.as_deref().map(store::digest),
                c.note.as_deref().map(one_line).unwrap_or_default(),
            ),
            Err(_) => (None, String::new()),
        };
        let proposal = Proposal { patch, note };
        let parent = match &entry {
            Ok(c) => c.parent.map_or_else(
                || view.elite.first().copied().map(Ok),
                |n| Some(position(view.trials, n).ok_or(n)),
            ),
            Err(_) => None,
        };
        let start = parent
            .and_then(|p| p.ok())
            .map(|i| view.trials[i].candidate.config.clone())
            .unwrap_or_default();
        let parents = parent
            .and_then(|p| p.ok())
            .map(|i| vec![view.trials[i].candidate.trial])
            .unwrap_or_default();
        let failed = |reason: String, config: Config, parents: Vec<u32>| Proposed::Failed {
            config,
            parents,
            proposal: proposal.clone(),
            status: TrialStatus::ProposalError,
            reason: format!("candidate {k}: {}", redact(&reason, &self.secrets)),
            at: at.to_string(),
        };
        let made = entry.and_then(|c| {
            let parent = parent
                .transpose()
                .map_err(|n| format!("there is no trial {n}"))?;
            self.source_of(view, &c, parent, &start)
        });
        match made {
            Ok((source, config)) => Proposed::Ready {
                source,
                config,
                parents,
                proposal,
            },
            Err(reason) => failed(reason, start, parents),
        }
    }

    /// The candidate's source, kept in the store, and its configuration.
    fn source_of(
        &self,
        view: &View,
        c: &CandidateAnswer,
        parent: Option<usize>,
        start: &Config,
    ) -> Result<(crate::search::SourceRef, Config), String> {
        let from = match parent {
            Some(i) => {
                let t = &view.trials[i].candidate;
                if t.proposal.is_some() && t.source.is_none() {
                    return Err(format!(
                        "trial {} is a proposal that never had a source",
                        t.trial
                    ));
                }
                t.source.clone()
            }
            None if c.config.is_none() => {
                return Err(
                    "no trial has passed yet, so there is no configuration to start from: name a `parent` or a `config`"
                        .into(),
                )
            }
            None => None,
        };
        let mut config = start.clone();
        config.extend(c.config.clone().unwrap_or_default());
        if !view.space.valid().contains(&config) {
            return Err(format!(
                "configuration {} is not a valid configuration of the space",
                show(&config)
            ));
        }
        let text = match (&c.patch, &c.source) {
            (Some(patch), _) => {
                let base = self
                    .store
                    .text(from.as_ref())
                    .map_err(|e| format!("{e:#}"))?;
                store::apply(&base, patch)?
            }
            (None, Some(source)) => source.clone(),
            (None, None) => return Err("a candidate needs a `patch` or a `source`".into()),
        };
        let sent = [c.patch.as_deref(), c.source.as_deref(), Some(text.as_str())];
        if let Some((name, _)) = self
            .secrets
            .iter()
            .find(|(_, v)| sent.iter().flatten().any(|t| t.contains(v.as_str())))
        {
            return Err(format!("it contains the value of ${name}; refused"));
        }
        if text == self.store.base() {
            return Err("the proposed source is the kernel's own".into());
        }
        let source = self.store.put(&text).map_err(|e| format!("{e:#}"))?;
        Ok((source, config))
    }
}

/// The first line of a note, at most [`NOTE_CHARS`] characters.
fn one_line(note: &str) -> String {
    note.lines()
        .next()
        .unwrap_or_default()
        .trim()
        .chars()
        .take(NOTE_CHARS)
        .collect()
}

fn write_atomic(path: &PathBuf, text: &str) -> anyhow::Result<()> {
    let dir = path.parent().context("a cache file has a folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|_| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot write {}", path.display()))
}
