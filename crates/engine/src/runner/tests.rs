//! The paths only built-in kinds take (staging, gates, skips, overrides), with a test
//! kind standing in for them.
use super::*;
use repro_pipeline::dag::Dag;
use repro_pipeline::kind::{
    Config, Configured, OptionError, Outputs, Overrides, RunCtx, StageInputs, StageKind,
    StageOutcome,
};
use repro_pipeline::{Pipeline, Stage, StageSpec};

#[derive(Clone, Copy)]
enum Behave {
    Pass,
    Gate,
    Skip,
    Fail,
}

/// Writes `out/s.txt` (its text names the overrides it saw) to the staging folder.
struct TestKind(Behave);

impl StageKind for TestKind {
    fn kind(&self) -> &'static str {
        "tune"
    }
    fn configure(&self, _: &str, _: &StageSpec, _: &Pipeline) -> Result<Config, OptionError> {
        Ok(Config::new(()))
    }
    fn outputs(&self, _: &Configured, _: &Pipeline) -> Outputs {
        vec!["out/s.txt".into()]
    }
    /// Its results depend on `--budget`, as a tune's do.
    fn inputs(
        &self,
        _: &Configured,
        _: &Pipeline,
        _: &Path,
        overrides: &Overrides,
    ) -> anyhow::Result<StageInputs> {
        Ok(StageInputs {
            overrides: overrides
                .tune
                .budget
                .map(|b| ("budget".to_string(), b.to_string()))
                .into_iter()
                .collect(),
            ..StageInputs::default()
        })
    }
    fn run(&self, ctx: &RunCtx) -> anyhow::Result<StageOutcome> {
        (ctx.progress)("working");
        let text = format!("budget {:?}", ctx.overrides.tune.budget);
        std::fs::write(ctx.staging.join("out/s.txt"), text)?;
        match self.0 {
            Behave::Pass => Ok(StageOutcome::Passed),
            Behave::Gate => Ok(StageOutcome::GateFailed("ptxas.max_registers".into())),
            Behave::Skip => Ok(StageOutcome::Skipped {
                reason: "ncu not found".into(),
                fix: "install Nsight Compute".into(),
            }),
            Behave::Fail => anyhow::bail!("nvcc crashed"),
        }
    }
}

fn project(root: &Path, behave: Behave) -> Project {
    let pipeline: Pipeline =
        serde_yaml::from_str("version: 1\nstages:\n  s: {uses: tune}\n").unwrap();
    let spec = pipeline.stages["s"].clone();
    Project {
        file: root.join("pipeline.yaml"),
        root: root.to_path_buf(),
        stages: vec![Stage {
            name: "s".into(),
            spec,
            kind: Arc::new(TestKind(behave)),
            outputs: vec!["out/s.txt".into()],
            optional_outputs: vec![],
            config: Config::new(()),
        }],
        dag: Dag::new(vec!["s".into()], vec![vec![]]).unwrap(),
        pipeline,
        kinds: Arc::new([]),
        configs: Default::default(),
    }
}

fn request(force: bool, budget: Option<u32>) -> Request {
    Request {
        selection: Selection::All,
        jobs: 1,
        dry_run: false,
        force,
        fail_fast: false,
        wait: false,
        quiet: true,
        executor: None,
        count_gpus: || None,
        overrides: Overrides {
            tune: repro_pipeline::kind::TuneOverrides {
                budget: budget.and_then(std::num::NonZeroU32::new),
                ..Default::default()
            },
            ..Default::default()
        },
    }
}

fn output(root: &Path) -> String {
    std::fs::read_to_string(root.join("out/s.txt")).unwrap()
}

#[test]
fn staged_outputs_move_in_and_overrides_reach_the_kind_and_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), Behave::Pass);
    assert_eq!(
        run_project(&p, &request(false, Some(8))).unwrap(),
        RunOutcome::Passed
    );
    assert_eq!(output(dir.path()), "budget Some(8)");
    assert!(!dir.path().join(".repro/staging/s").exists());
    let lock = LockFile::load(dir.path()).unwrap();
    assert_eq!(lock.stages["s"].inputs.overrides["budget"], "8");
    let record = &run_record::load(dir.path(), ["s"])["s"];
    assert_eq!(record.outcome, run_record::Outcome::Passed);
    assert_eq!(record.fingerprint, lock.stages["s"].fingerprint);
    // Without the override the recorded run no longer matches: it reruns.
    assert_eq!(
        run_project(&p, &request(false, None)).unwrap(),
        RunOutcome::Passed
    );
    assert_eq!(output(dir.path()), "budget None");
}

#[test]
fn a_failed_gate_is_recorded_runs_nothing_again_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), Behave::Gate);
    assert_eq!(
        run_project(&p, &request(false, None)).unwrap(),
        RunOutcome::Failed
    );
    let lock = LockFile::load(dir.path()).unwrap();
    assert_eq!(
        lock.stages["s"].gate_failed.as_deref(),
        Some("ptxas.max_registers")
    );
    let inode = |root: &Path| {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(root.join("out/s.txt")).unwrap())
    };
    let before = inode(dir.path());
    assert_eq!(
        run_project(&p, &request(false, None)).unwrap(),
        RunOutcome::Failed
    );
    assert_eq!(
        inode(dir.path()),
        before,
        "up to date: not rerun, still reported"
    );
}

#[test]
fn a_skipped_stage_is_not_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), Behave::Skip);
    assert_eq!(
        run_project(&p, &request(false, None)).unwrap(),
        RunOutcome::Passed
    );
    let lock = LockFile::load(dir.path()).unwrap();
    assert_eq!(lock.stages["s"].skipped.as_deref(), Some("ncu not found"));
}

#[test]
fn a_failing_kind_leaves_the_previous_outputs_and_lock() {
    let dir = tempfile::tempdir().unwrap();
    run_project(&project(dir.path(), Behave::Pass), &request(false, None)).unwrap();
    let lock = std::fs::read(dir.path().join(LOCK)).unwrap();
    let failing = project(dir.path(), Behave::Fail);
    assert_eq!(
        run_project(&failing, &request(true, Some(9))).unwrap(),
        RunOutcome::Failed
    );
    assert_eq!(output(dir.path()), "budget None");
    assert_eq!(std::fs::read(dir.path().join(LOCK)).unwrap(), lock);
    assert!(!dir.path().join(".repro/staging/s").exists());
    let records = run_record::load(dir.path(), ["s"]);
    assert_eq!(records["s"].failure(), Some("nvcc crashed"));
}

const LOCK: &str = repro_pipeline::paths::LOCK_FILE;
