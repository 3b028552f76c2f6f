//! Checks that need more than the YAML types: stage kinds, `needs`, cycles, outputs
//! (unique, inside the project), deps (present or written upstream), timeouts, and each
//! kind's own options. Every problem becomes a [`Diagnostic`] at the offending key.

use super::dag::Dag;
use super::diag::{did_you_mean, quoted_list, Diagnostic, PipelineError};
use super::load::Stage;
use super::paths;
use super::spans::SpanIndex;
use super::spec::{Pipeline, STAGE_KEYS};
use crate::engine::StageKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every stage kind repro knows of (what `uses:` may say; suggestions come from here).
pub const BUILTIN_KINDS: &[&str] = &["cmd", "build", "bench", "tune", "profile", "summarize"];

/// Executor kinds pipeline.yaml may name.
pub const EXECUTOR_KINDS: &[&str] = &["local", "slurm"];

struct Report<'a> {
    file: &'a Path,
    /// The pipeline text; indexed for positions only once there is an error to place.
    text: &'a str,
    spans: std::cell::OnceCell<SpanIndex>,
    diags: Vec<Diagnostic>,
}

impl Report<'_> {
    fn spans(&self) -> &SpanIndex {
        self.spans.get_or_init(|| SpanIndex::build(self.text))
    }

    /// A problem with the value at `path` (or its key when there is no value position).
    fn at(&mut self, path: &[&str], message: String, help: impl Into<String>) {
        let spans = self.spans();
        let pos = spans.value(path).unwrap_or_else(|| spans.locate(path));
        self.push(pos, message, help.into());
    }

    /// A problem with the key at `path` itself.
    fn at_key(&mut self, path: &[&str], message: String, help: impl Into<String>) {
        let pos = self.spans().locate(path);
        self.push(pos, message, help.into());
    }

    fn push(&mut self, pos: super::spans::Pos, message: String, help: String) {
        self.diags.push(Diagnostic {
            file: self.file.to_path_buf(),
            line: pos.line,
            col: pos.col,
            message,
            help: (!help.is_empty()).then_some(help),
        });
    }
}

/// `arch:`: every entry an architecture like `sm_89` or `sm_90a`, none twice, and not an
/// empty list.
fn check_arch(r: &mut Report, archs: &[String]) {
    const HELP: &str = "list the GPU architectures to compile for, e.g. `arch: [sm_89, sm_90a]` (an L4 is sm_89; an H100 runs sm_90a)";
    if archs.is_empty() && r.spans().key(&["arch"]).is_some() {
        r.at(&["arch"], "`arch:` lists no architecture".into(), HELP);
    }
    for (i, arch) in archs.iter().enumerate() {
        let idx = i.to_string();
        if !crate::stages::build::arch::is_valid(arch) {
            r.at(
                &["arch", &idx],
                format!("`{arch}` is not a GPU architecture; expected one like sm_89 or sm_90a"),
                HELP,
            );
        } else if archs[..i].contains(arch) {
            r.at(
                &["arch", &idx],
                format!("`{arch}` is listed twice under `arch:`"),
                "remove the second one",
            );
        }
    }
}

