//! The `build` stage kind: compiles every variant (and the workload's reference kernel) to
//! a cubin with nvcc, reads the ptxas resource report, applies the PTXAS gates and writes
//! `artifacts/build/<variant>.json` plus `.repro/cubins/<name>.cubin`.
//!
//! Options (besides the common stage keys): `jobs` (parallel nvcc processes; default: all
//! cores) and `flags` (extra nvcc flags for every compile).

pub mod arch;
pub mod compile;
pub mod cubin;
pub mod driver;
pub mod gates;
pub mod list;
pub mod ptxas;
pub mod sources;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

use crate::engine::{OptionError, Outputs, RunCtx, StageInputs, StageKind, StageOutcome};
use crate::gpu::{GpuInfo, NoGpu};
use crate::pipeline::{define_value, KernelSpec, Pipeline, StageSpec};
use crate::schema::{self, BuildRecord};
use crate::stages::options::decode;
use crate::toolchain::{self, NvccSearch, Toolchain};
use anyhow::Context;
use compile::{CompileOutput, CompileRequest};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The name the reference kernel's cubin takes; no variant may use it.
pub const REFERENCE: &str = "reference";

/// `artifacts/build/<variant>.json`.
pub fn record_path(variant: &str) -> PathBuf {
    PathBuf::from(format!("artifacts/build/{variant}.json"))
}

/// The `nvcc_version` of `variant`'s build record under `root`, if it has one: what built
/// the cubin that later stages measure.
pub fn recorded_nvcc(root: &Path, variant: &str) -> Option<String> {
    let bytes = std::fs::read(root.join(record_path(variant))).ok()?;
    serde_json::from_slice::<BuildRecord>(&bytes)
        .ok()
        .map(|r| r.nvcc_version)
}

/// `.repro/cubins/<name>.cubin` (a variant, or [`REFERENCE`]).
pub fn cubin_path(name: &str) -> PathBuf {
    PathBuf::from(format!(".repro/cubins/{name}.cubin"))
}

/// The `build` kind.
#[derive(Debug, Clone, Default)]
pub struct BuildStage {
    /// Where to look for nvcc; `None` reads this process's environment at run time.
    nvcc_search: Option<NvccSearch>,
}

impl BuildStage {
    /// A build stage that looks for nvcc with `search` instead of the environment.
    pub fn with_nvcc_search(search: NvccSearch) -> Self {
        BuildStage {
            nvcc_search: Some(search),
        }
    }

    fn search(&self) -> NvccSearch {
        self.nvcc_search
            .clone()
            .unwrap_or_else(NvccSearch::from_env)
    }
}

/// The build stage's own options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Options {
    /// Parallel nvcc processes; `None`: one per CPU.
    jobs: Option<usize>,
    /// Extra nvcc flags, e.g. `["-lineinfo"]`.
    flags: Vec<String>,
}

fn options(spec: &StageSpec) -> Result<Options, OptionError> {
    let opts: Options = decode("build", spec)?;
    if opts.jobs == Some(0) {
        return Err(OptionError {
            path: vec!["jobs".into()],
            message: "`jobs` must be a positive integer (parallel nvcc processes)".into(),
        });
    }
    Ok(opts)
}

/// Letters, digits, `-`, `_`, `.`; not empty, not starting with `.`: safe as a file name.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// One cubin the stage builds: a variant or the reference.
struct Target {
    name: String,
    kernel: String,
    spec: KernelSpec,
    req: CompileRequest,
}

/// Every variant (sorted by name), then the reference if the workload declares one.
fn targets(pipeline: &Pipeline, arch: &str, extra_flags: &[String]) -> anyhow::Result<Vec<Target>> {
    let request = |spec: &KernelSpec, defines: BTreeMap<String, String>| CompileRequest {
        source: PathBuf::from(&spec.source),
        entry: spec.entry.clone(),
        defines,
        arch: arch.to_string(),
        flags: spec.flags.iter().chain(extra_flags).cloned().collect(),
    };
    let mut out = Vec::new();
    for (name, variant) in &pipeline.variants {
        let spec = pipeline.kernels.get(&variant.kernel).with_context(|| {
            format!(
                "variant `{name}` uses kernel `{}`, which pipeline.yaml does not declare under `kernels:`",
                variant.kernel
            )
        })?;
        let mut defines = BTreeMap::new();
        for (k, v) in &variant.defines {
            let v = define_value(v)
                .map_err(|e| anyhow::anyhow!("variant `{name}`, define `{k}`: {e}"))?;
            defines.insert(k.clone(), v);
        }
        out.push(Target {
            name: name.clone(),
            kernel: variant.kernel.clone(),
            spec: spec.clone(),
            req: request(spec, defines),
        });
    }
    if let Some(spec) = pipeline
        .workload
        .as_ref()
        .and_then(|w| w.reference.as_ref())
    {
        out.push(Target {
            name: REFERENCE.into(),
            kernel: REFERENCE.into(),
            spec: spec.clone(),
            req: request(spec, BTreeMap::new()),
        });
    }
    Ok(out)
}

