//! Is each stage up to date, and if not, what exactly changed: the comparison of a
//! stage's current [`Inputs`] and outputs with what `artifacts/repro.lock` recorded.

use super::fingerprint::{self, Inputs, MISSING};
use super::lockfile::{LockEntry, LockFile};
use super::run_record::Record;
use super::statcache::StatCache;
use super::value_diff;
use crate::pipeline::Project;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;

/// One thing that differs from the lock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// `kind`, `command`, `option`, `dep`, `param`, `env`, `tool`, `hardware`,
    /// `override`, `upstream` or `output`.
    pub what: &'static str,
    /// The key, file or stage concerned (empty for `command`, `kind`, `hardware`).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl Change {
    /// The change in at most `max` columns: a long value (a metric list, a JSON option)
    /// reads as what changed in it ([`value_diff::summarize`]); `repro status --json` keeps
    /// both values in full.
    pub fn line(&self, max: usize) -> String {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        match self.what {
            "command" => "command changed (run, shell or outs)".into(),
            "dep" | "output" => {
                let state = match (&self.from, &self.to) {
                    (None, _) => "added",
                    (_, None) => "removed",
                    (_, Some(t)) if t == MISSING => "missing",
                    _ if self.what == "output" => "modified",
                    _ => "changed",
                };
                format!("{} `{}` {state}", self.what, self.name)
            }
            "upstream" => match (&self.from, &self.to) {
                (None, _) => format!("now needs `{}`", self.name),
                (_, None) => format!("no longer needs `{}`", self.name),
                _ => format!("upstream `{}` changed", self.name),
            },
            _ => {
                let head = match self.what {
                    "kind" | "hardware" => format!("{} changed: ", self.what),
                    _ => format!("{} `{}` changed: ", self.what, self.name),
                };
                let budget = max.saturating_sub(value_diff::width(&head));
                let body = value_diff::summarize(&shown(&self.from), &shown(&self.to), budget);
                head + &body
            }
        }
    }
}

/// Columns a change takes where no terminal width is known (a run's plan lines).
const DEFAULT_COLUMNS: usize = 96;
/// The terminal width `repro status` fits its lines in.
const STATUS_COLUMNS: usize = 100;

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line(DEFAULT_COLUMNS))
    }
}

/// A stage's state.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    UpToDate,
    Stale(Vec<Change>),
    NeverRun,
    /// Its last run failed (the message); it has not succeeded since on these inputs.
    Failed(String),
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::UpToDate => "up-to-date",
            State::Stale(_) => "stale",
            State::NeverRun => "never-run",
            State::Failed(_) => "failed",
        }
    }
}

/// Everything known about one stage before running it.
#[derive(Debug, Clone)]
pub struct StageStatus {
    pub index: usize,
    pub inputs: Inputs,
    pub fingerprint: String,
    pub state: State,
    /// From the lock: the stage ran on these inputs but a gate failed.
    pub gate_failed: Option<String>,
    /// From the lock: the stage's last run was skipped, and why.
    pub skipped: Option<String>,
}

/// Compare a stage's current inputs (and its outputs on disk) with its lock entry.
pub fn changes(
    project: &Project,
    entry: &LockEntry,
    now: &Inputs,
    cache: &mut StatCache,
) -> Vec<Change> {
    let mut out = Vec::new();
    let was = &entry.inputs;
    let one = |what, from: &str, to: &str| Change {
        what,
        name: String::new(),
        from: Some(from.to_string()),
        to: Some(to.to_string()),
    };
    if was.kind != now.kind {
        out.push(one("kind", &was.kind, &now.kind));
    }
    if was.command != now.command {
        out.push(one("command", &was.command, &now.command));
    }
    if was.hardware != now.hardware {
        out.push(Change {
            what: "hardware",
            name: String::new(),
            from: was.hardware.clone(),
            to: now.hardware.clone(),
        });
    }
    diff_maps(&mut out, "option", &was.options, &now.options);
    diff_maps(&mut out, "dep", &was.deps, &now.deps);
    diff_maps(&mut out, "param", &was.params, &now.params);
    diff_maps(&mut out, "env", &was.env, &now.env);
    diff_maps(&mut out, "tool", &was.tools, &now.tools);
    diff_maps(&mut out, "override", &was.overrides, &now.overrides);
    diff_maps(&mut out, "upstream", &was.upstream, &now.upstream);
    for (file, digest) in &entry.outputs {
        let current = cache
            .digest_file(&project.root, file.as_ref())
            .unwrap_or_else(|_| MISSING.to_string());
        if &current != digest {
            out.push(Change {
                what: "output",
                name: file.clone(),
                from: Some(digest.clone()),
                to: Some(current),
            });
        }
    }
    out
}

fn diff_maps(
    out: &mut Vec<Change>,
    what: &'static str,
    was: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) {
    let keys: std::collections::BTreeSet<&String> = was.keys().chain(now.keys()).collect();
    for k in keys {
        let (a, b) = (was.get(k), now.get(k));
        if a != b {
            out.push(Change {
                what,
                name: k.clone(),
                from: a.cloned(),
                to: b.cloned(),
            });
        }
    }
}

