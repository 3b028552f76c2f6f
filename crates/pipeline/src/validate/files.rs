//! The files a pipeline names: each output belongs to one stage, and each dep exists, is
//! written by a stage its reader needs, or is a folder holding only such outputs. Paths are
//! compared as they are on disk: a [`Resolver`] reads them through the symlinks inside the
//! project first, so `link/x` and `real/x` (with `link -> real`) are one file. Every
//! lookup goes through an [`OutputIndex`] and the graph's ancestor bitsets: the checks are
//! linear in the number of outputs and deps.

use super::Report;
use crate::dag::Dag;
use crate::load::Stage;
use crate::output_index::{OutputIndex, OutputRef};
use crate::{paths, paths::PathProblem, paths::Resolver};
use foldhash::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};

/// No two stages may write the same output, or one inside another's output folder. Returns
/// the index of the outputs for [`check_deps`].
pub(super) fn check_outputs_unique(r: &mut Report, stages: &[Stage]) -> OutputIndex {
    let mut index = OutputIndex::new(stages.len());
    for (s, stage) in stages.iter().enumerate() {
        for (k, out) in stage.outputs.iter().enumerate() {
            let Err((owner, other)) = index.insert(out, (s, k)) else {
                continue;
            };
            let other = &stages[owner].outputs[other];
            let owner = &stages[owner].name;
            let written = stage
                .spec
                .outs
                .get(k)
                .and_then(|w| paths::check_relative(w).ok())
                .filter(|w| w != out)
                .map_or_else(String::new, |w| {
                    format!(" (`{}` through a symlink)", w.display())
                });
            let what = if other == out {
                format!(
                    "output `{}`{written} is also written by stage `{owner}`",
                    out.display()
                )
            } else {
                format!(
                    "output `{}`{written} of stage `{}` overlaps `{}`, written by stage `{owner}`",
                    out.display(),
                    stage.name,
                    other.display()
                )
            };
            r.at(
                &["stages", &stage.name, "outs", &k.to_string()],
                what,
                "each output belongs to exactly one stage: rename one, or merge the two stages",
            );
        }
    }
    index
}

/// A dep must not be the whole project, repro's own state, git's repository or the lock:
/// those change on every run, so the stage could never be up to date. `None` when `clean`
/// (the dep as written, cleaned) may be a dep.
fn forbidden_dep(clean: &Path) -> Option<&'static str> {
    if clean.as_os_str().is_empty() {
        Some("is the whole project, which holds repro's own state (`.repro/`, the lock) and `.git`")
    } else if clean.starts_with(paths::STATE_DIR) && !clean.starts_with(paths::CUBIN_DIR) {
        Some("is under `.repro/`, which repro rewrites on every run")
    } else if clean.starts_with(".git") {
        Some("is under `.git`, which changes with every git command")
    } else if Path::new(paths::LOCK_FILE).starts_with(clean) || clean.starts_with(paths::LOCK_FILE)
    {
        Some("holds repro's lock file, which every run rewrites")
    } else {
        None
    }
}

/// Each dep exists, or is written by a stage this one needs (directly or not); a dep folder
/// holds no output but those of stages this one needs: of its own stage, every run would
/// change the stage's inputs (it would never be up to date); of a stage it does not need,
/// the two could run in either order and its fingerprint would be taken before or after the
/// other wrote.
pub(super) fn check_deps(
    r: &mut Report,
    stages: &[Stage],
    dag: &Dag,
    root: &Path,
    index: &mut OutputIndex,
    resolver: &mut Resolver,
) {
    // Most deps are outputs read by several stages: each text is resolved once. A dep that
    // may not be one is not remembered, so each stage listing it is told.
    let mut resolved: HashMap<&str, Resolved> =
        HashMap::with_capacity_and_hasher(stages.len(), Default::default());
    for (i, stage) in stages.iter().enumerate() {
        for (d, dep) in stage.spec.deps.iter().enumerate() {
            let at = DepAt { i, stage, d, dep };
            let found = match resolved.entry(dep) {
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(new) => match resolve(r, &at, root, index, resolver) {
                    Some(found) => new.insert(found),
                    None => continue,
                },
            };
            check_reader(r, &at, found, stages, dag, root, index);
        }
    }
}