/// The kernel sources the stage compiles (the variants' kernels and the reference).
fn kernel_specs(pipeline: &Pipeline) -> Vec<&KernelSpec> {
    let used: BTreeSet<&str> = pipeline
        .variants
        .values()
        .map(|v| v.kernel.as_str())
        .collect();
    pipeline
        .kernels
        .iter()
        .filter(|(k, _)| used.contains(k.as_str()))
        .map(|(_, s)| s)
        .chain(
            pipeline
                .workload
                .as_ref()
                .and_then(|w| w.reference.as_ref()),
        )
        .collect()
}

/// Files whose contents the build depends on: each kernel source, the local headers it
/// includes, and the other files in its folder (relative to `root`).
/// Endings of files that can be compiled or included: the sources beside a kernel are
/// inputs of the build even when no `#include` line names them (a macro can), while its
/// README and notes are not.
const SOURCE_ENDINGS: [&str; 10] = [
    "cu", "cuh", "h", "hpp", "hh", "hxx", "inl", "inc", "c", "cpp",
];

fn is_source(name: &Path) -> bool {
    name.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SOURCE_ENDINGS.contains(&e))
}

fn source_files(pipeline: &Pipeline, root: &Path, extra_flags: &[String]) -> Vec<PathBuf> {
    let mut files = BTreeSet::new();
    for spec in kernel_specs(pipeline) {
        let source = Path::new(&spec.source);
        let flags: Vec<String> = spec.flags.iter().chain(extra_flags).cloned().collect();
        files.extend(sources::closure(root, source, &flags).unwrap_or_default());
        let folder = source.parent().unwrap_or(Path::new(""));
        if let Ok(dir) = std::fs::read_dir(root.join(folder)) {
            for entry in dir.flatten() {
                let name = PathBuf::from(entry.file_name());
                let visible = !name.to_string_lossy().starts_with('.');
                if visible && is_source(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
                    files.insert(folder.join(name));
                }
            }
        }
    }
    files.into_iter().collect()
}

/// `driver_check` when the cross-check cannot run, or `None` when it can.
fn driver_check_skip(gpus: &Result<Vec<GpuInfo>, NoGpu>, arch: &str) -> Option<String> {
    match gpus {
        Err(NoGpu(why)) => Some(format!("skipped: no GPU ({why})")),
        Ok(list) if list.is_empty() => Some("skipped: no GPU is visible".into()),
        Ok(list) if list[0].arch() != arch::base(arch) => Some(format!(
            "skipped: built for {arch} but GPU {} ({}) is {}",
            list[0].index,
            list[0].name,
            list[0].arch()
        )),
        Ok(_) => None,
    }
}