/// Validate `p`, parsed from `text`, and resolve its stages. Nothing may run unless this
/// succeeds.
pub fn validate(
    p: &Pipeline,
    text: &str,
    file: &Path,
    root: &Path,
) -> Result<(Vec<Stage>, Dag), PipelineError> {
    let mut r = Report {
        file,
        text,
        spans: std::cell::OnceCell::new(),
        diags: Vec::new(),
    };
    if p.version != 1 {
        r.at(
            &["version"],
            format!("unsupported pipeline version {}", p.version),
            "this repro reads `version: 1`",
        );
    }
    if let Some(ex) = &p.executor {
        check_executor(&mut r, &["executor", "kind"], &ex.kind);
    }
    check_arch(&mut r, &p.arch);
    let registry: Vec<Arc<dyn StageKind>> = crate::stages::registry()
        .into_iter()
        .map(Arc::from)
        .collect();
    let names: Vec<&str> = p.stages.keys().map(String::as_str).collect();
    let mut stages = Vec::with_capacity(p.stages.len());
    let mut needs = Vec::with_capacity(p.stages.len());
    for (name, spec) in &p.stages {
        let name = name.as_str();
        check_stage_name(&mut r, name);
        let kind = resolve_kind(&mut r, &registry, name, &spec.uses);
        let mut outputs = Vec::new();
        let mut optional_outputs = Vec::new();
        if let Some(kind) = &kind {
            optional_outputs = kind
                .optional_outputs(name, spec, p)
                .iter()
                .filter_map(|o| paths::check_output(root, &o.to_string_lossy()).ok())
                .collect();
            check_options(&mut r, kind.as_ref(), name, spec, p);
            for (i, out) in kind.outputs(name, spec, p).iter().enumerate() {
                let idx = i.to_string();
                let checked = paths::check_output(root, &out.to_string_lossy()).and_then(|clean| {
                    paths::check_not_reserved(&clean, file.file_name().map(Path::new))
                        .map(|()| clean)
                });
                match checked {
                    Ok(clean) => outputs.push(clean),
                    Err(problem) => r.at(
                        &["stages", name, "outs", &idx],
                        format!("output `{}` of stage `{name}` {problem}", out.display()),
                        "outputs are paths inside the project (relative to the folder of pipeline.yaml), without `..`, and not `.repro/`, `.git`, the lock file or the pipeline file",
                    ),
                }
            }
        }
        let mut up = Vec::new();
        for (i, need) in spec.needs.iter().enumerate() {
            let idx = i.to_string();
            let path = ["stages", name, "needs", idx.as_str()];
            match names.iter().position(|n| n == need) {
                Some(_) if need == name => r.at(
                    &path,
                    format!("stage `{name}` needs itself"),
                    "remove it from `needs`",
                ),
                Some(j) => up.push(j),
                None => {
                    let others = names.iter().copied().filter(|n| *n != name);
                    let help = did_you_mean(need, others.clone())
                        .unwrap_or_else(|| format!("the stages are {}", quoted_list(others)));
                    r.at(
                        &path,
                        format!("stage `{name}` needs `{need}`, which is not a stage"),
                        help,
                    );
                }
            }
        }
        if let Some(ex) = &spec.executor {
            check_executor(&mut r, &["stages", name, "executor", "kind"], &ex.kind);
        }
        if let Err((text, why)) = spec.timeout_duration() {
            r.at(
                &["stages", name, "timeout"],
                format!("invalid timeout `{text}`: {why}"),
                "write seconds (`90`) or a duration like `90s`, `10m`, `2h`",
            );
        }
        needs.push(up);
        if let Some(kind) = kind {
            stages.push(Stage {
                name: name.to_string(),
                spec: spec.clone(),
                kind,
                outputs,
                optional_outputs,
            });
        }
    }
    if !r.diags.is_empty() {
        return Err(PipelineError(r.diags));
    }
    let dag = match Dag::new(names.iter().map(|s| s.to_string()).collect(), needs) {
        Ok(dag) => dag,
        Err(cycle) => {
            r.at_key(
                &["stages", &cycle[0], "needs"],
                format!("dependency cycle: {}", cycle.join(" → ")),
                "a stage cannot need, directly or not, a stage that needs it: remove one of these `needs`",
            );
            return Err(PipelineError(r.diags));
        }
    };
    check_outputs_unique(&mut r, &stages);
    check_deps(&mut r, &stages, &dag, root);
    if r.diags.is_empty() {
        Ok((stages, dag))
    } else {
        Err(PipelineError(r.diags))
    }
}

/// The longest stage name, as a file name (`.repro/logs/<name>.log`, escaped): well
/// under the 255 bytes most file systems allow.
const MAX_STAGE_FILE_NAME: usize = 200;

/// A stage name becomes file names (its log, backup and state) and a line of the run's
/// table: it must not be empty, hold control characters, or be too long for a file name.
fn check_stage_name(r: &mut Report, name: &str) {
    let problem = if name.trim().is_empty() {
        Some("is empty".to_string())
    } else if name.chars().any(char::is_control) {
        Some("holds a control character (a newline or tab)".to_string())
    } else {
        let len = crate::engine::staging::safe_name(name).len();
        (len > MAX_STAGE_FILE_NAME)
            .then(|| format!("is {len} bytes as a file name; the limit is {MAX_STAGE_FILE_NAME}"))
    };
    if let Some(problem) = problem {
        let mut shown: String = name.escape_debug().take(60).collect();
        if shown.len() < name.escape_debug().count() {
            shown.push('…');
        }
        r.at_key(
            &["stages", name],
            format!("stage name \"{shown}\" {problem}"),
            "name stages with a short word of letters, digits, `-` and `_`",
        );
    }
}

