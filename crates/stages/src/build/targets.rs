//! What the build compiles: each variant and each workload's reference kernel as a
//! target, and the sources whose code the build's fingerprint reads.

use super::*;

/// What the stage builds for every architecture: a variant or a reference.
pub(super) struct Target {
    pub(super) name: String,
    pub(super) kernel: String,
    pub(super) spec: KernelSpec,
    /// The compile, with an empty `arch` ([`Target::on`] fills it in).
    pub(super) req: CompileRequest,
    /// The declaration its parameters must match (`None`: a variant of no workload).
    pub(super) declared: Option<abi::Declared>,
    /// The PTXAS gates it must pass: its kernel's ([`Pipeline::ptxas_gates_for`]).
    pub(super) ptxas: Option<PtxasGates>,
}

impl Target {
    pub(super) fn is_reference(&self) -> bool {
        matches!(self.declared, Some(abi::Declared::Reference(_)))
    }
}

impl Target {
    /// The compile of this target for `arch`.
    pub(super) fn on(&self, arch: &str) -> CompileRequest {
        CompileRequest {
            arch: arch.to_string(),
            ..self.req.clone()
        }
    }
}

/// Every variant (sorted by name), then each workload's reference kernel.
pub(super) fn targets(pipeline: &Pipeline, extra_flags: &[String]) -> anyhow::Result<Vec<Target>> {
    let workloads = Workloads::of(pipeline);
    let request = |spec: &KernelSpec, defines: BTreeMap<String, String>| CompileRequest {
        source: PathBuf::from(&spec.source),
        entry: spec.entry.clone(),
        defines,
        arch: String::new(),
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
            declared: workloads
                .of_kernel(&variant.kernel)
                .map(|(w, _)| abi::Declared::Kernel(w.to_string())),
            ptxas: pipeline.ptxas_gates_for(&variant.kernel),
        });
    }
    for (w, spec) in reference_specs(&workloads) {
        let name = workloads.reference_name(w);
        out.push(Target {
            kernel: name.clone(),
            name,
            req: request(&spec, BTreeMap::new()),
            spec,
            declared: Some(abi::Declared::Reference(w.to_string())),
            ptxas: pipeline.gates.ptxas.clone(),
        });
    }
    Ok(out)
}

/// Each workload's reference kernel (those with a command have none), as a kernel spec.
pub(super) fn reference_specs(workloads: &Workloads) -> Vec<(&str, KernelSpec)> {
    workloads
        .iter()
        .filter_map(|(w, d)| {
            let r = &d.reference;
            let spec = KernelSpec {
                source: r.source.clone()?,
                entry: r.entry.clone()?,
                flags: r.flags.clone(),
                precision: None,
                ptxas: None,
                ..KernelSpec::default()
            };
            Some((w, spec))
        })
        .collect()
}

/// The kernel sources the stage compiles (the variants' kernels and the references).
fn kernel_specs(pipeline: &Pipeline) -> Vec<KernelSpec> {
    let used: BTreeSet<&str> = pipeline
        .variants
        .values()
        .map(|v| v.kernel.as_str())
        .collect();
    let workloads = Workloads::of(pipeline);
    pipeline
        .kernels
        .iter()
        .filter(|(k, _)| used.contains(k.as_str()))
        .map(|(_, s)| s.clone())
        .chain(reference_specs(&workloads).into_iter().map(|(_, s)| s))
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

pub(super) fn source_files(
    pipeline: &Pipeline,
    root: &Path,
    extra_flags: &[String],
) -> Vec<PathBuf> {
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
