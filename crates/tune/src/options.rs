//! A tune stage's options in pipeline.yaml, checked and resolved against the pipeline:
//!
//! ```yaml
//! evo-tune:
//!   uses: tune
//!   needs: [build]
//!   archs: [sm_90a]              # tuned only on a GPU that runs these (default: any; crate::archs)
//!   base: stage2-baseline        # defines inherited from a variant; the space overrides them
//!   space: {TILE_M: [32, 64, 128], NUM_WARPS: [2, 4, 8], ...}
//!   constraints: ["TILE_M * TILE_N <= 8192"]
//!   budget: 64                   # trials, failed ones included
//!   population: 8                # candidates per generation
//!   elite: 3                     # K best kept as parents and reported
//!   seed: 0
//!   shapes: [mission]            # timed shapes of the kernel's workload (default: its primary)
//!   check_shapes: [small, mission]   # checked on every recipe first (default: the primary and `shapes`)
//!   dir: artifacts/tune          # where the log and the elite go; the elite is `<dir's name>-top<k>`
//!   warmup: 10
//!   iters: 50
//!   l2: warm                     # or flush
//!   method: isolated             # or graph (`repro exec --method`)
//!   trial_timeout: 60            # per `repro exec` child: seconds or a duration (90s, 2m)
//!   jobs: 8                      # parallel nvcc processes (default: the CPU count)
//!   allow_mixed_gpus: false      # true: trials may be timed on different GPU models
//!   proposer:                    # a command proposing kernel sources (tune::proposer)
//!     run: [repro, propose, patches, --dir, kernels/proposals]
//!     candidates: 4              # per generation (default: half the population)
//!     timeout: 2m
//! ```

use super::proposer::{ProposerSpec, KEY_ENV};
use super::space::Space;
use repro_expr::suggest;
use repro_gpu::{timing::L2Mode, timing::Method};
use repro_pipeline::kind::OptionError;
use repro_pipeline::options::decode;
use repro_pipeline::{Pipeline, PtxasGates, StageSpec};
use serde::Deserialize;
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// A tune stage's keys as written (see the module comment), with their defaults;
/// [`TuneOptions::parse`] checks and resolves them.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Keys {
    /// Read by [`Space::from_yaml`], which names the parameter or constraint at fault.
    space: Option<Value>,
    constraints: Option<Value>,
    budget: u32,
    population: u32,
    elite: u32,
    seed: u64,
    shapes: Option<Vec<String>>,
    check_shapes: Option<Vec<String>>,
    dir: String,
    base: Option<String>,
    kernel: Option<String>,
    warmup: u32,
    iters: u32,
    l2: L2Mode,
    method: Method,
    #[serde(deserialize_with = "repro_pipeline::options::duration")]
    trial_timeout: Duration,
    jobs: Option<usize>,
    allow_mixed_gpus: bool,
    proposer: Option<ProposerSpec>,
    archs: Option<Vec<String>>,
}

impl Default for Keys {
    fn default() -> Self {
        Keys {
            space: None,
            constraints: None,
            budget: 64,
            population: 8,
            elite: 3,
            seed: 0,
            shapes: None,
            check_shapes: None,
            dir: DEFAULT_DIR.into(),
            base: None,
            kernel: None,
            warmup: 10,
            iters: 50,
            l2: L2Mode::Warm,
            method: Method::Isolated,
            trial_timeout: Duration::from_secs(60),
            jobs: None,
            allow_mixed_gpus: false,
            proposer: None,
            archs: None,
        }
    }
}

/// Where a tune stage writes unless its `dir` says otherwise.
pub const DEFAULT_DIR: &str = "artifacts/tune";