impl StageKind for BuildStage {
    fn kind(&self) -> &'static str {
        "build"
    }

    /// The arch follows the GPU present (or `--arch`); the driver check needs a driver.
    fn machine_params(&self) -> &'static [&'static str] {
        &["arch", "driver_check"]
    }

    fn validate(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<(), OptionError> {
        options(spec)?;
        let stage_err = |message: String| OptionError {
            path: Vec::new(),
            message,
        };
        if pipeline.variants.contains_key(REFERENCE) {
            return Err(stage_err(format!(
                "a variant may not be named `{REFERENCE}`: that name is the reference kernel's \
                 cubin (.repro/cubins/{REFERENCE}.cubin); rename the variant"
            )));
        }
        if let Some(a) = &pipeline.arch {
            if !arch::is_valid(a) {
                return Err(stage_err(format!(
                    "pipeline.yaml `arch: {a}` is not a GPU architecture; expected one like sm_89 or sm_90"
                )));
            }
        }
        if let Some(bad) = pipeline.variants.keys().find(|v| !is_file_name(v)) {
            return Err(stage_err(format!(
                "variant name `{bad}` cannot name its files (artifacts/build/{bad}.json); use \
                 letters, digits, `-`, `_` and `.`, not starting with `.`"
            )));
        }
        // Checks that every variant's kernel is declared and its defines are scalars; the
        // arch plays no part in that.
        targets(pipeline, "", &[]).map_err(|e| stage_err(format!("{e:#}")))?;
        Ok(())
    }

    fn outputs(&self, _name: &str, _spec: &StageSpec, pipeline: &Pipeline) -> Outputs {
        let mut outs: Outputs = pipeline
            .variants
            .keys()
            .flat_map(|v| [record_path(v), cubin_path(v)])
            .collect();
        if pipeline
            .workload
            .as_ref()
            .is_some_and(|w| w.reference.is_some())
        {
            outs.push(cubin_path(REFERENCE));
        }
        outs
    }

    /// A variant that fails to compile has no cubin; it fails alone (see `run`).
    fn optional_outputs(&self, _name: &str, _spec: &StageSpec, pipeline: &Pipeline) -> Outputs {
        pipeline.variants.keys().map(|v| cubin_path(v)).collect()
    }

    fn inputs(
        &self,
        name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
    ) -> anyhow::Result<StageInputs> {
        self.inputs_with_overrides(name, spec, pipeline, root, &BTreeMap::new())
    }

    fn inputs_with_overrides(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
        root: &Path,
        overrides: &BTreeMap<String, String>,
    ) -> anyhow::Result<StageInputs> {
        let opts = options(spec)?;
        let mut inputs = StageInputs {
            files: source_files(pipeline, root, &opts.flags),
            ..StageInputs::default()
        };
        // A missing nvcc or an undecidable arch is reported by `run`; here it only has to
        // change the fingerprint once it is fixed.
        let nvcc = toolchain::fingerprint(root, &self.search(), toolchain::pin(pipeline));
        inputs.tools.insert("nvcc".into(), nvcc);
        let gpus = crate::gpu::probe_cached(root);
        let arch = arch::select(
            overrides.get("arch").map(String::as_str),
            &gpus,
            pipeline.arch.as_deref(),
        )
        .map_or_else(|e| format!("unresolved: {e}"), |c| c.arch);
        let cross_check =
            driver_check_skip(&gpus, &arch).unwrap_or_else(|| "driver attributes".into());
        inputs.params.insert("driver_check".into(), cross_check);
        if let Ok(targets) = targets(pipeline, &arch, &opts.flags) {
            for t in targets {
                let value = serde_json::json!({
                    "kernel": t.kernel,
                    "source": t.req.source,
                    "entry": t.req.entry,
                    "defines": t.req.defines,
                    "flags": t.req.flags,
                });
                inputs
                    .params
                    .insert(format!("target.{}", t.name), value.to_string());
            }
        }
        inputs.params.insert("arch".into(), arch);
        Ok(inputs)
    }

    /// Install the pinned nvcc when this machine has none of that version.
    fn prepare(&self, pipeline: &Pipeline, root: &Path, say: &dyn Fn(&str)) -> anyhow::Result<()> {
        match (toolchain::pin(pipeline), &self.nvcc_search) {
            (Some(pin), None) => toolchain::ensure(root, pin, say).map(drop),
            _ => Ok(()),
        }
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let opts = options(ctx.spec)?;
        let tc: Toolchain = self.search().find(ctx.root, toolchain::pin(ctx.pipeline))?;
        let gpus = crate::gpu::probe_cached(ctx.root);
        let choice = arch::select(
            ctx.overrides.get("arch").map(String::as_str),
            &gpus,
            ctx.pipeline.arch.as_deref(),
        )?;
        let targets = targets(ctx.pipeline, &choice.arch, &opts.flags)?;
        let jobs = opts
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        (ctx.progress)(&format!(
            "compiling {} cubin(s) for {} (from {}) with nvcc {} from {}, {} at a time",
            targets.len(),
            choice.arch,
            choice.from,
            tc.release()
                .map_or_else(|| tc.version.clone(), |v| v.to_string()),
            tc.source,
            jobs
        ));
        let reqs: Vec<CompileRequest> = targets.iter().map(|t| t.req.clone()).collect();
        let outs = compile::compile_many(ctx.executor, ctx.cancel, &tc, ctx.root, &reqs, jobs);
        if ctx.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            anyhow::bail!("interrupted while compiling");
        }
        write_log(ctx.log, &targets, &outs)?;

        let skip_check = driver_check_skip(&gpus, &choice.arch);
        let ptxas_gates = ctx.pipeline.gates.ptxas.as_ref();
        let mut failed = Vec::new();
        let mut gate_failures = Vec::new();
        for (t, out) in targets.iter().zip(&outs) {
            if let Some(cubin) = out.cubin.as_ref().filter(|_| out.ok) {
                copy_into(ctx.staging, cubin, &cubin_path(&t.name))?;
            } else {
                let error = out.error.as_deref().unwrap_or("unknown error");
                if t.name == REFERENCE {
                    // Nothing can be checked without the reference: the stage fails.
                    anyhow::bail!(
                        "the reference kernel failed to compile (full compiler output in {}):\n{}",
                        ctx.log.display(),
                        first_lines(error, 8)
                    );
                }
                let first_error = error
                    .lines()
                    .find(|l| l.contains("error"))
                    .or(error.lines().next())
                    .unwrap_or_default();
                failed.push(format!("{}: {}", t.name, first_error.trim()));
            }
            if t.name == REFERENCE {
                continue;
            }
            let mut record = new_record(t, &tc, &choice.arch, out);
            if out.ok {
                record.dynamic_smem_bytes =
                    out.cubin.as_deref().and_then(cubin::dynamic_smem_bytes);
                if let Some(g) = ptxas_gates {
                    record.gates = gates::record_gates(&record, g);
                    gate_failures.extend(gates::describe_failures(&t.name, &record.gates));
                }
                record.driver_check = Some(match &skip_check {
                    Some(why) => why.clone(),
                    None => check_with_driver(ctx, out, &mut record),
                });
            }
            let path = ctx.staging.join(record_path(&t.name));
            write_file(&path, schema::to_json_pretty(&record).as_bytes())?;
        }
        // A variant that does not compile fails alone: its record says why, the others
        // go on to be measured, and the stage reports it like a failed gate.
        let mut problems = Vec::new();
        if !failed.is_empty() {
            problems.push(format!(
                "did not compile (compiler output in artifacts/build/<variant>.json and {}): {}",
                ctx.log.display(),
                failed.join("; ")
            ));
        }
        if !gate_failures.is_empty() {
            problems.push(format!("PTXAS gates failed: {}", gate_failures.join("; ")));
        }
        if problems.is_empty() {
            Ok(StageOutcome::Passed)
        } else {
            Ok(StageOutcome::GateFailed(problems.join("; ")))
        }
    }
}

