//! Reusing earlier measurements (docs/guide/results.md, "Reused results"). The bench and
//! profile stages copy a variant's records from the committed artifacts instead of measuring
//! again when everything those records depend on is unchanged: the cubin loaded (by
//! digest), the workload, the harness options, the GPU model and its driver — the
//! [`Measured::key`] each record carries.
//!
//! The lock stays the one source of truth: a record is reused only from an output whose
//! digest in `artifacts/repro.lock` matches the file, so a hand-edited or half-written
//! record never stands in for a measurement. `--force` (the `remeasure` override)
//! measures everything again.

use repro_engine::lockfile::LockFile;
use repro_gpu::GpuInfo;
use repro_pipeline::kind::RunCtx;
pub use repro_schema::describe_run;
use repro_schema::Measured;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// What a record's results depend on (see [`Measured::key`]).
pub type Key = BTreeMap<String, String>;

/// Where and when this run measures: what each record it measures says.
#[derive(Debug, Clone, PartialEq)]
pub struct ThisRun {
    run: String,
    commit: Option<String>,
}

impl ThisRun {
    /// Now, at the commit checked out in `root`.
    pub fn now(root: &Path) -> ThisRun {
        let commit = repro_gpu::env::git_state(root).and_then(|g| {
            let sha: String = g.sha?.chars().take(12).collect();
            Some(if g.dirty { format!("{sha}+dirty") } else { sha })
        });
        ThisRun {
            run: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            commit,
        }
    }

    /// The record of a measurement this run made, under `key`.
    pub fn measured(&self, key: Key) -> Measured {
        Measured {
            run: self.run.clone(),
            commit: self.commit.clone(),
            key,
            reused: false,
        }
    }
}

/// The outputs of one stage that the lock vouches for.
pub struct Committed<'a> {
    root: &'a Path,
    outputs: BTreeMap<String, String>,
    /// `--force`: nothing is reused.
    remeasure: bool,
}

