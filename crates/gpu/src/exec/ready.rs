//! A resolved run made ready to launch on the device.

use super::project::{Project, Resolved};
use crate::harness::Launch;
use crate::warm::Warm;
use crate::{launch::kernel_order, launch::launch_dims, launch::DeviceCase};
use anyhow::bail;
use repro_pipeline::workload::exprs::Compiled;
use repro_pipeline::workload::problem::Problem;

/// A resolved run made ready to launch: its case and the expected outputs, its kernel,
/// its geometry, its buffers and parameters.
pub(crate) struct Ready {
    pub(super) prepared: std::rc::Rc<crate::warm::Prepared>,
    pub(super) kernel: std::rc::Rc<crate::harness::Kernel>,
    pub(super) dims: crate::driver::LaunchDims,
    pub(super) device_case: DeviceCase,
    pub(super) params: crate::launch::Params,
}

impl Ready {
    pub(crate) fn launch(&self) -> Launch<'_> {
        Launch {
            kernel: &self.kernel,
            dims: self.dims,
            params: &self.params,
        }
    }
}

/// Draw (or find) `r`'s case and, when `expected`, the reference's outputs; load its
/// kernel, and evaluate its launch: a launch the declaration refuses (`requires`) or beyond
/// this GPU's limits is an error at its key in pipeline.yaml.
pub(crate) fn ready(
    warm: &mut Warm,
    project: &Project,
    r: &Resolved,
    seed: u64,
    expected: bool,
) -> anyhow::Result<Ready> {
    let fail = |p: &Problem| anyhow::anyhow!("{}", project.render(p));
    let names: Vec<&str> = r.defines.keys().map(String::as_str).collect();
    let c = Compiled::new(&r.workload, &r.decl, &names).map_err(|problems| {
        let text: Vec<String> = problems.iter().map(|p| project.render(p)).collect();
        anyhow::anyhow!("{}", text.join("\n"))
    })?;
    let case = (r.shape.as_str(), &r.dims, r.recipe.as_str(), seed);
    let prepared = warm.prepared(&c, &r.reference, case, expected)?;
    let kernel = warm.kernel(&r.cubin, &r.entry, &r.decl.launch.globals)?;
    let mut values = r.defines.clone();
    values.extend(kernel.globals.clone());
    let what = format!("shape `{}` with {}", r.shape, r.target);
    if let Some(cond) = c.unmet(&r.dims, &values, &what).map_err(|p| fail(&p))? {
        bail!(
            "{} cannot run shape `{}`: its launch requires `{cond}`, which does not hold",
            r.target,
            r.shape
        );
    }
    let geometry = c.launch(&r.dims, &values, &what).map_err(|p| fail(&p))?;
    if let Some(e) = warm.session().limits.check(&geometry).into_iter().next() {
        let mut path = repro_pipeline::workload::problem::path(&r.workload, &["launch", e.key]);
        path.extend(e.index.map(|i| i.to_string()));
        return Err(fail(&Problem::at(
            path,
            format!(
                "the launch for {what} is beyond this GPU's limits: {}",
                e.message
            ),
            "make the launch smaller for this shape, or the shape smaller",
        )));
    }
    let device_case = DeviceCase::upload(&r.decl, &prepared.case, |i| r.decl.args[i].dtype)?;
    let params = device_case.params(&kernel_order(&r.decl));
    Ok(Ready {
        prepared,
        kernel,
        dims: launch_dims(&geometry),
        device_case,
        params,
    })
}
