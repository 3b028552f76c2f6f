//! Is each stage up to date, and if not, what exactly changed: the comparison of a
//! stage's current [`Inputs`] and outputs with what `artifacts/repro.lock` recorded.

use super::fingerprint::{self, Inputs, MISSING};
use super::lockfile::{LockEntry, LockFile};
use super::run_record::Record;
use super::statcache::StatCache;
use super::value_diff;
use repro_pipeline::{kind::Overrides, Project};
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

impl Change {
    /// Whether only this machine differs here, not the sources: its GPU, its tools'
    /// versions, a param the kind derives from them (`machine`: the arch chosen for the GPU
    /// present), or a machine-local file (a cubin of the arch a GPU would load) that this
    /// machine would not load at all. A machine-local file whose content changed is a
    /// source change: the build now makes another program.
    pub fn machine_only(&self, machine: &[&str]) -> bool {
        match self.what {
            "hardware" | "tool" => true,
            "param" => machine.contains(&self.name.as_str()),
            "dep" => {
                self.name.starts_with(repro_pipeline::paths::MACHINE_LOCAL)
                    && (self.from.is_none() || self.to.is_none())
            }
            _ => false,
        }
    }
}

/// The changes of stage `i`, which kept the results of its recorded run `entry`, that are
/// not this machine's alone: empty when the kept results are current for these sources. An
/// upstream stage that reran counts only when something the stage consumed of it changed:
/// when the stage records the machine-local files it loads (the cubins it measured) and
/// each is on disk as it recorded, an upstream rerun that changed other files (another
/// variant's cubin) is not a change of its results.
pub fn source_changes<'a>(
    project: &Project,
    i: usize,
    entry: Option<&LockEntry>,
    changes: &'a [Change],
) -> Vec<&'a Change> {
    let machine = project.stages[i].kind.machine_params();
    let local = |name: &str| name.starts_with(repro_pipeline::paths::MACHINE_LOCAL);
    let records_what_it_loads = entry.is_some_and(|e| e.inputs.deps.keys().any(|k| local(k)));
    let loaded_changed = changes
        .iter()
        .any(|c| c.what == "dep" && local(&c.name) && c.from.is_some() && c.to.is_some());
    let consumed_same = records_what_it_loads && !loaded_changed;
    changes
        .iter()
        .filter(|c| !(c.machine_only(machine) || (consumed_same && c.what == "upstream")))
        .collect()
}

/// A machine-local dep the stage recorded and no longer lists here (this machine would
/// load no cubin, or another arch's) is still compared with the file on disk: the build
/// cross-compiles every arch, so a cubin rebuilt from edited sources shows as changed
/// (or missing) rather than as merely not loaded here.
fn compare_unlisted_local_deps(
    root: &std::path::Path,
    changes: &mut [Change],
    cache: &mut StatCache,
) {
    for c in changes.iter_mut() {
        let unlisted = c.what == "dep" && c.to.is_none() && c.from.is_some();
        if !unlisted || !c.name.starts_with(repro_pipeline::paths::MACHINE_LOCAL) {
            continue;
        }
        let now = match cache.digest_tree(root, std::path::Path::new(&c.name)) {
            Ok(tree) => tree.get(&c.name).cloned(),
            Err(_) => Some(MISSING.to_string()),
        };
        if now.is_some() && now != c.from {
            c.to = now;
        }
    }
}

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
    /// Its inputs changed, but on these inputs it cannot run on this machine (the reason:
    /// no GPU, no ncu, no torch), so the outputs of its last run — measured elsewhere —
    /// were kept. They are not up to date: the changes say against what.
    Kept {
        reason: String,
        changes: Vec<Change>,
        /// Those of `changes` that are not this machine's alone ([`source_changes`]):
        /// empty when the kept results are current for these sources.
        sources: Vec<Change>,
    },
}

impl State {
    /// Stage `i` kept the results of its recorded run `entry` despite `changes`, because it
    /// cannot run here (`reason`).
    pub fn kept(
        project: &Project,
        i: usize,
        entry: Option<&LockEntry>,
        reason: String,
        changes: Vec<Change>,
    ) -> State {
        let sources = source_changes(project, i, entry, &changes)
            .into_iter()
            .cloned()
            .collect();
        State::Kept {
            reason,
            changes,
            sources,
        }
    }

    /// Kept results that are current: only the machine differs.
    pub fn kept_current(&self) -> bool {
        matches!(self, State::Kept { sources, .. } if sources.is_empty())
    }