fn check_executor(r: &mut Report, path: &[&str], kind: &str) {
    if !EXECUTOR_KINDS.contains(&kind) {
        let help = did_you_mean(kind, EXECUTOR_KINDS.iter().copied()).unwrap_or_else(|| {
            format!(
                "expected one of {}",
                quoted_list(EXECUTOR_KINDS.iter().copied())
            )
        });
        r.at(path, format!("unknown executor `{kind}`"), help);
    }
}

fn resolve_kind(
    r: &mut Report,
    registry: &[Arc<dyn StageKind>],
    name: &str,
    uses: &str,
) -> Option<Arc<dyn StageKind>> {
    if let Some(kind) = registry.iter().find(|k| k.kind() == uses) {
        return Some(kind.clone());
    }
    let help = did_you_mean(uses, BUILTIN_KINDS.iter().copied()).unwrap_or_else(|| {
        format!(
            "expected one of {}",
            quoted_list(BUILTIN_KINDS.iter().copied())
        )
    });
    r.at(
        &["stages", name, "uses"],
        format!("unknown stage kind `{uses}`"),
        help,
    );
    None
}

/// The help line for an unknown key `key` of a `kind` stage whose own keys are `known`:
/// the nearest key, common or the kind's, else the list of them.
pub fn unknown_stage_key_help(kind: &str, key: &str, known: &[&str]) -> String {
    let candidates = STAGE_KEYS.iter().chain(known).copied();
    did_you_mean(key, candidates.clone())
        .unwrap_or_else(|| format!("a `{kind}` stage takes {}", quoted_list(candidates)))
}

/// Unknown option keys (for kinds that list theirs), then the kind's own checks.
fn check_options(
    r: &mut Report,
    kind: &dyn StageKind,
    name: &str,
    spec: &super::spec::StageSpec,
    p: &Pipeline,
) {
    if let Some(known) = kind.known_options() {
        for key in spec.options.keys() {
            let key = key
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{key:?}"));
            if known.contains(&key.as_str()) {
                continue;
            }
            let help = unknown_stage_key_help(kind.kind(), &key, known);
            r.at_key(
                &["stages", name, &key],
                format!("unknown key `{key}` in stage `{name}`"),
                help,
            );
        }
        if !r.diags.is_empty() {
            return;
        }
    }
    if let Err(e) = kind.validate(name, spec, p) {
        let mut path = vec!["stages", name];
        path.extend(e.path.iter().map(String::as_str));
        let (message, help) = match e.message.split_once("\nhelp: ") {
            Some((m, h)) => (m.to_string(), h.to_string()),
            None => (e.message.clone(), String::new()),
        };
        r.at_key(&path, message, help);
    }
}