/// Decide the state of stage `index`, given the current fingerprints of what it needs.
pub fn evaluate_one(
    project: &Project,
    index: usize,
    upstream: BTreeMap<String, String>,
    ctx: &mut EvalCtx,
) -> anyhow::Result<StageStatus> {
    let stage = &project.stages[index];
    let inputs = fingerprint::compute(project, stage, upstream, ctx.overrides, &mut ctx.cache)?;
    let fp = inputs.fingerprint();
    let entry = ctx.lock.stages.get(&stage.name);
    let record = ctx.records.get(&stage.name);
    let (mut gate_failed, mut skipped) = (None, None);
    let state = match entry {
        Some(e) => {
            let changed = if e.fingerprint == fp {
                // Only outputs can differ.
                changes(project, e, &inputs, &mut ctx.cache)
            } else {
                let mut c = changes(project, e, &inputs, &mut ctx.cache);
                if c.is_empty() {
                    c.push(Change {
                        what: "command",
                        name: String::new(),
                        from: Some(e.fingerprint.clone()),
                        to: Some(fp.clone()),
                    });
                }
                c
            };
            if changed.is_empty() {
                gate_failed = e.gate_failed.clone();
                skipped = e.skipped.clone();
                State::UpToDate
            } else {
                failed_or(record, &fp, State::Stale(changed))
            }
        }
        None => failed_or(record, &fp, State::NeverRun),
    };
    Ok(StageStatus {
        index,
        inputs,
        fingerprint: fp,
        state,
        gate_failed,
        skipped,
    })
}

/// `failed` when the last run, with these very inputs, failed; after an edit the stage is
/// plainly stale (the edit may be the fix).
fn failed_or(record: Option<&Record>, fingerprint: &str, otherwise: State) -> State {
    match record.filter(|r| r.fingerprint == fingerprint) {
        Some(r) => match r.failure() {
            Some(message) => State::Failed(message.to_string()),
            None => otherwise,
        },
        None => otherwise,
    }
}

/// What evaluating stages reads: the lock, the last-run records, overrides, the digest cache.
pub struct EvalCtx<'a> {
    pub lock: &'a LockFile,
    pub records: &'a BTreeMap<String, Record>,
    pub overrides: &'a BTreeMap<String, String>,
    pub cache: StatCache,
}

/// Every stage's status, indexed like `project.stages`.
pub fn evaluate_all(project: &Project, ctx: &mut EvalCtx) -> anyhow::Result<Vec<StageStatus>> {
    let mut done: Vec<Option<StageStatus>> = vec![None; project.stages.len()];
    for &i in project.dag.topo_order() {
        let upstream = upstream_fingerprints(project, i, ctx.lock, |j| {
            done[j].as_ref().map(|s| s.fingerprint.clone())
        });
        done[i] = Some(evaluate_one(project, i, upstream, ctx)?);
    }
    Ok(done
        .into_iter()
        .map(|s| s.expect("topological order covers every stage"))
        .collect())
}

/// Needed stage name → what stage `i` depends on of it: its fingerprint and, when the lock
/// holds a run with that fingerprint, the digests of that run's outputs. A rerun
/// (`--force`) that writes different results (new timings) thus makes what needs it stale,
/// and one that writes the same bytes does not.
pub fn upstream_fingerprints(
    project: &Project,
    i: usize,
    lock: &LockFile,
    fp: impl Fn(usize) -> Option<String>,
) -> BTreeMap<String, String> {
    project
        .dag
        .needs(i)
        .iter()
        .map(|&j| {
            let name = &project.stages[j].name;
            let fingerprint = fp(j).unwrap_or_default();
            let value = match lock.stages.get(name) {
                Some(run) if run.fingerprint == fingerprint => {
                    let mut h = Sha256::new();
                    h.update(fingerprint.as_bytes());
                    for (path, digest) in &run.outputs {
                        h.update(format!("\n{path}\t{digest}").as_bytes());
                    }
                    crate::tools::hex(&h.finalize())
                }
                _ => fingerprint,
            };
            (name.clone(), value)
        })
        .collect()
}

/// Whether every stage is up to date (`repro status --exit-code` exits 0 only then).
pub fn all_up_to_date(statuses: &[StageStatus]) -> bool {
    statuses.iter().all(|s| s.state == State::UpToDate)
}

/// `repro status` as text: one line per stage, then what changed, each in at most
/// 100 columns.
pub fn render_text(project: &Project, statuses: &[StageStatus]) -> String {
    let width = project
        .stages
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for &i in project.dag.topo_order() {
        let s = &statuses[i];
        let name = &project.stages[i].name;
        let mut line = format!("{name:width$}  {}", s.state.label());
        if let Some(g) = &s.gate_failed {
            line.push_str(&format!(" (gate failed: {g})"));
        }
        if let Some(reason) = &s.skipped {
            line.push_str(&format!(" (skipped: {reason})"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        match &s.state {
            State::Stale(changes) => {
                let room = STATUS_COLUMNS.saturating_sub(width + 4).max(40);
                for c in changes {
                    out.push_str(&format!("{:width$}    {}\n", "", c.line(room)));
                }
            }
            State::Failed(msg) => {
                for l in msg.lines() {
                    out.push_str(&format!("{:width$}    {l}\n", ""));
                }
            }
            _ => {}
        }
    }
    out
}

#[derive(Serialize)]
struct JsonStatus<'a> {
    stage: &'a str,
    kind: &'a str,
    state: &'static str,
    fingerprint: &'a str,
    changes: &'a [Change],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gate_failed: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<&'a str>,
}

/// `repro status --json`: an array in run order.
pub fn render_json(project: &Project, statuses: &[StageStatus]) -> String {
    let rows: Vec<JsonStatus> = project
        .dag
        .topo_order()
        .iter()
        .map(|&i| {
            let s = &statuses[i];
            JsonStatus {
                stage: &project.stages[i].name,
                kind: &s.inputs.kind,
                state: s.state.label(),
                fingerprint: &s.fingerprint,
                changes: match &s.state {
                    State::Stale(c) => c,
                    _ => &[],
                },
                error: match &s.state {
                    State::Failed(m) => Some(m),
                    _ => None,
                },
                gate_failed: s.gate_failed.as_deref(),
                skipped: s.skipped.as_deref(),
            }
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("status serializes") + "\n"
}