/// One dep of one stage, where its problems are reported.
struct DepAt<'a> {
    /// The stage's index.
    i: usize,
    stage: &'a Stage,
    /// Its place in the stage's `deps`.
    d: usize,
    dep: &'a str,
}

impl DepAt<'_> {
    fn report(&self, r: &mut Report, message: String, help: impl Into<String>) {
        let idx = self.d.to_string();
        r.at(&["stages", &self.stage.name, "deps", &idx], message, help);
    }
}

/// Where a dep is in the project, the same for every stage that lists it.
struct Resolved {
    /// The dep as it is on disk: the symlinks on its way within the project followed.
    real: PathBuf,
    /// What messages add for a dep read through a symlink (empty for one that is not).
    through: String,
    /// The output that is the dep or a folder above it.
    writer: Option<OutputRef>,
}

/// Where dep `at` is in the project; `None` once a dep that may not be one is reported, or
/// one outside the project checked.
fn resolve(
    r: &mut Report,
    at: &DepAt,
    root: &Path,
    index: &mut OutputIndex,
    resolver: &mut Resolver,
) -> Option<Resolved> {
    let (stage, dep) = (&at.stage.name, at.dep);
    let clean = match paths::check_relative(dep) {
        Ok(clean) => clean,
        Err(PathProblem::Empty) if !dep.trim().is_empty() => PathBuf::new(),
        Err(PathProblem::Empty) => {
            at.report(
                r,
                format!("a dep of stage `{stage}` is empty"),
                "name a file or folder the stage reads, relative to the folder of pipeline.yaml",
            );
            return None;
        }
        Err(PathProblem::Control) => {
            at.report(
                r,
                format!(
                    "dep `{}` of stage `{stage}` {}",
                    dep.escape_debug(),
                    PathProblem::Control
                ),
                "rename the file without tabs, newlines or escape characters",
            );
            return None;
        }
        // Outside the project as written: read, never written by a stage, unless it lands
        // back in the project (`/abs/project`, `../project`).
        Err(_) => {
            check_outside(r, at, root, &root.join(dep));
            return None;
        }
    };
    if let Some(why) = forbidden_dep(&clean) {
        at.report(
            r,
            format!("dep `{dep}` of stage `{stage}` {why}: the stage could never be up to date"),
            "list the files and folders the stage reads instead",
        );
        return None;
    }
    // Most deps are outputs of other stages: their folders resolved, they are found in the
    // index without looking at the file itself.
    let folders_resolved = resolver.resolve_parent(&clean);
    let found = folders_resolved
        .as_ref()
        .is_ok_and(|p| index.writer_of(p).is_some() || index.writers_inside(p).is_some());
    let real = match folders_resolved.and_then(|p| {
        if found {
            Ok(p)
        } else {
            resolver.resolve(&clean)
        }
    }) {
        Ok(real) => real,
        Err(PathProblem::SymlinkOut(_)) => {
            check_outside(r, at, root, &root.join(&clean));
            return None;
        }
        Err(problem) => {
            at.report(
                r,
                format!("dep `{dep}` of stage `{stage}` {problem}"),
                "fix or remove the symlink",
            );
            return None;
        }
    };
    if let Some(why) = forbidden_dep(&real).filter(|_| real != clean) {
        at.report(
            r,
            format!(
                "dep `{dep}` of stage `{stage}` reaches `{}` through a symlink; it {why}: the stage could never be up to date",
                if real.as_os_str().is_empty() { ".".to_string() } else { real.display().to_string() }
            ),
            "list the files and folders the stage reads instead",
        );
        return None;
    }
    let through = if real == clean {
        String::new()
    } else {
        format!(" (through a symlink: `{}`)", real.display())
    };
    let writer = index.writer_of(&real);
    Some(Resolved {
        real,
        through,
        writer,
    })
}

