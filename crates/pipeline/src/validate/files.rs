//! The files a pipeline names: each output belongs to one stage, and each dep exists, is
//! written by a stage its reader needs, or is a folder holding only such outputs. Paths are
//! compared as they are on disk: a [`Resolver`] reads them through the symlinks inside the
//! project first, so `link/x` and `real/x` (with `link -> real`) are one file. Every
//! lookup goes through an [`OutputIndex`] and the graph's ancestor bitsets: the checks are
//! linear in the number of outputs and deps.

use super::Report;
use crate::dag::Dag;
use crate::load::Stage;
use crate::output_index::OutputIndex;
use crate::{paths, paths::PathProblem, paths::Resolver};
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
    for (i, stage) in stages.iter().enumerate() {
        for (d, dep) in stage.spec.deps.iter().enumerate() {
            let idx = d.to_string();
            let path = ["stages", stage.name.as_str(), "deps", idx.as_str()];
            let clean = match paths::check_relative(dep) {
                Ok(clean) => clean,
                Err(PathProblem::Empty) if !dep.trim().is_empty() => PathBuf::new(),
                Err(PathProblem::Empty) => {
                    r.at(
                        &path,
                        format!("a dep of stage `{}` is empty", stage.name),
                        "name a file or folder the stage reads, relative to the folder of pipeline.yaml",
                    );
                    continue;
                }
                Err(PathProblem::Control) => {
                    r.at(
                        &path,
                        format!(
                            "dep `{}` of stage `{}` {}",
                            dep.escape_debug(),
                            stage.name,
                            PathProblem::Control
                        ),
                        "rename the file without tabs, newlines or escape characters",
                    );
                    continue;
                }
                // Outside the project as written: read, never written by a stage, unless
                // it lands back in the project (`/abs/project`, `../project`).
                Err(_) => {
                    check_outside(r, &path, stage, dep, root, &root.join(dep));
                    continue;
                }
            };
            if let Some(why) = forbidden_dep(&clean) {
                r.at(
                    &path,
                    format!(
                        "dep `{dep}` of stage `{}` {why}: the stage could never be up to date",
                        stage.name
                    ),
                    "list the files and folders the stage reads instead",
                );
                continue;
            }
            // Most deps are outputs of other stages: their folders resolved, they are
            // found in the index without looking at the file itself.
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
                    check_outside(r, &path, stage, dep, root, &root.join(&clean));
                    continue;
                }
                Err(problem) => {
                    r.at(
                        &path,
                        format!("dep `{dep}` of stage `{}` {problem}", stage.name),
                        "fix or remove the symlink",
                    );
                    continue;
                }
            };
            if let Some(why) = forbidden_dep(&real).filter(|_| real != clean) {
                r.at(
                    &path,
                    format!(
                        "dep `{dep}` of stage `{}` reaches `{}` through a symlink; it {why}: the stage could never be up to date",
                        stage.name,
                        if real.as_os_str().is_empty() { ".".to_string() } else { real.display().to_string() }
                    ),
                    "list the files and folders the stage reads instead",
                );
                continue;
            }
            let through = if real == clean {
                String::new()
            } else {
                format!(" (through a symlink: `{}`)", real.display())
            };
            if let Some((w, _)) = index.writer_of(&real) {
                if w == i {
                    r.at(
                        &path,
                        format!(
                            "stage `{}` lists its own output `{dep}`{through} as a dep",
                            stage.name
                        ),
                        "remove it from `deps`",
                    );
                } else if !dag.needs_transitively(i, w) {
                    r.at(
                        &path,
                        format!(
                            "dep `{dep}`{through} is written by stage `{}`, which `{}` does not need",
                            stages[w].name, stage.name
                        ),
                        format!(
                            "add `{}` to the `needs` of `{}`",
                            stages[w].name, stage.name
                        ),
                    );
                }
                continue;
            }
            let Some(writers) = index.writers_inside(&real) else {
                check_exists(r, &path, stage, dep, &root.join(&real));
                continue;
            };
            // A folder that holds outputs (it need not exist before they are written).
            let offender = if writers.contains(i) {
                Some(i)
            } else {
                writers.first_not_in(dag.ancestors_of(i))
            };
            let Some(w) = offender else { continue };
            let out = stages[w]
                .outputs
                .iter()
                .find(|o| o.starts_with(&real))
                .map_or_else(String::new, |o| o.display().to_string());
            if w == i {
                r.at(
                    &path,
                    format!(
                        "dep folder `{dep}`{through} of stage `{}` holds its own output `{out}`: each run would change its own inputs",
                        stage.name
                    ),
                    format!(
                        "move the output out of `{dep}`, or list as deps only the files of `{dep}` the stage reads"
                    ),
                );
                continue;
            }
            let other = &stages[w].name;
            let fix = if dag.needs_transitively(w, i) {
                format!("`{other}` needs `{}`, so move `{out}` out of `{dep}`, or list as deps only the files of `{dep}` that `{}` reads", stage.name, stage.name)
            } else {
                format!(
                    "add `{other}` to the `needs` of `{}`, or move `{out}` out of `{dep}`",
                    stage.name
                )
            };
            r.at(
                &path,
                format!(
                    "dep folder `{dep}`{through} of stage `{}` holds `{out}`, an output of stage `{other}`, which `{}` does not need",
                    stage.name, stage.name
                ),
                fix,
            );
        }
    }
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
fn check_outside(
    r: &mut Report,
    path: &[&str],
    stage: &Stage,
    dep: &str,
    root: &Path,
    full: &Path,
) {
    let Some(landing) = lands_in_project(root, full) else {
        check_exists(r, path, stage, dep, full);
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
    r.at(
        path,
        format!(
            "dep `{dep}` of stage `{}` resolves to {shown}; it {why}: the stage could never be up to date",
            stage.name
        ),
        "list the files and folders the stage reads instead",
    );
}

/// A dep no stage writes must be there when the pipeline is loaded.
fn check_exists(r: &mut Report, path: &[&str], stage: &Stage, dep: &str, full: &Path) {
    if std::fs::metadata(full).is_err() {
        r.at(
            path,
            format!("dep `{dep}` of stage `{}` does not exist", stage.name),
            "create the file, fix the path (relative to the folder of pipeline.yaml), or list the stage that writes it in `needs` and its `outs`",
        );
    }
}