/// No two stages may write the same output, or one inside another's output folder.
fn check_outputs_unique(r: &mut Report, stages: &[Stage]) {
    let mut owners: BTreeMap<&Path, &str> = BTreeMap::new();
    for stage in stages {
        for (i, out) in stage.outputs.iter().enumerate() {
            // An owned path that is `out` or a folder above it, or one inside `out` (paths
            // sort component-wise, so those come right after `out`).
            let above = out.ancestors().find_map(|a| owners.get_key_value(a));
            let below = || {
                owners
                    .range::<&Path, _>((
                        std::ops::Bound::Included(out.as_path()),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                    .filter(|(o, _)| o.starts_with(out))
            };
            let clash = above.or_else(below).map(|(o, s)| (o.to_path_buf(), *s));
            if let Some((other, owner)) = clash {
                let idx = i.to_string();
                let what = if other == *out {
                    format!(
                        "output `{}` is also written by stage `{owner}`",
                        out.display()
                    )
                } else {
                    format!(
                        "output `{}` of stage `{}` overlaps `{}`, written by stage `{owner}`",
                        out.display(),
                        stage.name,
                        other.display()
                    )
                };
                r.at(
                    &["stages", &stage.name, "outs", &idx],
                    what,
                    "each output belongs to exactly one stage: rename one, or merge the two stages",
                );
            } else {
                owners.insert(out, &stage.name);
            }
        }
    }
}

/// Each dep exists, or is written by a stage this one needs (directly or not); and a dep
/// folder holds no output but those of stages this one needs.
fn check_deps(r: &mut Report, stages: &[Stage], dag: &Dag, root: &Path) {
    check_deps_written_upstream(r, stages, dag, root);
    check_dep_folders(r, stages, dag);
}

/// A dep folder that holds an output: of its own stage, every run would change the
/// stage's inputs (it would never be up to date); of a stage it does not need, the two
/// could run in either order and its fingerprint would be taken before or after the other
/// wrote.
fn check_dep_folders(r: &mut Report, stages: &[Stage], dag: &Dag) {
    for (i, stage) in stages.iter().enumerate() {
        let ancestors = dag.ancestors(&[i]);
        for (d, dep) in stage.spec.deps.iter().enumerate() {
            // `.` is the whole project.
            let folder = match paths::check_relative(dep) {
                Ok(folder) => folder,
                Err(paths::PathProblem::Empty) if !dep.trim().is_empty() => PathBuf::new(),
                Err(_) => continue,
            };
            let inside = stages.iter().enumerate().find_map(|(w, s)| {
                s.outputs
                    .iter()
                    .find(|o| o.starts_with(&folder) && **o != folder)
                    .filter(|_| w == i || !ancestors.contains(&w))
                    .map(|o| (w, o))
            });
            let Some((w, out)) = inside else { continue };
            let idx = d.to_string();
            let path = ["stages", stage.name.as_str(), "deps", idx.as_str()];
            if w == i {
                r.at(
                    &path,
                    format!(
                        "dep folder `{dep}` of stage `{}` holds its own output `{}`: each run would change its own inputs",
                        stage.name,
                        out.display()
                    ),
                    format!(
                        "move the output out of `{dep}`, or list as deps only the files of `{dep}` the stage reads"
                    ),
                );
            } else {
                let other = &stages[w].name;
                let fix = if dag.ancestors(&[w]).contains(&i) {
                    format!("`{other}` needs `{}`, so move `{}` out of `{dep}`, or list as deps only the files of `{dep}` that `{}` reads", stage.name, out.display(), stage.name)
                } else {
                    format!(
                        "add `{other}` to the `needs` of `{}`, or move `{}` out of `{dep}`",
                        stage.name,
                        out.display()
                    )
                };
                r.at(
                    &path,
                    format!(
                        "dep folder `{dep}` of stage `{}` holds `{}`, an output of stage `{other}`, which `{}` does not need",
                        stage.name,
                        out.display(),
                        stage.name
                    ),
                    fix,
                );
            }
        }
    }
}

/// Each dep exists, or is written by a stage this one needs (directly or not).
fn check_deps_written_upstream(r: &mut Report, stages: &[Stage], dag: &Dag, root: &Path) {
    let mut writer: std::collections::HashMap<&Path, usize> = std::collections::HashMap::new();
    for (i, s) in stages.iter().enumerate() {
        writer.extend(s.outputs.iter().map(|o| (o.as_path(), i)));
    }
    for (i, stage) in stages.iter().enumerate() {
        let mut ancestors = None;
        for (d, dep) in stage.spec.deps.iter().enumerate() {
            let idx = d.to_string();
            let path = ["stages", stage.name.as_str(), "deps", idx.as_str()];
            let clean: PathBuf = paths::check_relative(dep).unwrap_or_else(|_| PathBuf::from(dep));
            if let Some(&w) = clean.ancestors().find_map(|a| writer.get(a)) {
                if w == i {
                    r.at(
                        &path,
                        format!(
                            "stage `{}` lists its own output `{dep}` as a dep",
                            stage.name
                        ),
                        "remove it from `deps`",
                    );
                    continue;
                }
                let ancestors = ancestors.get_or_insert_with(|| dag.ancestors(&[i]));
                if !ancestors.contains(&w) {
                    r.at(
                        &path,
                        format!(
                            "dep `{dep}` is written by stage `{}`, which `{}` does not need",
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
            // A folder that will hold outputs: `check_dep_folders` judges it.
            let holds_outputs = stages
                .iter()
                .any(|s| s.outputs.iter().any(|o| o.starts_with(&clean)));
            if !holds_outputs && std::fs::metadata(root.join(dep)).is_err() {
                r.at(
                    &path,
                    format!("dep `{dep}` of stage `{}` does not exist", stage.name),
                    "create the file, fix the path (relative to the folder of pipeline.yaml), or list the stage that writes it in `needs` and its `outs`",
                );
            }
        }
    }
}
