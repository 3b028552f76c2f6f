//! The project a `repro exec` process serves, and a request resolved against it: which
//! workload, cubin, entry, shape, recipe and reference a run uses.

use super::dims::{is_dims, parse_dims};
use super::ExecSettings;
use crate::warm::Reference;
use crate::{client::ExecRequest, client::ExecTarget};
use anyhow::{bail, Context as _};
use repro_pipeline::workload::exprs::Bindings;
use repro_pipeline::workload::problem::Problem;
use repro_pipeline::{define_value, Pipeline};
use repro_pipeline::{workload::Declaration, workload::Workloads};
use std::path::{Path, PathBuf};

/// The project root: the pipeline file's folder.
fn root_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The project a `repro exec` process serves: its pipeline.yaml, read once, its workloads,
/// and the architecture of the build's cubins this process's GPU loads, found once.
pub struct Project {
    file: PathBuf,
    root: PathBuf,
    pipeline: Option<Pipeline>,
    workloads: Workloads,
    arch: std::cell::OnceCell<String>,
}

impl Project {
    /// Parse the pipeline at `file`, if there is one (a `--cubin` run needs none), with the
    /// pipeline loader's parse ([`repro_pipeline::load::parse`]): its errors name the file,
    /// line and column (exit code 2), and the parse the stage's `repro` remembered is reused.
    pub fn load(file: &Path) -> anyhow::Result<Project> {
        let pipeline = file
            .exists()
            .then(|| repro_pipeline::load::parse(file))
            .transpose()?;
        let workloads = pipeline.as_ref().map(Workloads::of).unwrap_or_default();
        Ok(Project {
            file: file.to_path_buf(),
            root: root_of(file),
            pipeline,
            workloads,
            arch: std::cell::OnceCell::new(),
        })
    }

    /// The pipeline, when the file exists.
    pub(crate) fn loaded(&self) -> Option<&Pipeline> {
        self.pipeline.as_ref()
    }

    fn pipeline(&self) -> anyhow::Result<&Pipeline> {
        self.pipeline.as_ref().with_context(|| {
            format!(
                "{} not found: `repro exec` runs a workload declared there",
                self.file.display()
            )
        })
    }

    /// The architecture of the build's cubins that GPU `device` loads.
    fn arch(&self, device: u32) -> anyhow::Result<&str> {
        if self.arch.get().is_none() {
            let _ = self
                .arch
                .set(device_arch(self.pipeline()?, &self.file, device)?);
        }
        Ok(self.arch.get().expect("set above"))
    }

    /// The workload `req` runs: the one asked for, else its variant's, else the only one.
    pub(crate) fn workload_of(&self, req: &ExecRequest) -> anyhow::Result<(&str, &Declaration)> {
        let p = self.pipeline()?;
        let names = || self.workloads.names().collect::<Vec<_>>().join(", ");
        if let Some(w) = &req.workload {
            return self
                .workloads
                .iter()
                .find(|(n, _)| n == w)
                .with_context(|| {
                    format!(
                        "no workload `{w}` in {} (workloads: {})",
                        self.file.display(),
                        names()
                    )
                });
        }
        if let ExecTarget::Variant(v) = &req.target {
            variant_entry(p, &self.file, v)?;
            return self.workloads.of_variant(p, v).with_context(|| {
                format!(
                    "variant `{v}`'s kernel `{}` is in no workload: list it under a workload's `kernels`",
                    p.variants[v].kernel
                )
            });
        }
        let mut all = self.workloads.iter();
        match (all.next(), all.next()) {
            (Some(one), None) => Ok(one),
            (None, _) => bail!("{} declares no workload", self.file.display()),
            _ => bail!(
                "say which workload the cubin runs: --workload NAME (workloads: {})",
                names()
            ),
        }
    }

