//! Whether a result in `artifacts/` measured the build now in place. A machine that cannot
//! measure keeps the results measured elsewhere (docs/guide/results.md, "Kept results");
//! after a kernel edit those records still carry the numbers of the old cubin. Each bench
//! and ncu record names the cubin it measured (`measured.key.cubin_sha256`), and the build
//! records name the cubins the sources make now, so the check needs no GPU and reads only
//! committed files: the report, the manifest, `repro diff` and `repro commit` all show such
//! a record as not measured, never as a pass or SAME.

use repro_schema::{BenchFile, BuildRecord, Measured, NcuTarget};

/// A result that does not belong to the build now in place, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NotMeasured {
    /// The variant (or ncu target) the record is of.
    pub name: String,
    pub reason: String,
}

/// Why `file`'s results are not those of the cubin its variant builds to now; `None` when
/// they are, or when the record cannot say (a baseline, a skipped or failed variant, a
/// record written before records named their cubin).
pub fn bench_file(file: &BenchFile, builds: &[BuildRecord]) -> Option<String> {
    if file.kind != "variant" || !file.status.is_ok() {
        return None;
    }
    against_build(&file.name, file.measured.as_ref()?, builds)
}

/// As [`bench_file`], for an ncu target of a pipeline variant (tuned configurations and
/// baselines have no build record, and are left to their stages' status).
pub fn ncu_target(target: &NcuTarget, builds: &[BuildRecord]) -> Option<String> {
    if !target.status.is_ok() || !builds.iter().any(|b| b.variant == target.variant) {
        return None;
    }
    against_build(&target.variant, target.measured.as_ref()?, builds)
}

/// Every record of `benches` and `ncu` that is not of the build now in place.
pub fn all(benches: &[BenchFile], ncu: &[NcuTarget], builds: &[BuildRecord]) -> Vec<NotMeasured> {
    let bench = benches.iter().filter_map(|f| {
        Some(NotMeasured {
            name: f.name.clone(),
            reason: bench_file(f, builds)?,
        })
    });
    let profiled = ncu.iter().filter_map(|t| {
        Some(NotMeasured {
            name: format!("{} (ncu)", t.target),
            reason: ncu_target(t, builds)?,
        })
    });
    bench.chain(profiled).collect()
}

/// The measured cubin against every architecture the variant builds for now.
fn against_build(variant: &str, measured: &Measured, builds: &[BuildRecord]) -> Option<String> {
    let cubin = measured.key.get("cubin_sha256")?;
    let Some(build) = builds.iter().find(|b| b.variant == variant) else {
        return Some(format!(
            "measured cubin {}, and `{variant}` has no build record now",
            short(cubin)
        ));
    };
    let now: Vec<&String> = build
        .archs
        .values()
        .filter_map(|a| a.cubin_sha256.as_ref())
        .collect();
    if now.contains(&cubin) {
        return None;
    }
    Some(format!(
        "measured cubin {}, which the build no longer makes: the kernel or its build changed since it was measured; run on a GPU",
        short(cubin)
    ))
}

/// The first 12 hex digits of a digest.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_schema::ArchBuild;
    use repro_schema::BuildStatus;
    use repro_schema::RunStatus;
    use std::collections::BTreeMap;

    fn build(variant: &str, cubin: &str) -> BuildRecord {
        BuildRecord {
            variant: variant.into(),
            kernel: "k".into(),
            source: "k.cu".into(),
            entry: "k".into(),
            defines: BTreeMap::new(),
            nvcc_version: "13.0".into(),
            status: BuildStatus::Ok,
            archs: BTreeMap::from([(
                "sm_90a".to_string(),
                ArchBuild {
                    command: Vec::new(),
                    status: BuildStatus::Ok,
                    error: None,
                    cubin_sha256: Some(cubin.into()),
                    entries: Vec::new(),
                    dynamic_smem_bytes: None,
                    gates: Vec::new(),
                },
            )]),
        }
    }

    fn bench(variant: &str, cubin: &str) -> BenchFile {
        let mut f: BenchFile = serde_json::from_value(serde_json::json!({
            "name": variant, "kind": "variant", "status": "ok",
            "results": [], "gates": [],
            "measured": {"run": "2026-11-26T18:21:20Z", "key": {"cubin_sha256": cubin}},
        }))
        .unwrap();
        f.arch = Some("sm_90a".into());
        f
    }

    #[test]
    fn a_record_of_the_cubin_built_now_is_measured() {
        assert_eq!(bench_file(&bench("v", "aaaa"), &[build("v", "aaaa")]), None);
    }

    #[test]
    fn a_record_of_another_cubin_is_not_measured_and_says_which() {
        let why = bench_file(&bench("v", "aaaa"), &[build("v", "bbbb")]).unwrap();
        assert!(why.contains("measured cubin aaaa"), "{why}");
        assert!(why.contains("run on a GPU"), "{why}");
        let all = all(&[bench("v", "aaaa")], &[], &[build("v", "bbbb")]);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].name, "v");
    }

    #[test]
    fn baselines_and_skips_are_left_to_their_stages() {
        let mut b = bench("torch", "aaaa");
        b.kind = "baseline".into();
        assert_eq!(bench_file(&b, &[]), None);
        let mut s = bench("v", "aaaa");
        s.status = RunStatus::Skipped;
        assert_eq!(bench_file(&s, &[build("v", "bbbb")]), None);
    }
}
