//! The command line of one ncu invocation on `repro exec`, and the metric list it asks for.

use super::options::ProfileOptions;
use super::targets::{Program, Target};
use repro_gpu::{client::ExecRequest, client::ExecTarget};
use repro_gpu::{timing::L2Mode, timing::Method};
use repro_ncu::{metrics, metrics::Arch};
use std::path::Path;

/// Everything one ncu invocation needs besides the target.
pub struct NcuCall<'a> {
    pub ncu: &'a Path,
    pub repro_exe: &'a Path,
    pub pipeline_file: &'a Path,
    pub metrics: &'a [String],
    pub opts: &'a ProfileOptions,
}

impl NcuCall<'_> {
    /// What ncu may do to the GPU's clocks and caches while it profiles (the stage's options).
    fn control_flags(&self) -> [String; 4] {
        [
            "--clock-control".into(),
            self.opts.clock_control.clone(),
            "--cache-control".into(),
            self.opts.cache_control.clone(),
        ]
    }

    /// `ncu <profiling flags> <extra> <repro> -f <pipeline> exec ...` for a kernel target
    /// (`launches` launches after `launch_skip`), or for the calls of baseline scripts that
    /// share one command (a [`unit`](super::calls::units)) `ncu <flags> <extra> <command>
    /// --warmup <n> --profile <baseline> <shape> <range> ...` (each call `launches` times).
    pub fn argv(&self, unit: &[&Target], extra: &[String]) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let mut argv = vec![self.ncu.to_string_lossy().into_owned()];
        argv.extend(extra.iter().cloned());
        let target = unit[0];
        if let Program::Script(run) = &target.program {
            // Every kernel of each call inside its own range, in the script's own process
            // (not the `repro exec --dump-inputs` it starts).
            argv.extend([s("--metrics"), self.metrics.join(","), s("--nvtx")]);
            for call in unit {
                argv.extend([s("--nvtx-include"), format!("{}/", call.call_range())]);
            }
            argv.extend([s("--target-processes"), s("application-only")]);
            argv.extend(self.control_flags());
            argv.extend(run.iter().cloned());
            argv.extend([s("--warmup"), self.opts.baseline_warmup().to_string()]);
            // Each `--profile` is a trial call, the warm-up calls and one profiled call: as
            // many of each call as the kernels have profiled launches, one after another.
            for call in unit {
                for _ in 0..self.opts.launches {
                    argv.extend([
                        s("--profile"),
                        call.variant.clone(),
                        call.shape.clone(),
                        call.call_range(),
                    ]);
                }
            }
            return argv;
        }
        argv.extend([
            s("--metrics"),
            self.metrics.join(","),
            s("-k"),
            format!("regex:^{}$", regex_escape(&target.entry)),
            s("--launch-skip"),
            self.opts.launch_skip().to_string(),
            s("--launch-count"),
            self.opts.launches.to_string(),
        ]);
        argv.extend(self.control_flags());
        argv.extend([
            self.repro_exe.to_string_lossy().into_owned(),
            s("-f"),
            self.pipeline_file.to_string_lossy().into_owned(),
            s("exec"),
        ]);
        let request = ExecRequest {
            target: match &target.program {
                Program::Variant(v) => ExecTarget::Variant(v.clone()),
                Program::Cubin { path, defines } => ExecTarget::Cubin {
                    path: path.clone(),
                    entry: target.entry.clone(),
                    defines: defines.clone(),
                },
                Program::Script(_) => unreachable!("a baseline's command returned above"),
            },
            workload: Some(target.workload.clone()),
            shape: target.shape.clone(),
            inputs: None,
            precision: None,
            seed: 0,
            warmup: self.opts.warmup,
            iters: self.opts.iters,
            l2: L2Mode::Warm,
            // ncu serializes launches, so the isolated method's hold would wait for a
            // release that comes only after it: launch plainly (ncu times each alone).
            method: Method::Graph,
            timing: true,
        };
        argv.extend(request.argv());
        argv
    }
}

pub(super) fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// The metric list for the GPU this machine has (every architecture's names when unknown).
pub(super) fn request_metrics(root: &Path, extra: &[String]) -> Vec<String> {
    metrics::request_list(detected_arch(root), extra)
}

pub(super) fn detected_arch(root: &Path) -> Option<Arch> {
    let gpus = repro_gpu::probe_cached(root).ok()?;
    Arch::from_sm(&gpus.first()?.arch())
}