/// A tune stage's options, resolved.
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub space: Space,
    /// The kernel (a key of `kernels:`) whose defines are tuned.
    pub kernel: String,
    /// The workload that kernel computes: its shapes, recipes, reference and gates judge
    /// every trial.
    pub workload: String,
    /// The folder of its artifacts (`tune_log.csv`, `topk.json`, `proposals/`).
    pub dir: String,
    pub base: Option<String>,
    /// Defines inherited from `base`, as written after `-DNAME=`; a trial's configuration
    /// overrides them.
    pub base_defines: BTreeMap<String, String>,
    pub budget: u32,
    pub population: u32,
    pub elite: u32,
    pub seed: u64,
    /// Shapes a candidate is timed on; its score is the geometric mean of their p50s.
    pub shapes: Vec<String>,
    /// Shapes a candidate must be correct on, on every recipe, before it is timed: the
    /// `check_shapes` option, else the primary and `shapes`.
    pub check_shapes: Vec<String>,
    pub warmup: u32,
    pub iters: u32,
    pub l2: L2Mode,
    /// `isolated` or `graph`.
    pub method: Method,
    pub trial_timeout: Duration,
    /// Parallel nvcc processes; `None`: one per CPU.
    pub jobs: Option<usize>,
    /// Accept trials timed on different GPU models (their scores are then not comparable).
    pub allow_mixed_gpus: bool,
    /// A command that proposes kernel sources between generations.
    pub proposer: Option<ProposerSpec>,
    /// The build architectures it tunes (`archs:`, each in the pipeline's `arch:`); `None`:
    /// any. On a GPU that runs another the stage is skipped ([`crate::archs`]).
    pub archs: Option<Vec<String>>,
    /// The PTXAS gates every trial must pass: a trial is a build of `kernel`, so its gates
    /// ([`Pipeline::ptxas_gates_for`]).
    pub ptxas: Option<PtxasGates>,
}

fn err(key: &str, message: impl Into<String>) -> OptionError {
    OptionError {
        path: vec![key.to_string()],
        message: message.into(),
    }
}

impl TuneOptions {
    /// The name of the elite of rank `rank`: `<dir's name>-top<rank>` (`tune-top1`).
    pub fn elite_name(&self, rank: u32) -> String {
        format!("{}{rank}", self.elite_prefix())
    }

    /// What every elite name starts with: `<dir's name>-top`.
    pub fn elite_prefix(&self) -> String {
        let dir = std::path::Path::new(&self.dir)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("tune");
        format!("{dir}-top")
    }

    /// `.repro/cubins/<elite name>.cubin`.
    pub fn elite_cubin(&self, rank: u32) -> std::path::PathBuf {
        std::path::PathBuf::from(format!(".repro/cubins/{}.cubin", self.elite_name(rank)))
    }

    /// `<dir>/<file>`.
    pub fn file(&self, file: &str) -> String {
        format!("{}/{file}", self.dir)
    }

    pub fn parse(spec: &StageSpec, pipeline: &Pipeline) -> Result<TuneOptions, OptionError> {
        let o: Keys = decode("tune", spec)?;
        let space = o.space.as_ref().ok_or_else(|| OptionError {
            path: vec![],
            message: "a tune stage needs a `space:` (e.g. `space: {TILE_M: [32, 64]}`)".into(),
        })?;
        let space = Space::from_yaml(space, o.constraints.as_ref())?;
        let archs = super::archs::parse(o.archs, &pipeline.arch)?;

        let base = match &o.base {
            None => None,
            Some(name) => {
                if !pipeline.variants.contains_key(name) {
                    let names: Vec<&str> = pipeline.variants.keys().map(String::as_str).collect();
                    let hint = suggest(name, &names)
                        .map(|s| format!("; did you mean `{s}`?"))
                        .unwrap_or_else(|| format!(" (variants: {})", names.join(", ")));
                    return Err(err("base", format!("no variant `{name}`{hint}")));
                }
                Some(name.to_string())
            }
        };
        let kernel = match (o.kernel.as_deref(), &base) {
            (Some(k), _) => {
                if !pipeline.kernels.contains_key(k) {
                    return Err(err("kernel", format!("no kernel `{k}` under `kernels:`")));
                }
                if let Some(b) = &base {
                    let bk = &pipeline.variants[b].kernel;
                    if bk != k {
                        return Err(err(
                            "kernel",
                            format!("the base variant `{b}` builds kernel `{bk}`, not `{k}`"),
                        ));
                    }
                }
                k.to_string()
            }
            (None, Some(b)) => pipeline.variants[b].kernel.clone(),
            (None, None) if pipeline.kernels.len() == 1 => {
                pipeline.kernels.keys().next().cloned().unwrap_or_default()
            }
            (None, None) => {
                return Err(OptionError {
                    path: vec![],
                    message: "say which kernel to tune: `base: <variant>` or `kernel: <name>`"
                        .into(),
                })
            }
        };
        if !pipeline.kernels.contains_key(&kernel) {
            return Err(err(
                "base",
                format!("kernel `{kernel}` is not under `kernels:`"),
            ));
        }
        let mut base_defines = BTreeMap::new();
        if let Some(b) = &base {
            for (name, value) in &pipeline.variants[b].defines {
                let v = repro_pipeline::define_value(value)
                    .map_err(|m| err("base", format!("define `{name}` of `{b}`: {m}")))?;
                base_defines.insert(name.clone(), v);
            }
        }

        let workloads = repro_pipeline::workload::Workloads::of(pipeline);
        let Some((workload, decl)) = workloads.of_kernel(&kernel) else {
            return Err(err(
                if o.base.is_some() { "base" } else { "kernel" },
                format!(
                    "kernel `{kernel}` is in no workload: list it under a workload's `kernels`"
                ),
            ));
        };
        let shape_names: Vec<&str> = decl.shapes.keys().map(String::as_str).collect();
        let listed =
            |key: &str, list: Option<Vec<String>>| -> Result<Option<Vec<String>>, OptionError> {
                match list {
                    Some(list) if list.is_empty() => {
                        Err(err(key, "expected a list of shape names, e.g. [mission]"))
                    }
                    Some(list) => match list.iter().find(|s| !decl.shapes.contains_key(*s)) {
                        Some(bad) => Err(err(
                            key,
                            format!(
                                "no shape `{bad}` in workload `{workload}` (shapes: {})",
                                shape_names.join(", ")
                            ),
                        )),
                        None => Ok(Some(list)),
                    },
                    None => Ok(None),
                }
            };
        let shapes = listed("shapes", o.shapes)?.unwrap_or_else(|| vec![decl.primary.clone()]);
        let check_shapes = match listed("check_shapes", o.check_shapes)? {
            Some(list) => list,
            None => {
                let mut all = vec![decl.primary.clone()];
                all.extend(shapes.iter().filter(|s| **s != decl.primary).cloned());
                all
            }
        };
        let dir_name = std::path::Path::new(&o.dir)
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty() && !o.dir.ends_with('/'));
        if dir_name.is_none() || !o.dir.starts_with("artifacts/") {
            return Err(err(
                "dir",
                format!(
                    "`{}` is not a folder under artifacts/, e.g. `artifacts/tune-rmsnorm`",
                    o.dir
                ),
            ));
        }

