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
    /// An empty folder for `--section-folder` ([`empty_section_folder`]), if one was made.
    pub no_sections: Option<&'a Path>,
    /// Whether a kernel target's run checks its outputs before the launches: the time
    /// pass's do, the passes after it launch the same cubins on the same cases unchecked.
    pub check: bool,
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

    /// `ncu <profiling flags> <extra> <command> --warmup <n> --profile <baseline> <shape>
    /// <range> ...` for the calls of baseline scripts that share one command (a
    /// [`unit`](super::calls::units)), each call `launches` times.
    pub fn script_argv(&self, unit: &[&Target], extra: &[String]) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let Program::Script(run) = &unit[0].program else {
            unreachable!("kernel targets run through the worker (super::kernels)")
        };
        let mut argv = vec![self.ncu.to_string_lossy().into_owned()];
        argv.extend(extra.iter().cloned());
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
        // Each call as many times in a row as the kernels have profiled launches: the script
        // warms it up once (a trial call and the warm-up calls), then profiles each.
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
        argv
    }

    /// ncu's flags for the raw page as CSV.
    pub(super) fn csv_page(&self) -> Vec<String> {
        let mut flags: Vec<String> = ["--csv", "--page", "raw"].map(str::to_string).into();
        if let Some(dir) = self.no_sections {
            flags.extend(["--section-folder".into(), dir.display().to_string()]);
        }
        flags
    }

    /// The command a GPU worker runs under to have ncu profile the kernel targets' windows
    /// ([`Self::request`]) and nothing else, writing `page`.
    pub fn wrapper(&self, page: &Page) -> Vec<String> {
        let s = |x: &str| x.to_string();
        let mut argv = vec![self.ncu.to_string_lossy().into_owned()];
        match page {
            Page::Csv(log) => {
                argv.extend(self.csv_page());
                argv.extend([
                    s("--metrics"),
                    self.metrics.join(","),
                    s("--log-file"),
                    log.display().to_string(),
                ]);
            }
            Page::Report(path) => argv.extend([
                s("--set"),
                s("full"),
                s("-f"),
                s("-o"),
                path.display().to_string(),
            ]),
        }
        argv.extend([s("--profile-from-start"), s("off")]);
        argv.extend([s("--target-processes"), s("application-only")]);
        argv.extend(self.control_flags());
        argv
    }

    /// A kernel target's run on the worker: checked, then `launch_skip - 1` warm-up launches
    /// (the check's launch is the first skipped), or unchecked and `launch_skip` of them;
    /// then `launches` launches in the profiler window.
    pub fn request(&self, target: &Target) -> ExecRequest {
        ExecRequest {
            target: match &target.program {
                Program::Variant(v) => ExecTarget::Variant(v.clone()),
                Program::Cubin { path, defines, .. } => ExecTarget::Cubin {
                    path: path.clone(),
                    entry: target.entry.clone(),
                    defines: defines.clone(),
                },
                Program::Script(_) => unreachable!("a baseline runs its own command"),
            },
            workload: Some(target.workload.clone()),
            shape: target.shape.clone(),
            inputs: None,
            precision: None,
            seed: 0,
            warmup: match self.check {
                true => self.opts.baseline_warmup(),
                false => self.opts.launch_skip(),
            },
            iters: self.opts.iters,
            l2: L2Mode::Warm,
            method: Method::Graph,
            timing: false,
            profile: Some(self.opts.launches),
            check: self.check,
        }
    }
}

/// What ncu writes for the kernel targets: the raw page as CSV into a log file (the
/// worker's stdout stays its answers), or a full report.
pub enum Page<'a> {
    Csv(&'a Path),
    Report(&'a Path),
}

/// The folder `--section-folder` names for the CSV page, made empty under `root`: the stage
/// asks for its metrics by name and uses no section, so ncu need not read and check its
/// stock section and rule files when it starts, about a third of a second of each process
/// (`benches/results/ncu_startup_h200.md`). None when it cannot be made: ncu's own then.
pub(super) fn empty_section_folder(root: &Path) -> Option<std::path::PathBuf> {
    let dir = root.join(".repro/ncu/no-sections");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).ok().map(|()| dir)
}

/// The full profile's metric list for the GPU this machine has (every architecture's names
/// when unknown).
pub(super) fn full_metrics(root: &Path, extra: &[String]) -> Vec<String> {
    metrics::full_list(detected_arch(root), extra)
}

/// The one-pass list ([`super::depth`]) for the GPU this machine has (every architecture's
/// names when unknown).
pub(super) fn one_pass_metrics(root: &Path) -> Vec<String> {
    metrics::one_pass_list(detected_arch(root))
}

pub(super) fn detected_arch(root: &Path) -> Option<Arch> {
    let gpus = repro_gpu::probe_cached(root).ok()?;
    Arch::from_sm(&gpus.first()?.arch())
}
