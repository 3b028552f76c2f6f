//! Checks that need more than the YAML types: stage kinds, `needs`, cycles, outputs
//! (unique, inside the project) and deps (present or written upstream) in [`files`],
//! environment variables, timeouts, and each kind's own options. Every problem becomes a
//! [`Diagnostic`] at the offending key.

mod files;

use super::dag::Dag;
use super::diag::{did_you_mean, quoted_list, Diagnostic, PipelineError};
use super::load::Stage;
use super::paths::{self, Resolver};
use super::spans::SpanIndex;
use super::spec::{Pipeline, STAGE_KEYS};
use crate::kind::{Config, Configs, Configured, Kinds, OptionError, StageKind};
use std::path::Path;
use std::sync::Arc;

/// Executor kinds pipeline.yaml may name.
pub const EXECUTOR_KINDS: &[&str] = &["local", "slurm"];

pub(super) struct Report<'a> {
    file: &'a Path,
    /// The pipeline text; indexed for positions only once there is an error to place.
    text: &'a str,
    /// The keys written at the top level (from the load's scan).
    top_keys: &'a [String],
    spans: std::cell::OnceCell<SpanIndex>,
    diags: Vec<Diagnostic>,
}

impl Report<'_> {
    fn spans(&self) -> &SpanIndex {
        self.spans.get_or_init(|| SpanIndex::build(self.text))
    }

    /// A problem with the value at `path` (or its key when there is no value position).
    pub(super) fn at(&mut self, path: &[&str], message: String, help: impl Into<String>) {
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
    if archs.is_empty() && r.top_keys.iter().any(|k| k == "arch") {
        r.at(&["arch"], "`arch:` lists no architecture".into(), HELP);
    }
    for (i, arch) in archs.iter().enumerate() {
        let idx = i.to_string();
        if !repro_base::arch::is_valid(arch) {
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

/// The pipeline-wide settings each kind reads (the profile kind's `gates.profile:`).
fn check_pipeline_settings(r: &mut Report, kinds: &Kinds, p: &Pipeline, configs: &Configs) {
    for kind in kinds.iter() {
        for (path, message, help) in kind.pipeline_problems(p, configs) {
            let at: Vec<&str> = path.iter().map(String::as_str).collect();
            r.at(&at, message, help);
        }
    }
}

/// Validate `p`, parsed from `text` (whose top-level mapping has `top_keys`), and resolve
/// its stages. Nothing may run unless this succeeds. `workload_ok`: the workloads passed
/// their own checks; the kinds' option checks read them, and with a broken one would only
/// repeat its error at each stage.
pub fn validate(
    p: &Pipeline,
    text: &str,
    top_keys: &[String],
    file: &Path,
    root: &Path,
    workload_ok: bool,
    kinds: &Kinds,
) -> Result<(Vec<Stage>, Dag, Configs), PipelineError> {
    let mut r = Report {
        file,
        text,
        top_keys,
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
    let names: Vec<&str> = p.stages.keys().map(String::as_str).collect();
    // Each stage is named by the `needs` of several others: looked up with a faster hash
    // than the pipeline's map has.
    let index: foldhash::HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    // Each stage's options as its kind decodes them, once, before the checks below report
    // in file order: a stage's outputs may depend on another's options (the summary's
    // charts are the tunes'). A broken workload would only repeat its error in each.
    let decoded: Vec<Option<Result<Config, OptionError>>> = p
        .stages
        .iter()
        .map(|(name, spec)| {
            let kind = kinds.iter().find(|k| k.kind() == spec.uses)?;
            (workload_ok && unknown_keys(kind.as_ref(), spec).is_empty())
                .then(|| kind.configure(name, spec, p))
        })
        .collect();
    let configs = Configs::new(
        names
            .iter()
            .zip(&decoded)
            .filter_map(|(n, d)| Some((n.to_string(), d.as_ref()?.as_ref().ok()?.clone())))
            .collect(),
    );
    if workload_ok {
        check_pipeline_settings(&mut r, kinds, p, &configs);
    }
    let mut resolver = Resolver::new(root);
    let pipeline_file = file.file_name().map(Path::new);
    let mut stages = Vec::with_capacity(p.stages.len());
    let mut needs = Vec::with_capacity(p.stages.len());
    for ((name, spec), decoded) in p.stages.iter().zip(decoded) {
        let name = name.as_str();
        check_stage_name(&mut r, name);
        let kind = resolve_kind(&mut r, kinds, name, &spec.uses);
        let mut outputs = Vec::new();
        let mut optional_outputs = Vec::new();
        let config = match &kind {
            Some(kind) if workload_ok => report_options(&mut r, kind.as_ref(), name, spec, decoded),
            _ => None,
        };
        if let (Some(kind), Some(config)) = (&kind, &config) {
            let stage = Configured {
                name,
                spec,
                config,
                peers: &configs,
            };
            optional_outputs = kind
                .optional_outputs(&stage, p)
                .iter()
                .filter_map(|o| output_path(&mut resolver, &o.to_string_lossy(), None).ok())
                .collect();
            for (i, out) in kind.outputs(&stage, p).iter().enumerate() {
                match output_path(&mut resolver, &out.to_string_lossy(), pipeline_file) {
                    Ok(clean) => outputs.push(clean),
                    Err(problem) => r.at(
                        &["stages", name, "outs", &i.to_string()],
                        format!(
                            "output `{}` of stage `{name}` {problem}",
                            out.to_string_lossy().escape_debug()
                        ),
                        "outputs are paths inside the project (relative to the folder of pipeline.yaml), without `..`, and not `.repro/`, `.git`, the lock file or the pipeline file",
                    ),
                }
            }
        }
        let mut up = Vec::new();
        for (i, need) in spec.needs.iter().enumerate() {
            let (message, help) = match index.get(need.as_str()).copied() {
                Some(_) if need == name => (
                    format!("stage `{name}` needs itself"),
                    "remove it from `needs`".to_string(),
                ),
                Some(j) => {
                    up.push(j);
                    continue;
                }
                None => {
                    let others = names.iter().copied().filter(|n| *n != name);
                    let help = did_you_mean(need, others.clone())
                        .unwrap_or_else(|| format!("the stages are {}", quoted_list(others)));
                    (
                        format!("stage `{name}` needs `{need}`, which is not a stage"),
                        help,
                    )
                }
            };
            r.at(&["stages", name, "needs", &i.to_string()], message, help);
        }
        if let Some(ex) = &spec.executor {
            check_executor(&mut r, &["stages", name, "executor", "kind"], &ex.kind);
        }
        check_env(&mut r, name, spec);
        if let Err((text, why)) = spec.timeout_duration() {
            r.at(
                &["stages", name, "timeout"],
                format!("invalid timeout `{text}`: {why}"),
                "write seconds (`90`) or a duration like `90s`, `10m`, `2h`",
            );
        }
        needs.push(up);
        if let (Some(kind), Some(config)) = (kind, config) {
            stages.push(Stage {
                name: name.to_string(),
                spec: Arc::clone(spec),
                kind,
                outputs,
                optional_outputs,
                config,
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
    let mut outputs = files::check_outputs_unique(&mut r, &stages);
    files::check_deps(&mut r, &stages, &dag, root, &mut outputs, &mut resolver);
    if r.diags.is_empty() {
        Ok((stages, dag, configs))
    } else {
        Err(PipelineError(r.diags))
    }
}

/// The longest stage name, as a file name (`.repro/logs/<name>.log`, escaped): well
/// under the 255 bytes most file systems allow.
const MAX_STAGE_FILE_NAME: usize = 200;

/// Zero-width characters, direction marks and embeddings, and the byte-order mark: a name
/// holding one looks like another name (or reorders the text around it) on a terminal.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// A stage name becomes file names (its log, backup and state) and a line of the run's
/// table: it must not be empty, hold control or invisible characters, or be too long for a
/// file name.
fn check_stage_name(r: &mut Report, name: &str) {
    let problem = if name.trim().is_empty() {
        Some("is empty".to_string())
    } else if name.chars().any(char::is_control) {
        Some("holds a control character (a newline or tab)".to_string())
    } else if name.chars().any(is_invisible_format) {
        Some("holds an invisible character (zero-width or a change of writing direction), which makes the name a terminal shows differ from the name in the file".to_string())
    } else {
        let len = crate::paths::safe_name(name).len();
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
    // What `uses:` may say, and where suggestions come from: the registry's kinds.
    let kinds = registry.iter().map(|k| k.kind());
    let help = did_you_mean(uses, kinds.clone())
        .unwrap_or_else(|| format!("expected one of {}", quoted_list(kinds)));
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
/// The keys of `spec` its kind does not know, when the kind lists the ones it knows.
fn unknown_keys(kind: &dyn StageKind, spec: &super::spec::StageSpec) -> Vec<String> {
    let Some(known) = kind.known_options() else {
        return Vec::new();
    };
    spec.options
        .keys()
        .map(|key| {
            key.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{key:?}"))
        })
        .filter(|key| !known.contains(&key.as_str()))
        .collect()
}

/// Report what is wrong with the stage's options: unknown keys, else what its kind's
/// `configure` refused (`decoded`). The config, when there is one to keep.
fn report_options(
    r: &mut Report,
    kind: &dyn StageKind,
    name: &str,
    spec: &super::spec::StageSpec,
    decoded: Option<Result<Config, OptionError>>,
) -> Option<Config> {
    if let Some(known) = kind.known_options() {
        for key in unknown_keys(kind, spec) {
            let help = unknown_stage_key_help(kind.kind(), &key, known);
            r.at_key(
                &["stages", name, &key],
                format!("unknown key `{key}` in stage `{name}`"),
                help,
            );
        }
        if !r.diags.is_empty() {
            return None;
        }
    }
    decoded?
        .map_err(|e| {
            let mut path = vec!["stages", name];
            path.extend(e.path.iter().map(String::as_str));
            let (message, help) = match e.message.split_once("\nhelp: ") {
                Some((m, h)) => (m.to_string(), h.to_string()),
                None => (e.message.clone(), String::new()),
            };
            r.at_key(&path, message, help);
        })
        .ok()
}

/// An output as written, cleaned and checked, its folders read through the symlinks on the
/// way: where it really is, which must not be a reserved place either.
fn output_path(
    resolver: &mut Resolver,
    written: &str,
    pipeline_file: Option<&Path>,
) -> Result<std::path::PathBuf, paths::PathProblem> {
    let clean = paths::check_relative(written)?;
    paths::check_not_reserved(&clean, pipeline_file)?;
    let real = resolver.resolve_parent(&clean)?;
    paths::check_not_reserved(&real, pipeline_file)?;
    Ok(real)
}

/// Variables repro sets itself in every stage's processes: a stage may not replace them.
/// `REPRO_RUN_ID` and `REPRO_JOB` are how repro finds what a run started, to stop it.
pub const RESERVED_ENV: &[&str] = &[
    repro_executor::orphans::RUN_ID_ENV,
    repro_executor::orphans::JOB_ENV,
    "REPRO_BIN",
    "REPRO_ROOT",
    "REPRO_STAGE",
];

/// `env:` names a process can be given, none of them repro's own, with values it can hold.
fn check_env(r: &mut Report, name: &str, spec: &super::spec::StageSpec) {
    let name_help = || "name variables with letters, digits and `_`".to_string();
    for (key, value) in &spec.env {
        let (problem, help) = if key.is_empty() {
            ("is empty".to_string(), name_help())
        } else if key.contains('=') || key.contains('\0') {
            (
                "holds `=` or a NUL byte, which no variable's name can".to_string(),
                name_help(),
            )
        } else if RESERVED_ENV.contains(&key.as_str()) || key.starts_with(PARAM_ENV_PREFIX) {
            (
                "is set by repro itself".to_string(),
                format!(
                    "rename it: repro sets {} and `{PARAM_ENV_PREFIX}<param>` for every stage",
                    quoted_list(RESERVED_ENV.iter().copied())
                ),
            )
        } else if let Some(problem) = env_value_problem(key, value) {
            problem
        } else {
            continue;
        };
        r.at_key(
            &["stages", name, "env", key],
            format!(
                "environment variable `{}` of stage `{name}` {problem}",
                key.escape_debug()
            ),
            help,
        );
    }
}

/// The most bytes one `NAME=value` string of a process's environment may have: Linux's
/// `MAX_ARG_STRLEN` (32 pages of 4 KiB), its closing NUL included. A longer one fails the
/// stage's start with "Argument list too long" and no name.
const MAX_ENV_STRING: usize = 32 * 4096;

/// Why `value` cannot be the value of the variable `var` in a process's environment, and
/// the fix; `None` when it can.
pub fn env_value_problem(var: &str, value: &str) -> Option<(String, String)> {
    if value.contains('\0') {
        return Some((
            "has a NUL byte in its value, which no variable can hold".into(),
            "remove the `\\0`".into(),
        ));
    }
    let len = var.len() + value.len() + 2;
    (len > MAX_ENV_STRING).then(|| {
        (
            format!("is {len} bytes as an environment variable; a process can be given at most {MAX_ENV_STRING}"),
            "put a value this large in a file the stage reads (a dep), and pass its path".into(),
        )
    })
}

/// The prefix of the variables `cmd` stages get their params in.
pub const PARAM_ENV_PREFIX: &str = "REPRO_PARAM_";
