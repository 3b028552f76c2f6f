//! What differs from the lock: each [`Change`], and which are this machine's alone.

use crate::lockfile::LockEntry;
use crate::statcache::StatCache;
use crate::value_diff;
use crate::{fingerprint::Inputs, fingerprint::MISSING};
use repro_pipeline::Project;
use serde::Serialize;
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
pub(super) fn compare_unlisted_local_deps(
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
/// What differs between the inputs `was` recorded and the inputs `now`.
pub(super) fn input_changes(was: &Inputs, now: &Inputs) -> Vec<Change> {
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

/// Everything on disk under the stage's declared outputs, digested (an output that cannot
/// be read is left out: it reads as missing).
pub(super) fn outputs_on_disk(
    project: &Project,
    stage: &repro_pipeline::Stage,
    cache: &mut StatCache,
) -> BTreeMap<String, String> {
    let mut on_disk = BTreeMap::new();
    for out in &stage.outputs {
        let _ = cache.digest_tree_into(&project.root, out, &mut on_disk);
    }
    on_disk
}

/// The outputs [`outputs_on_disk`] against what the stage's run recorded: a file changed or
/// gone, a file added to an output folder, an empty one deleted.
pub(super) fn output_changes(entry: &LockEntry, on_disk: &BTreeMap<String, String>) -> Vec<Change> {
    let mut out = Vec::new();
    diff_maps(&mut out, "output", &entry.outputs, on_disk);
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