impl<'a> Committed<'a> {
    /// The lock's record of `ctx`'s stage (nothing when there is no lock or it is unreadable:
    /// then everything is measured).
    pub fn of(ctx: &RunCtx<'a>) -> Committed<'a> {
        let remeasure = ctx.overrides.remeasure;
        Committed::load(ctx.root, ctx.name, remeasure)
    }

    fn load(root: &'a Path, stage: &str, remeasure: bool) -> Committed<'a> {
        let outputs = LockFile::load(root)
            .ok()
            .and_then(|mut lock| lock.stages.remove(stage))
            .map(|entry| entry.outputs)
            .unwrap_or_default();
        Committed {
            root,
            outputs,
            remeasure,
        }
    }

    /// The bytes of output `rel` (a path relative to the root) when the lock vouches for
    /// them; `None` when it does not, or under `--force`.
    pub fn read(&self, rel: &str) -> Option<Vec<u8>> {
        if self.remeasure {
            return None;
        }
        let want = self.outputs.get(rel)?;
        let bytes = std::fs::read(self.root.join(rel)).ok()?;
        (&digest(&bytes) == want).then_some(bytes)
    }
}

/// The earlier record `m` may stand for a new measurement under `key`: returns it marked
/// as reused.
pub fn reusable(m: Option<&Measured>, key: &Key) -> Option<Measured> {
    let m = m.filter(|m| &m.key == key)?;
    Some(Measured {
        reused: true,
        ..m.clone()
    })
}

/// sha256 of `bytes`, hex.
pub fn digest(bytes: &[u8]) -> String {
    repro_base::tools::hex(&Sha256::digest(bytes))
}

/// sha256 of a value's JSON.
pub fn digest_json(value: &impl Serialize) -> String {
    digest(&serde_json::to_vec(value).expect("keys serialize"))
}

/// sha256 of the file at `path`; `None` when it cannot be read.
pub fn file_digest(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| digest(&b))
}

/// What workload `name`'s expected outputs come from, for a key: its reference kernel's
/// cubin for `arch` (digest and entry), or its command (the words, and the digest of each
/// project file they name). `None` when the cubin cannot be read.
pub fn reference_key(
    root: &Path,
    workloads: &repro_pipeline::workload::Workloads,
    name: &str,
    arch: &str,
) -> Option<serde_json::Value> {
    let decl = workloads.get(name)?;
    Some(match &decl.reference.run {
        Some(run) => {
            let files: BTreeMap<&str, String> = run
                .iter()
                .filter_map(|w| Some((w.as_str(), file_digest(&root.join(w))?)))
                .collect();
            serde_json::json!({"run": run, "files": files})
        }
        None => {
            let cubin = repro_pipeline::paths::cubin_path(&workloads.reference_name(name), arch);
            serde_json::json!({
                "cubin_sha256": file_digest(&root.join(cubin))?,
                "entry": decl.reference.entry,
            })
        }
    })
}

/// The GPU part of a key, `gpu` (model and architecture) and `driver`, when every GPU is
/// the same; `None` when there is none or they differ (nothing is reused then).
pub fn gpu_key(gpus: &[GpuInfo]) -> Option<Key> {
    let identity = |g: &GpuInfo| {
        let driver = g
            .driver_version
            .clone()
            .unwrap_or_else(|| format!("CUDA {}", g.cuda_driver_version));
        (format!("{} {}", g.name, g.arch()), driver)
    };
    let first = identity(gpus.first()?);
    if gpus.iter().any(|g| identity(g) != first) {
        return None;
    }
    Some(Key::from([
        ("gpu".to_string(), first.0),
        ("driver".to_string(), first.1),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(name: &str, driver: &str) -> GpuInfo {
        GpuInfo {
            index: 0,
            name: name.into(),
            uuid: "GPU-0".into(),
            compute_capability: [9, 0],
            sm_count: 132,
            memory_bytes: 1,
            cuda_driver_version: "13.0".into(),
            driver_version: Some(driver.into()),
        }
    }

    #[test]
    fn the_gpu_key_is_one_model_and_driver() {
        let h100 = gpu("NVIDIA H100 80GB HBM3", "580.159.04");
        let key = gpu_key(&[h100.clone(), h100.clone()]).unwrap();
        assert_eq!(key["gpu"], "NVIDIA H100 80GB HBM3 sm_90");
        assert_eq!(key["driver"], "580.159.04");
        assert_eq!(
            gpu_key(&[h100.clone(), gpu("NVIDIA H100 80GB HBM3", "580.1")]),
            None
        );
        assert_eq!(gpu_key(&[]), None);
    }

    #[test]
    fn only_an_equal_key_is_reused_and_it_keeps_its_run() {
        let key = Key::from([("cubin_sha256".to_string(), "ab".to_string())]);
        let then = ThisRun {
            run: "2026-11-25T10:00:00Z".into(),
            commit: Some("61c0dd9c1234+dirty".into()),
        }
        .measured(key.clone());
        let got = reusable(Some(&then), &key).unwrap();
        assert!(got.reused);
        assert_eq!(
            (got.run.as_str(), got.key),
            (then.run.as_str(), key.clone())
        );
        assert_eq!(
            describe_run(&then),
            "2026-11-25T10:00:00Z at 61c0dd9c1234+dirty"
        );
        let other = Key::from([("cubin_sha256".to_string(), "cd".to_string())]);
        assert_eq!(reusable(Some(&then), &other), None);
        assert_eq!(reusable(None, &key), None);
    }

    #[test]
    fn only_outputs_the_lock_vouches_for_are_read() {
        use repro_engine::lockfile::LockEntry;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("artifacts/bench")).unwrap();
        let (good, edited) = ("artifacts/bench/a.json", "artifacts/bench/b.json");
        std::fs::write(root.join(good), "{}").unwrap();
        std::fs::write(root.join(edited), "{\"edited\": true}").unwrap();
        let mut lock = LockFile::default();
        lock.stages.insert(
            "bench".into(),
            LockEntry {
                fingerprint: "f".into(),
                gate_failed: None,
                skipped: None,
                inputs: Default::default(),
                outputs: [good, edited]
                    .map(|p| (p.to_string(), digest(b"{}")))
                    .into(),
            },
        );
        lock.save(root).unwrap();
        let committed = Committed::load(root, "bench", false);
        assert_eq!(committed.read(good).as_deref(), Some(&b"{}"[..]));
        assert_eq!(committed.read(edited), None, "not what the lock recorded");
        assert_eq!(committed.read("artifacts/bench/c.json"), None);
        assert_eq!(Committed::load(root, "other", false).read(good), None);
        assert_eq!(
            Committed::load(root, "bench", true).read(good),
            None,
            "--force"
        );
    }

    #[test]
    fn this_run_names_the_commit_of_a_git_checkout() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ThisRun::now(dir.path()).commit, None);
        let run = ThisRun::now(dir.path()).run;
        assert!(chrono::DateTime::parse_from_rfc3339(&run).is_ok(), "{run}");
    }
}
