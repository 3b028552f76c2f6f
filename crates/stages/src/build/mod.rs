//! The `build` stage kind: compiles every variant (and each workload's reference kernel)
//! for every architecture `arch:` declares with nvcc, reads the ptxas resource report,
//! applies the PTXAS gates and the ABI gate ([`abi`]: the cubin's parameters against the
//! workload's declared arguments) per architecture, and writes
//! `artifacts/build/<variant>.json` plus `.repro/cubins/<name>.<arch>.cubin`. nvcc
//! cross-compiles, so it needs no GPU, and its records depend only on the sources, the
//! pinned nvcc and the declared architectures.
//!
//! Options (besides the common stage keys): `jobs` (parallel nvcc processes; default: all
//! cores) and `flags` (extra nvcc flags for every compile).

pub mod abi;
pub use repro_gpu::arch;
pub mod compile;
pub mod cubin;
pub mod gates;
pub mod list;
pub mod ptxas;
pub mod sources;
mod targets;

#[cfg(test)]
mod tests;

use anyhow::Context;
use compile::CompileOutput;
use compile::CompileRequest;
use repro_pipeline::define_value;
use repro_pipeline::kind::Config;
use repro_pipeline::kind::Configured;
use repro_pipeline::kind::OptionError;
use repro_pipeline::kind::Outputs;
use repro_pipeline::kind::Overrides;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::kind::StageInputs;
use repro_pipeline::kind::StageKind;
use repro_pipeline::kind::StageOutcome;
use repro_pipeline::options::decode;
use repro_pipeline::options::refuse_timeout;
pub use repro_pipeline::paths::cubin_path;
use repro_pipeline::toolchain;
use repro_pipeline::toolchain::NvccSearch;
use repro_pipeline::toolchain::Toolchain;
use repro_pipeline::workload::Workloads;
use repro_pipeline::KernelSpec;
use repro_pipeline::Pipeline;
use repro_pipeline::PtxasGates;
use repro_pipeline::StageSpec;
use repro_schema as schema;
use repro_schema::ArchBuild;
use repro_schema::BuildRecord;
use repro_schema::BuildStatus;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use targets::{reference_specs, source_files, targets, Target};

/// The name the built-in workload's reference cubin takes (a declared workload's is
/// `reference-<workload>`, `repro_pipeline::workload::Workloads::reference_name`); no variant may
/// use it.
pub const REFERENCE: &str = repro_pipeline::workload::REFERENCE;

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