    /// What `req` loads and how it is judged.
    pub(crate) fn resolve(
        &self,
        req: &ExecRequest,
        settings: &ExecSettings,
    ) -> anyhow::Result<Resolved> {
        let (workload, decl) = self.workload_of(req)?;
        // The build's cubins are per architecture: a variant's, or the reference's, is the
        // one of this GPU's.
        let kernel_reference = decl.reference.run.is_none();
        let builds_needed = matches!(req.target, ExecTarget::Variant(_))
            || (kernel_reference && settings.reference.is_none());
        let arch = if builds_needed {
            Some(self.arch(settings.device)?.to_string())
        } else {
            None
        };
        let p = self.pipeline()?;
        let (cubin, entry, defines, target) = match &req.target {
            ExecTarget::Variant(v) => {
                let (cubin, entry) =
                    variant_cubin(p, &self.file, v, arch.as_deref().unwrap_or_default())?;
                (
                    cubin,
                    entry,
                    integer_defines(p, v),
                    format!("variant `{v}`"),
                )
            }
            ExecTarget::Cubin {
                path,
                entry,
                defines,
            } => (
                path.clone(),
                entry.clone(),
                defines.clone(),
                format!("cubin `{}`", path.display()),
            ),
        };
        let (shape, dims) = if is_dims(&req.shape) {
            let dims = parse_dims(&req.shape, &decl.dims).map_err(anyhow::Error::msg)?;
            (req.shape.clone(), dims)
        } else {
            let dims = decl.shape_dims(&req.shape).with_context(|| {
                format!(
                    "no shape `{}` in workload `{workload}` (shapes: {})",
                    req.shape,
                    decl.shapes.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })?;
            (req.shape.clone(), dims)
        };
        let recipe = match &req.inputs {
            Some(r) => r.clone(),
            None => decl.recipes_of(&shape)[0].to_string(),
        };
        if !decl.recipe_names().contains(&recipe.as_str()) {
            bail!(
                "no input recipe `{recipe}` in workload `{workload}` (recipes: {})",
                decl.recipe_names().join(", ")
            );
        }
        let reference = match (&decl.reference.run, &settings.reference) {
            (Some(run), _) => Reference::Command {
                root: self.root.clone(),
                run: run.clone(),
            },
            (None, chosen) => Reference::Kernel {
                cubin: chosen.clone().unwrap_or_else(|| {
                    let name = self.workloads.reference_name(workload);
                    self.root.join(repro_pipeline::paths::cubin_path(
                        &name,
                        arch.as_deref().unwrap_or_default(),
                    ))
                }),
                entry: decl.reference.entry.clone().unwrap_or_default(),
            },
        };
        let class = req.precision.clone().or_else(|| match &req.target {
            ExecTarget::Variant(v) => self.workloads.class_of(p, v),
            ExecTarget::Cubin { .. } => decl.precision.clone(),
        });
        Ok(Resolved {
            workload: workload.to_string(),
            decl: decl.clone(),
            cubin,
            entry,
            defines,
            target,
            reference,
            shape,
            dims,
            recipe,
            class,
        })
    }

    /// `problem` at its place in pipeline.yaml (`file:line:col: error: ...`).
    pub(crate) fn render(&self, problem: &Problem) -> String {
        match &self.pipeline {
            Some(p) => repro_pipeline::workload::render(p, &self.file, problem),
            None => format!("{}: error: {}", self.file.display(), problem.message),
        }
    }
}

/// A variant's defines that are integers, as launch expressions read them.
pub fn integer_defines(p: &Pipeline, variant: &str) -> Bindings {
    p.variants[variant]
        .defines
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), define_value(v).ok()?.parse().ok()?)))
        .collect()
}

/// The architecture of `p`'s cubins that GPU `device` runs: the declared one for its
/// compute capability, or an error at `arch:` in `file` naming what to add.
fn device_arch(p: &Pipeline, file: &Path, device: u32) -> anyhow::Result<String> {
    let gpus = crate::probe()?;
    let gpu = gpus.iter().find(|g| g.index == device).with_context(|| {
        format!(
            "there is no GPU {device}: the driver sees {} (indices from 0)",
            gpus.len()
        )
    })?;
    crate::arch::for_gpu(gpu, &p.arch).map_err(|e| anyhow::anyhow!(e.at(file)))
}

/// Variant `v`'s cubin for `arch` (the build's `.repro/cubins/<VARIANT>.<ARCH>.cubin` beside
/// `file`) and entry point.
pub fn variant_cubin(
    p: &Pipeline,
    file: &Path,
    v: &str,
    arch: &str,
) -> anyhow::Result<(PathBuf, String)> {
    let entry = variant_entry(p, file, v)?;
    Ok((
        root_of(file).join(repro_pipeline::paths::cubin_path(v, arch)),
        entry,
    ))
}

/// The entry point of variant `v` of `p` (read from `file`): an error naming the variants
/// when there is none. Its cubin is the build's `.repro/cubins/<VARIANT>.<ARCH>.cubin`.
pub(crate) fn variant_entry(p: &Pipeline, file: &Path, v: &str) -> anyhow::Result<String> {
    let spec = p.variants.get(v).with_context(|| {
        format!(
            "no variant `{v}` in {} (variants: {})",
            file.display(),
            p.variants.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let kernel = p.kernels.get(&spec.kernel).with_context(|| {
        format!(
            "variant `{v}` names kernel `{}`, which is not under `kernels:`",
            spec.kernel
        )
    })?;
    Ok(kernel.entry.clone())
}

/// A request resolved against the project: what to load, on what, judged how.
pub(crate) struct Resolved {
    pub(crate) workload: String,
    pub(super) decl: Declaration,
    pub(crate) cubin: PathBuf,
    pub(crate) entry: String,
    /// The kernel's integer defines (a variant's, or the cubin's as the request gives them).
    pub(super) defines: Bindings,
    /// `variant `v`` or `cubin `path``, for messages.
    pub(super) target: String,
    pub(super) reference: Reference,
    pub(crate) shape: String,
    pub(crate) dims: Bindings,
    pub(super) recipe: String,
    pub(super) class: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_the_pipeline_folder() {
        assert_eq!(root_of(Path::new("pipeline.yaml")), PathBuf::from("."));
        assert_eq!(
            root_of(Path::new("/p/q/pipeline.yaml")),
            PathBuf::from("/p/q")
        );
    }
}