    pub fn label(&self) -> &'static str {
        match self {
            State::UpToDate => "up-to-date",
            State::Stale(_) => "stale",
            State::NeverRun => "never-run",
            State::Failed(_) => "failed",
            State::Kept { .. } => "kept",
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

impl StageStatus {
    /// Its fingerprint now, and whether the outputs in place are kept earlier results.
    pub fn current(&self) -> (String, bool) {
        (
            self.fingerprint.clone(),
            matches!(self.state, State::Kept { .. }),
        )
    }
}

/// What differs between the inputs `was` recorded and the inputs `now`.
fn input_changes(was: &Inputs, now: &Inputs) -> Vec<Change> {
    let mut out = Vec::new();
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
    out
}

/// Everything on disk under the stage's declared outputs, against what its run recorded:
/// a file changed or gone, a file added to an output folder, an empty one deleted.
fn output_changes(
    project: &Project,
    stage: &repro_pipeline::Stage,
    entry: &LockEntry,
    cache: &mut StatCache,
) -> Vec<Change> {
    let mut on_disk = BTreeMap::new();
    for out in &stage.outputs {
        if let Ok(tree) = cache.digest_tree(&project.root, out) {
            on_disk.extend(tree);
        }
    }
    let mut out = Vec::new();
    diff_maps(&mut out, "output", &entry.outputs, &on_disk);
    for change in &mut out {
        change.to.get_or_insert_with(|| MISSING.to_string());
    }
    out
}

/// The keys whose values differ between two sorted maps, in key order (one merged pass).
fn diff_maps(
    out: &mut Vec<Change>,
    what: &'static str,
    was: &BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) {
    let (mut a, mut b) = (was.iter().peekable(), now.iter().peekable());
    loop {
        let (from, to) = match (a.peek(), b.peek()) {
            (None, None) => return,
            (Some((ka, _)), Some((kb, _))) if ka == kb => (a.next(), b.next()),
            (Some((ka, _)), Some((kb, _))) if ka < kb => (a.next(), None),
            (Some(_), None) => (a.next(), None),
            _ => (None, b.next()),
        };
        if from.map(|(_, v)| v) == to.map(|(_, v)| v) {
            continue;
        }
        out.push(Change {
            what,
            name: from.or(to).map(|(k, _)| k.clone()).unwrap_or_default(),
            from: from.map(|(_, v)| v.clone()),
            to: to.map(|(_, v)| v.clone()),
        });
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
                output_changes(project, stage, e, &mut ctx.cache)
            } else {
                let mut c = input_changes(&e.inputs, &inputs);
                compare_unlisted_local_deps(&project.root, &mut c, &mut ctx.cache);
                c.extend(output_changes(project, stage, e, &mut ctx.cache));
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
                match failed_or(record, &fp, State::Stale(changed)) {
                    State::Kept {
                        reason, changes, ..
                    } => State::kept(project, index, Some(e), reason, changes),
                    other => other,
                }
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

/// `failed` when the last run, with these very inputs, failed, and `kept` when it could not
/// run here and kept the earlier results; after an edit the stage is plainly stale (the
/// edit may be the fix, or the tool may be installed now).
fn failed_or(record: Option<&Record>, fingerprint: &str, otherwise: State) -> State {
    let Some(r) = record.filter(|r| r.fingerprint == fingerprint) else {
        return otherwise;
    };
    if let Some(message) = r.failure() {
        return State::Failed(message.to_string());
    }
    match (r.kept(), otherwise) {
        (Some(reason), State::Stale(changes)) => State::Kept {
            reason: reason.to_string(),
            changes,
            sources: Vec::new(),
        },
        (_, otherwise) => otherwise,
    }
}

/// What evaluating stages reads: the lock, the last-run records, overrides, the digest cache.
pub struct EvalCtx<'a> {
    pub lock: &'a LockFile,
    pub records: &'a BTreeMap<String, Record>,
    pub overrides: &'a Overrides,
    pub cache: StatCache,
}

/// Every stage's status as `repro status` shows it: the lock, the last-run records and the
/// digest cache read from under `project.root` (the cache is saved for next time).
pub fn evaluate_project(project: &Project) -> anyhow::Result<Vec<StageStatus>> {
    super::project_lock::check_state_dirs(&project.root)?;
    let lock = LockFile::load(&project.root)?;
    let records = super::run_record::load(
        &project.root,
        project.stages.iter().map(|s| s.name.as_str()),
    );
    let overrides = Overrides::default();
    let mut ctx = EvalCtx {
        lock: &lock,
        records: &records,
        overrides: &overrides,
        cache: StatCache::load(&project.root),
    };
    let statuses = evaluate_all(project, &mut ctx)?;
    let _ = ctx.cache.save();
    Ok(statuses)
}

/// Every stage's status, indexed like `project.stages`.
pub fn evaluate_all(project: &Project, ctx: &mut EvalCtx) -> anyhow::Result<Vec<StageStatus>> {
    let mut done: Vec<Option<StageStatus>> = vec![None; project.stages.len()];
    let mut recorded = RecordedUpstream::default();
    for &i in project.dag.topo_order() {
        let upstream = upstream_fingerprints(project, i, ctx.lock, &mut recorded, |j| {
            done[j].as_ref().map(StageStatus::current)
        });
        done[i] = Some(evaluate_one(project, i, upstream, ctx)?);
    }
    Ok(done
        .into_iter()
        .map(|s| s.expect("topological order covers every stage"))
        .collect())
}

/// Needed stage name → what stage `i` depends on of it. When the lock holds the outputs
/// that are in place for that stage (a run with its current fingerprint, or earlier results
/// it kept because it cannot run here), that is the digest of those outputs alone: a rerun
/// that writes byte-identical results (a comment-only kernel edit gives the same cubins)
/// leaves what needs it up to date, and one that writes new results (new timings) makes it
/// stale — early cutoff, as DVC and Bazel do. Kinds that record provenance (the summary's
/// manifest names the sources' commit) opt out: they also see the upstream's fingerprint.
/// When the lock holds no such run, the stage is about to run, and its fingerprint stands
/// in for outputs not yet written.
///
/// `current(j)` gives stage `j`'s fingerprint now and whether it kept earlier results.
pub fn upstream_fingerprints(
    project: &Project,
    i: usize,
    lock: &LockFile,
    recorded: &mut RecordedUpstream,
    current: impl Fn(usize) -> Option<(String, bool)>,
) -> BTreeMap<String, String> {
    let early_cutoff = project.stages[i].kind.early_cutoff();
    project
        .dag
        .needs(i)
        .iter()
        .map(|&j| {
            let name = &project.stages[j].name;
            let (fingerprint, kept) = current(j).unwrap_or_default();
            let value = match lock.stages.get(name) {
                Some(run) if run.fingerprint == fingerprint => recorded.get(j, run, early_cutoff),
                // Kept results are the recorded run's, in place and unchanged: what needs
                // them sees that run, so a machine that cannot re-measure reruns nothing
                // downstream (the report says where each result was measured, from the lock).
                Some(run) if kept => recorded.get(j, run, early_cutoff),
                _ => fingerprint,
            };
            (name.clone(), value)
        })
        .collect()
}

/// [`recorded_upstream`] of each stage, computed once however many stages need it, for
/// one lock as it stands (a new one after a stage records a run).
#[derive(Default)]
pub struct RecordedUpstream(std::collections::HashMap<(usize, bool), String>);

impl RecordedUpstream {
    fn get(&mut self, stage: usize, run: &LockEntry, early_cutoff: bool) -> String {
        self.0
            .entry((stage, early_cutoff))
            .or_insert_with(|| recorded_upstream(run, early_cutoff))
            .clone()
    }
}

/// What a stage that needs the recorded run `run` sees of it: the digest of its outputs,
/// and of its fingerprint too for kinds without early cutoff.
pub fn recorded_upstream(run: &LockEntry, early_cutoff: bool) -> String {
    let mut h = Sha256::new();
    if early_cutoff {
        h.update(b"outputs");
    } else {
        h.update(run.fingerprint.as_bytes());
    }
    for (path, digest) in &run.outputs {
        h.update(format!("\n{path}\t{digest}").as_bytes());
    }
    repro_base::tools::hex(&h.finalize())
}

/// The manifest as HEAD has it — the one written with the committed results, which a
/// summary re-rendered here has since replaced in the working tree — or, outside git, the
/// working tree's.
fn committed_manifest(root: &std::path::Path) -> Option<String> {
    let file = repro_pipeline::paths::MANIFEST_FILE;
    let at_head = || -> Option<String> {
        let repo = git2::Repository::discover(root).ok()?;
        let workdir = repo.workdir()?.canonicalize().ok()?;
        let rel = root
            .canonicalize()
            .ok()?
            .strip_prefix(&workdir)
            .ok()?
            .join(file);
        let tree = repo.head().ok()?.peel_to_tree().ok()?;
        let blob = tree
            .get_path(&rel)
            .ok()?
            .to_object(&repo)
            .ok()?
            .peel_to_blob()
            .ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    };
    at_head().or_else(|| std::fs::read_to_string(root.join(file)).ok())
}

/// `kept: measured on <GPU> on <date> at <commit>`: where a kept stage's results came from,
/// from its lock entry and the manifest of the run that made them.
pub fn kept_from(project: &Project, i: usize) -> String {
    let lock = LockFile::load(&project.root).unwrap_or_default();
    let machine = lock
        .stages
        .get(&project.stages[i].name)
        .and_then(|e| e.inputs.hardware.clone())
        .unwrap_or_else(|| "another machine".into());
    let manifest: Option<serde_yaml::Value> =
        committed_manifest(&project.root).and_then(|t| serde_yaml::from_str(&t).ok());
    let when = manifest.as_ref().and_then(|m| {
        m["created_utc"]
            .as_str()
            .map(|d| d.get(..10).unwrap_or(d).to_string())
    });
    let commit = manifest.as_ref().and_then(|m| {
        m["git"]["sha"]
            .as_str()
            .map(|c| c.get(..10).unwrap_or(c).to_string())
    });
    let mut text = format!("kept: measured on {machine}");
    if let Some(d) = when {
        text.push_str(&format!(" on {d}"));
    }
    if let Some(c) = commit {
        text.push_str(&format!(" at {c}"));
    }
    text
}

/// A note that another repro is running in the project: the outputs of the stages it is
/// running are moved aside (or half written) until they end, so they read as missing or
/// modified here.
pub fn run_in_progress(project: &Project) -> Option<String> {
    let holder = super::project_lock::running(&project.root)?;
    Some(format!(
        "note: a run is in progress (pid {} on {}, since {}):\n  the outputs of the stages it is running read as missing or modified until they end",
        holder.pid, holder.host, holder.since
    ))
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
    // What comes from outside (a log tail, a file name, an edited lock) is shown, not
    // sent to the terminal, and each line fits in STATUS_COLUMNS.
    let mut push = |line: String| {
        out.push_str(&super::display::visible_line(
            line.trim_end(),
            STATUS_COLUMNS,
        ));
        out.push('\n');
    };
    if let Some(note) = run_in_progress(project) {
        note.lines().for_each(|l| push(l.to_string()));
    }
    for &i in project.dag.topo_order() {
        let s = &statuses[i];
        let name = &project.stages[i].name;
        let mut line = format!("{name:width$}  {}", s.state.label());
        if let State::Kept { .. } = &s.state {
            line.push_str(match s.state.kept_current() {
                true => " (current: only the machine differs)",
                false => " (NOT measured for these sources: they changed since)",
            });
        }
        if let Some(g) = &s.gate_failed {
            line.push_str(&format!(" (gate failed: {g})"));
        }
        if let Some(reason) = &s.skipped {
            line.push_str(&format!(" (skipped: {reason})"));
        }
        push(line);
        match &s.state {
            State::Stale(changes) => {
                let room = STATUS_COLUMNS.saturating_sub(width + 4).max(40);
                for c in changes {
                    push(format!("{:width$}    {}", "", c.line(room)));
                }
            }
            State::Kept {
                reason, sources, ..
            } => {
                // Said once: where the results came from and why this machine cannot
                // re-run them; then only what changed in the sources, never the machine's
                // own differences (its GPU, tools, the cubins it would load).
                push(format!(
                    "{:width$}    {}; not re-run here: {reason}",
                    "",
                    kept_from(project, s.index)
                ));
                let room = STATUS_COLUMNS.saturating_sub(width + 4).max(40);
                for c in sources {
                    push(format!("{:width$}    {}", "", c.line(room)));
                }
            }
            State::Failed(msg) => {
                for l in msg.lines() {
                    push(format!("{:width$}    {l}", ""));
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
    /// Why it could not re-run here, when it kept earlier results.
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<&'a str>,
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
                    State::Stale(c) | State::Kept { changes: c, .. } => c,
                    _ => &[],
                },
                error: match &s.state {
                    State::Failed(m) => Some(m),
                    _ => None,
                },
                kept: match &s.state {
                    State::Kept { reason, .. } => Some(reason),
                    _ => None,
                },
                gate_failed: s.gate_failed.as_deref(),
                skipped: s.skipped.as_deref(),
            }
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("status serializes") + "\n"
}