impl StageKind for BuildStage {
    fn kind(&self) -> &'static str {
        super::BuiltinKind::Build.as_str()
    }

    /// `timeout:` is refused: each nvcc compile has its own limit.
    fn configure(
        &self,
        _name: &str,
        spec: &StageSpec,
        pipeline: &Pipeline,
    ) -> Result<Config, OptionError> {
        let opts = options(spec)?;
        refuse_timeout(
            "build",
            spec,
            "each nvcc compile it runs is stopped after 10 minutes",
        )?;
        let stage_err = |message: String| OptionError {
            path: Vec::new(),
            message,
        };
        let workloads = Workloads::of(pipeline);
        for w in workloads.names() {
            let name = workloads.reference_name(w);
            if pipeline.variants.contains_key(&name) {
                return Err(stage_err(format!(
                    "a variant may not be named `{name}`: that name is workload `{w}`'s \
                     reference kernel's cubin (.repro/cubins/{name}.<arch>.cubin); rename the variant"
                )));
            }
        }
        if pipeline.arch.is_empty() {
            return Err(stage_err(
                "the build stage compiles every variant for the GPU architectures \
                 pipeline.yaml's top-level `arch:` declares, and it declares none\nhelp: add \
                 e.g. `arch: [sm_89, sm_90a]` at the top of pipeline.yaml (an L4 is sm_89, an \
                 H100 runs sm_90a)"
                    .into(),
            ));
        }
        if let Some(bad) = pipeline.variants.keys().find(|v| !is_file_name(v)) {
            return Err(stage_err(format!(
                "variant name `{bad}` cannot name its files (artifacts/build/{bad}.json); use \
                 letters, digits, `-`, `_` and `.`, not starting with `.`"
            )));
        }
        // Checks that every variant's kernel is declared and its defines are scalars.
        targets(pipeline, &[]).map_err(|e| stage_err(format!("{e:#}")))?;
        Ok(Config::new(opts))
    }

    fn outputs(&self, _stage: &Configured, pipeline: &Pipeline) -> Outputs {
        let mut outs: Outputs = pipeline.variants.keys().map(|v| record_path(v)).collect();
        outs.extend(variant_cubins(pipeline));
        let workloads = Workloads::of(pipeline);
        for (w, _) in reference_specs(&workloads) {
            let name = workloads.reference_name(w);
            outs.extend(pipeline.arch.iter().map(|a| cubin_path(&name, a)));
        }
        outs
    }

    /// A variant that fails to compile for an architecture has no cubin for it; it fails
    /// alone (see `run`).
    fn optional_outputs(&self, _stage: &Configured, pipeline: &Pipeline) -> Outputs {
        variant_cubins(pipeline)
    }

    fn inputs(
        &self,
        stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        _overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        let opts: &Options = stage.config.of();
        // Sources count by their code, not their comments or layout: a comment-only edit
        // leaves the fingerprint, and so the lock, as they were.
        let mut inputs = StageInputs {
            code: source_files(pipeline, root, &opts.flags),
            ..StageInputs::default()
        };
        // A missing nvcc is reported by `run`; here it only has to change the fingerprint
        // once it is fixed. Nothing of the machine (GPU, driver) is an input.
        let nvcc = toolchain::fingerprint(root, &self.search(), toolchain::pin(pipeline));
        inputs.tools.insert("nvcc".into(), nvcc);
        if let Ok(targets) = targets(pipeline, &opts.flags) {
            let workloads = Workloads::of(pipeline);
            for t in targets {
                // The ABI gate reads the declaration's arguments.
                let args = match &t.declared {
                    Some(abi::Declared::Kernel(w) | abi::Declared::Reference(w)) => {
                        workloads.get(w).map(
                            |d| serde_json::json!({"args": d.args, "reference": d.reference.args}),
                        )
                    }
                    None => None,
                };
                let value = serde_json::json!({
                    "kernel": t.kernel,
                    "source": t.req.source,
                    "entry": t.req.entry,
                    "defines": t.req.defines,
                    "flags": t.req.flags,
                    "declared": args,
                    // What its records' PTXAS gate results were judged by.
                    "ptxas": t.ptxas,
                });
                inputs
                    .params
                    .insert(format!("target.{}", t.name), value.to_string());
            }
        }
        inputs.params.insert("arch".into(), pipeline.arch.join(","));
        Ok(inputs)
    }

    /// Install the pinned nvcc when this machine has none of that version.
    fn prepare(
        &self,
        _stage: &Configured,
        pipeline: &Pipeline,
        root: &Path,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<()> {
        match (toolchain::pin(pipeline), &self.nvcc_search) {
            (Some(pin), None) => toolchain::ensure(root, pin, say).map(drop),
            _ => Ok(()),
        }
    }

    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        let opts: &Options = ctx.config.of();
        let tc: Toolchain = self.search().find(ctx.root, toolchain::pin(ctx.pipeline))?;
        let archs = &ctx.pipeline.arch;
        let targets = targets(ctx.pipeline, &opts.flags)?;
        let jobs = opts
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        (ctx.progress)(&format!(
            "compiling {} cubin(s) for {} with nvcc {} from {}, {} at a time",
            targets.len() * archs.len(),
            archs.join(", "),
            tc.release()
                .map_or_else(|| tc.version.clone(), |v| v.to_string()),
            tc.source,
            jobs
        ));
        // Target-major: target i's compile for archs[j] is request i * archs.len() + j.
        let reqs: Vec<CompileRequest> = targets
            .iter()
            .flat_map(|t| archs.iter().map(|a| t.on(a)))
            .collect();
        let outs = compile::compile_many(ctx.executor, ctx.cancel, &tc, ctx.root, &reqs, jobs);
        if ctx.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            anyhow::bail!("interrupted while compiling");
        }
        write_log(ctx.log, &reqs, &targets, archs, &outs)?;

        let workloads = Workloads::of(ctx.pipeline);
        let render = |p: &repro_pipeline::workload::problem::Problem| {
            repro_pipeline::workload::render(ctx.pipeline, ctx.pipeline_file, p)
        };
        let mut failed = Vec::new();
        let mut gate_failures = Vec::new();
        for (t, outs) in targets.iter().zip(outs.chunks(archs.len())) {
            let mut record = new_record(t, &tc);
            for (arch, out) in archs.iter().zip(outs) {
                if let Some(cubin) = out.cubin.as_ref().filter(|_| out.ok) {
                    copy_into(ctx.staging, cubin, &cubin_path(&t.name, arch))?;
                } else {
                    let error = out.error.as_deref().unwrap_or("unknown error");
                    if t.is_reference() {
                        // Nothing can be checked without the reference: the stage fails.
                        anyhow::bail!(
                            "the reference kernel failed to compile for {arch} (full compiler output in {}):\n{}",
                            ctx.log.display(),
                            first_lines(error, 8)
                        );
                    }
                    let first_error = error
                        .lines()
                        .find(|l| l.contains("error"))
                        .or(error.lines().next())
                        .unwrap_or_default();
                    failed.push(format!("{} ({arch}): {}", t.name, first_error.trim()));
                }
                let mut build = arch_build(out);
                if let (true, Some(g)) = (out.ok, &t.ptxas) {
                    build.gates = gates::record_gates(&build, &t.spec.entry, g, arch);
                }
                let declared = t.declared.as_ref().and_then(|d| {
                    let (abi::Declared::Kernel(w) | abi::Declared::Reference(w)) = d;
                    Some((d, workloads.get(w)?))
                });
                if let (Some(cubin), Some((d, decl))) =
                    (out.cubin.as_ref().filter(|_| out.ok), declared)
                {
                    let g = abi::gate(d, decl, &t.spec.entry, cubin, &render);
                    if let Some(detail) = g.detail.as_ref().filter(|_| t.is_reference()) {
                        // A reference that does not match its declaration judges nothing.
                        anyhow::bail!("the reference kernel `{}` does not match its declaration ({arch}):\n{detail}", t.spec.entry);
                    }
                    build.gates.push(g);
                }
                gate_failures.extend(gates::describe_failures(
                    &format!("{} ({arch})", t.name),
                    &build.gates,
                ));
                record.archs.insert(arch.clone(), build);
            }
            if t.is_reference() {
                continue;
            }
            if record.archs.values().any(|b| !b.ok()) {
                record.status = BuildStatus::CompileError;
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

/// Every variant's cubin for every declared architecture.
fn variant_cubins(pipeline: &Pipeline) -> Outputs {
    pipeline
        .variants
        .keys()
        .flat_map(|v| pipeline.arch.iter().map(move |a| cubin_path(v, a)))
        .collect()
}

/// The record of `t`, without its architectures yet.
fn new_record(t: &Target, tc: &Toolchain) -> BuildRecord {
    BuildRecord {
        variant: t.name.clone(),
        kernel: t.kernel.clone(),
        source: t.spec.source.clone(),
        entry: t.spec.entry.clone(),
        defines: t.req.defines.clone(),
        nvcc_version: tc.version.clone(),
        status: BuildStatus::Ok,
        archs: BTreeMap::new(),
    }
}

/// One architecture's section of a record, from its compile (gates added by the caller).
fn arch_build(out: &CompileOutput) -> ArchBuild {
    ArchBuild {
        command: out.command.clone(),
        status: if out.ok {
            BuildStatus::Ok
        } else {
            BuildStatus::CompileError
        },
        error: out.error.clone(),
        cubin_sha256: out.cubin_sha256.clone(),
        entries: out.entries.clone(),
        dynamic_smem_bytes: out
            .cubin
            .as_deref()
            .filter(|_| out.ok)
            .and_then(cubin::dynamic_smem_bytes),
        gates: Vec::new(),
    }
}

/// Append every compile's command and outcome to the stage log (`reqs` target-major, as
/// `run` made them).
fn write_log(
    log: &Path,
    reqs: &[CompileRequest],
    targets: &[Target],
    archs: &[String],
    outs: &[CompileOutput],
) -> anyhow::Result<()> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open the stage log {}", log.display()))?;
    for (i, (req, out)) in reqs.iter().zip(outs).enumerate() {
        let name = &targets[i / archs.len().max(1)].name;
        let state = match (out.ok, out.cached) {
            (true, true) => "cached",
            (true, false) => "compiled",
            (false, _) => "FAILED",
        };
        writeln!(
            f,
            "== {name} {} ({state}): {}",
            req.arch,
            out.command.join(" ")
        )?;
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