        let positive = [
            ("budget", o.budget as u64),
            ("population", o.population as u64),
            ("elite", o.elite as u64),
            ("iters", o.iters as u64),
            ("jobs", o.jobs.map_or(1, |n| n as u64)),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, n)| *n == 0) {
            return Err(err(key, "expected a positive integer"));
        }
        if let Some(p) = &o.proposer {
            if p.run.first().is_none_or(|prog| prog.is_empty()) {
                return Err(OptionError {
                    path: vec!["proposer".into(), "run".into()],
                    message: "expected a command, e.g. `run: [repro, propose, patches, --dir, kernels/proposals]`".into(),
                });
            }
            if p.candidates == Some(0) {
                return Err(OptionError {
                    path: vec!["proposer".into(), "candidates".into()],
                    message: "expected a positive integer".into(),
                });
            }
        }
        if spec.env.contains_key(KEY_ENV) {
            return Err(OptionError {
                path: vec!["env".into(), KEY_ENV.into()],
                message: format!("a key does not belong in pipeline.yaml (it would be fingerprinted and committed in the lock); export {KEY_ENV} in the shell that runs repro"),
            });
        }
        Ok(TuneOptions {
            ptxas: pipeline.ptxas_gates_for(&kernel),
            space,
            workload: workload.to_string(),
            dir: o.dir,
            kernel,
            base,
            base_defines,
            budget: o.budget,
            population: o.population,
            elite: o.elite,
            seed: o.seed,
            shapes,
            check_shapes,
            warmup: o.warmup,
            iters: o.iters,
            l2: o.l2,
            method: o.method,
            trial_timeout: o.trial_timeout,
            jobs: o.jobs,
            allow_mixed_gpus: o.allow_mixed_gpus,
            proposer: o.proposer,
            archs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(stage: &str) -> Result<TuneOptions, OptionError> {
        let pipeline = repro_pipeline::workload::testing::tiny_pipeline(
            "kernels:\n  attn: {source: kernels/attn.cu, entry: attn_fwd}\nvariants:\n  stage2-baseline: {kernel: attn, defines: {USE_CP_ASYNC: 1, USE_WMMA_PV: true, TILE_M: 64}}\nstages:\n  build: {uses: build}\n",
            &["attn"],
        );
        let spec: StageSpec = serde_yaml::from_str(stage).unwrap();
        TuneOptions::parse(&spec, &pipeline)
    }

    #[test]
    fn defaults_and_inheritance_from_the_base_variant() {
        let o = parse("{uses: tune, base: stage2-baseline, space: {TILE_M: [32, 64]}}").unwrap();
        assert_eq!((o.kernel.as_str(), o.workload.as_str()), ("attn", "tiny"));
        assert_eq!(
            o.base_defines,
            BTreeMap::from([
                ("TILE_M".to_string(), "64".to_string()),
                ("USE_CP_ASYNC".to_string(), "1".to_string()),
                ("USE_WMMA_PV".to_string(), "1".to_string()),
            ])
        );
        assert_eq!((o.budget, o.population, o.elite, o.seed), (64, 8, 3, 0));
        assert_eq!(o.shapes, vec!["mission"]);
        assert_eq!(o.check_shapes, vec!["mission"]);
        assert_eq!(
            (o.dir.as_str(), o.elite_name(2).as_str()),
            ("artifacts/tune", "tune-top2")
        );
        assert_eq!((o.warmup, o.iters, o.l2), (10, 50, L2Mode::Warm));
        assert_eq!(o.trial_timeout, Duration::from_secs(60));
        assert_eq!(o.space.valid().len(), 2);
        assert!(!o.allow_mixed_gpus);
        let o = parse(
            "{uses: tune, space: {A: [1]}, check_shapes: [small, mission], dir: artifacts/tune-x}",
        )
        .unwrap();
        assert_eq!(o.check_shapes, vec!["small", "mission"]);
        assert_eq!(
            o.elite_cubin(1),
            std::path::PathBuf::from(".repro/cubins/tune-x-top1.cubin")
        );
    }

    #[test]
    fn mixed_gpus_are_opt_in() {
        let o = parse("{uses: tune, space: {A: [1]}, allow_mixed_gpus: true}").unwrap();
        assert!(o.allow_mixed_gpus);
        let e = parse("{uses: tune, space: {A: [1]}, allow_mixed_gpus: 1}").unwrap_err();
        assert_eq!(e.path, vec!["allow_mixed_gpus"]);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            (
                "{uses: tune, space: {A: [1]}, budgte: 3}",
                vec!["budgte"],
                "did you mean `budget`?",
            ),
            (
                "{uses: tune, space: {A: [1]}, budget: 0}",
                vec!["budget"],
                "positive integer",
            ),
            (
                "{uses: tune, space: {A: [1]}, base: stage2}",
                vec!["base"],
                "no variant `stage2` (variants: stage2-baseline)",
            ),
            (
                "{uses: tune, space: {A: [1]}, shapes: [long]}",
                vec!["shapes"],
                "no shape `long` in workload `tiny`",
            ),
            (
                "{uses: tune, space: {A: [1]}, check_shapes: []}",
                vec!["check_shapes"],
                "expected a list of shape names",
            ),
            (
                "{uses: tune, space: {A: [1]}, dir: out/tune}",
                vec!["dir"],
                "not a folder under artifacts/",
            ),
            (
                "{uses: tune, space: {A: [1]}, l2: cold}",
                vec!["l2"],
                "expected `warm` or `flush`",
            ),
            (
                "{uses: tune, space: {A: [1]}, kernel: other}",
                vec!["kernel"],
                "no kernel `other`",
            ),
            ("{uses: tune}", vec![], "needs a `space:`"),
            (
                "{uses: tune, space: {A: [1]}, proposer: {run: []}}",
                vec!["proposer", "run"],
                "expected a command",
            ),
            (
                "{uses: tune, space: {A: [1]}, proposer: {run: [p], cmd: 1}}",
                vec!["proposer"],
                "unknown field `cmd`",
            ),
            (
                "{uses: tune, space: {A: [1]}, env: {REPRO_PROPOSER_KEY: sk-1}}",
                vec!["env", "REPRO_PROPOSER_KEY"],
                "export REPRO_PROPOSER_KEY in the shell",
            ),
            (
                "{uses: tune, space: {A: [1]}, constraints: [\"B > 1\"]}",
                vec!["constraints", "0"],
                "unknown parameter `B`",
            ),
        ];
        for (stage, path, message) in cases {
            let e = parse(stage).unwrap_err();
            assert_eq!(e.path, path, "{stage}");
            assert!(e.message.contains(message), "{stage}: {}", e.message);
        }
    }
}