/// Dep `at`, `found` in the project, is written by a stage its stage needs, or is a folder
/// holding only such outputs, or exists.
fn check_reader(
    r: &mut Report,
    at: &DepAt,
    found: &Resolved,
    stages: &[Stage],
    dag: &Dag,
    root: &Path,
    index: &mut OutputIndex,
) {
    let (i, stage, dep) = (at.i, &at.stage.name, at.dep);
    let Resolved {
        real,
        through,
        writer,
    } = found;
    if let Some((w, _)) = *writer {
        if w == i {
            at.report(
                r,
                format!("stage `{stage}` lists its own output `{dep}`{through} as a dep"),
                "remove it from `deps`",
            );
        } else if !dag.needs_transitively(i, w) {
            let other = &stages[w].name;
            at.report(
                r,
                format!("dep `{dep}`{through} is written by stage `{other}`, which `{stage}` does not need"),
                format!("add `{other}` to the `needs` of `{stage}`"),
            );
        }
        return;
    }
    let Some(writers) = index.writers_inside(real) else {
        check_exists(r, at, &root.join(real));
        return;
    };
    // A folder that holds outputs (it need not exist before they are written).
    let offender = if writers.contains(i) {
        Some(i)
    } else {
        writers.first_not_in(dag.ancestors_of(i))
    };
    let Some(w) = offender else { return };
    let out = stages[w]
        .outputs
        .iter()
        .find(|o| o.starts_with(real))
        .map_or_else(String::new, |o| o.display().to_string());
    if w == i {
        at.report(
            r,
            format!(
                "dep folder `{dep}`{through} of stage `{stage}` holds its own output `{out}`: each run would change its own inputs"
            ),
            format!(
                "move the output out of `{dep}`, or list as deps only the files of `{dep}` the stage reads"
            ),
        );
        return;
    }
    let other = &stages[w].name;
    let fix = if dag.needs_transitively(w, i) {
        format!("`{other}` needs `{stage}`, so move `{out}` out of `{dep}`, or list as deps only the files of `{dep}` that `{stage}` reads")
    } else {
        format!("add `{other}` to the `needs` of `{stage}`, or move `{out}` out of `{dep}`")
    };
    at.report(
        r,
        format!(
            "dep folder `{dep}`{through} of stage `{stage}` holds `{out}`, an output of stage `{other}`, which `{stage}` does not need"
        ),
        fix,
    );
}

/// Where a path that leaves the project as written (absolute, `..`, a symlink leading
/// out) really is, when that is the project: `Some("")` for its folder, `Some(rel)` for a
/// place inside it, `Some("..")` for a folder holding it; `None` when it is elsewhere or
/// does not exist.
fn lands_in_project(root: &Path, full: &Path) -> Option<PathBuf> {
    let real = full.canonicalize().ok()?;
    let real_root = root.canonicalize().ok()?;
    match real.strip_prefix(&real_root) {
        Ok(rel) => Some(rel.to_path_buf()),
        Err(_) if real_root.starts_with(&real) => Some(PathBuf::from("..")),
        Err(_) => None,
    }
}

/// A dep that leaves the project as written: refused when it resolves to the whole
/// project, a folder holding it, or a place no dep may be ([`forbidden_dep`]); else it must
/// exist.
fn check_outside(r: &mut Report, at: &DepAt, root: &Path, full: &Path) {
    let Some(landing) = lands_in_project(root, full) else {
        check_exists(r, at, full);
        return;
    };
    let why = if landing == Path::new("..") {
        Some("holds the whole project, with repro's own state (`.repro/`, the lock) and `.git`")
    } else {
        forbidden_dep(&landing)
    };
    let Some(why) = why else {
        return;
    };
    let shown = match landing.to_str() {
        Some("") => "the project folder".to_string(),
        Some("..") => "a folder holding the project".to_string(),
        _ => format!("`{}` in the project", landing.display()),
    };
    at.report(
        r,
        format!(
            "dep `{}` of stage `{}` resolves to {shown}; it {why}: the stage could never be up to date",
            at.dep, at.stage.name
        ),
        "list the files and folders the stage reads instead",
    );
}

/// A dep no stage writes must be there when the pipeline is loaded.
fn check_exists(r: &mut Report, at: &DepAt, full: &Path) {
    if std::fs::metadata(full).is_err() {
        at.report(
            r,
            format!("dep `{}` of stage `{}` does not exist", at.dep, at.stage.name),
            "create the file, fix the path (relative to the folder of pipeline.yaml), or list the stage that writes it in `needs` and its `outs`",
        );
    }
}
