//! A stage started on its own thread, its outputs prepared, and put back if it cannot start.

use super::{Finished, Run};
use crate::progress::Line;
use crate::runner::Request;
use crate::staging;
use repro_executor::CancelFlag;
use repro_pipeline::kind::RunCtx;
use repro_pipeline::Project;
use std::sync::mpsc;
use std::time::{Duration, Instant};

impl<'a> Run<'a> {
    /// Prepare outputs and start stage `i` on a thread.
    pub(super) fn launch<'s>(
        &self,
        scope: &'s std::thread::Scope<'s, 'a>,
        i: usize,
        tx: &mpsc::Sender<Finished>,
    ) -> anyhow::Result<(staging::Guard, Line)> {
        let project: &'a Project = self.project;
        let stage = &project.stages[i];
        // The log first: once the outputs are moved aside, nothing may fail before the
        // stage runs (its guard is what puts them back).
        let log = project.root.join(".repro/logs").join(format!(
            "{}.log",
            repro_pipeline::paths::safe_name(&stage.name)
        ));
        if let Some(dir) = log.parent() {
            repro_base::fsio::create_dir_all(dir)?;
        }
        staging::truncate_or_create(&log)?;
        let guard = staging::prepare(
            &project.root,
            &stage.name,
            &stage.outputs,
            stage.kind.writes_in_place(),
        )?;
        let line = self.progress.start(&stage.name);
        let write_root = guard.write_root(&project.root).to_path_buf();
        let bar = line.clone();
        let tx = tx.clone();
        let cancel: &'a CancelFlag = self.cancel;
        let req: &'a Request = self.req;
        let overrides = &req.overrides;
        let cli_executor = req.executor.as_deref();
        let count_gpus = req.count_gpus;
        let repro_exe = self.repro_exe.clone();
        // Children run in the project root: give them the file by an absolute path.
        let pipeline_file = project
            .root
            .join(project.file.file_name().unwrap_or("pipeline.yaml".as_ref()));
        let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
            let started = Instant::now();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let executor = repro_executor::for_stage(
                    project.pipeline.executor.as_ref(),
                    stage.spec.executor.as_ref(),
                    cli_executor,
                    count_gpus,
                )?;
                let progress = |m: &str| bar.set(m);
                let ctx = RunCtx {
                    name: &stage.name,
                    spec: &stage.spec,
                    config: &stage.config,
                    peers: &project.configs,
                    pipeline: &project.pipeline,
                    root: &project.root,
                    staging: &write_root,
                    log: &log,
                    executor: executor.as_ref(),
                    cancel,
                    repro_exe: &repro_exe,
                    pipeline_file: &pipeline_file,
                    overrides,
                    progress: &progress,
                };
                stage.kind.run(&ctx)
            }))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(anyhow::anyhow!(
                    "the `{}` kind crashed: {what}",
                    stage.kind.kind()
                ))
            });
            let _ = tx.send(Finished {
                index: i,
                result,
                elapsed: started.elapsed(),
            });
        });
        if let Err(e) = spawned {
            // Out of threads (`ulimit -u`): this stage fails, its outputs as they were.
            line.finish(
                &stage.name,
                "failed",
                Duration::ZERO,
                self.progress.is_quiet(),
            );
            self.put_back(i, &guard);
            anyhow::bail!("cannot start a thread to run the stage: {e}; fewer stages at once (`-j`) or a higher process limit (`ulimit -u`) lets it run");
        }
        Ok((guard, line))
    }

    /// Put back the previous outputs of stage `i`, saying what could not be.
    pub(super) fn put_back(&self, i: usize, guard: &staging::Guard) {
        let name = &self.project.stages[i].name;
        match guard.rollback(&self.project.root) {
            Ok(notes) => {
                for note in notes {
                    self.progress
                        .error(&format!("warning: stage `{name}`: {note}"));
                }
            }
            Err(e) => self.progress.error(&format!(
                "error: could not restore the outputs of `{name}`: {e:#}"
            )),
        }
    }
}