/// Cross-check the declared entry with the driver; the record's `driver_check` text.
fn check_with_driver(ctx: &RunCtx, out: &CompileOutput, record: &mut BuildRecord) -> String {
    let (Some(cubin), Some(entry)) = (
        out.cubin.as_ref(),
        record.entries.iter_mut().find(|e| e.name == record.entry),
    ) else {
        return "skipped: no cubin or entry to load".into();
    };
    driver::cross_check(
        ctx.executor,
        ctx.cancel,
        ctx.repro_exe,
        ctx.root,
        cubin,
        entry,
    )
    .unwrap_or_else(|e| format!("skipped: could not read the driver's attributes: {e:#}"))
}

fn new_record(t: &Target, tc: &Toolchain, arch: &str, out: &CompileOutput) -> BuildRecord {
    BuildRecord {
        variant: t.name.clone(),
        kernel: t.kernel.clone(),
        source: t.spec.source.clone(),
        entry: t.spec.entry.clone(),
        defines: t.req.defines.clone(),
        arch: arch.to_string(),
        nvcc_version: tc.version.clone(),
        command: out.command.clone(),
        status: if out.ok { "ok" } else { "compile_error" }.into(),
        error: out.error.clone(),
        cubin_sha256: out.cubin_sha256.clone(),
        entries: out.entries.clone(),
        dynamic_smem_bytes: None,
        gates: Vec::new(),
        driver_check: None,
    }
}

/// Append every compile's command and outcome to the stage log.
fn write_log(log: &Path, targets: &[Target], outs: &[CompileOutput]) -> anyhow::Result<()> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open the stage log {}", log.display()))?;
    for (t, out) in targets.iter().zip(outs) {
        let state = match (out.ok, out.cached) {
            (true, true) => "cached",
            (true, false) => "compiled",
            (false, _) => "FAILED",
        };
        writeln!(f, "== {} ({state}): {}", t.name, out.command.join(" "))?;
        if let Some(e) = &out.error {
            writeln!(f, "{e}")?;
        }
    }
    Ok(())
}

fn copy_into(staging: &Path, from: &Path, rel: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(from).with_context(|| format!("cannot read {}", from.display()))?;
    write_file(&staging.join(rel), &bytes)
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n")
}
