//! The elite cubins a fresh clone lacks (or holds from an older tune: a checkout that
//! pulled newer results), rebuilt from the committed records instead of tuned again. `.repro/cubins/<dir>-top<k>.cubin` is not committed; `topk.json` is, and it
//! names each elite member's configuration and source (the kernel's own, or a proposed one
//! whose diff sits beside it). Compiled again with the nvcc the lock records, a member gives
//! the same bytes the tune wrote: when they match the lock's digest the cubin is put back and
//! the stage stays up to date, so a GPU of the model the results came from re-measures
//! nothing. When they do not match (the kernel changed, another nvcc) nothing is written
//! and the stage is stale, as it should be.

use super::TuneOptions;
use crate::reuse::{digest, file_digest};
use crate::{build::compile, build::compile::CompileRequest};
use anyhow::Context;
use repro_engine::{lockfile::LockEntry, lockfile::LockFile};
use repro_executor::local::LocalExecutor;
use repro_pipeline::Pipeline;
use repro_schema::EliteEntry;
use repro_tune::{proposer::store, proposer::store::SourceStore};
use std::path::{Path, PathBuf};

/// Rebuild stage `name`'s elite cubins that are missing or not the ones its lock records,
/// where the committed record allows it; `say` tells what was restored and what could not be.
pub(super) fn elite_cubins(
    name: &str,
    o: &TuneOptions,
    pipeline: &Pipeline,
    root: &Path,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let lock = LockFile::load(root)?;
    let Some(entry) = lock.stages.get(name) else {
        return Ok(());
    };
    let stale: Vec<(u32, PathBuf, &String)> = (1..=o.elite)
        .filter_map(|rank| {
            let rel = o.elite_cubin(rank);
            let want = entry.outputs.get(rel.to_str()?)?;
            (file_digest(&root.join(&rel)).as_ref() != Some(want)).then_some((rank, rel, want))
        })
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let Some(elite) = committed_elite(o, entry, root) else {
        return Ok(());
    };
    let Some(arch) = entry
        .inputs
        .params
        .get("arch")
        .filter(|a| a.starts_with("sm_"))
    else {
        return Ok(());
    };
    let Ok(tc) = repro_pipeline::toolchain::find(root, repro_pipeline::toolchain::pin(pipeline))
    else {
        return Ok(());
    };
    let kernel = &pipeline.kernels[&o.kernel];
    let mut wanted = Vec::new();
    let mut requests = Vec::new();
    for (rank, rel, want) in stale {
        let Some(member) = elite.iter().find(|e| e.rank == rank) else {
            continue;
        };
        let source = member_source(o, member, root, Path::new(&kernel.source))?;
        let mut defines = o.base_defines.clone();
        defines.extend(
            member
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string())),
        );
        let mut flags = kernel.flags.clone();
        if member.source.is_some() {
            flags.extend(store::include_flags(Path::new(&kernel.source)));
        }
        requests.push(CompileRequest {
            source,
            entry: kernel.entry.clone(),
            defines,
            arch: arch.clone(),
            flags,
        });
        wanted.push((rel, want));
    }
    let cancel = repro_executor::CancelFlag::default();
    let outs = compile::compile_many(&LocalExecutor::new(), &cancel, &tc, root, &requests, 2);
    for ((rel, want), out) in wanted.into_iter().zip(outs) {
        let bytes = out.cubin.as_deref().and_then(|c| std::fs::read(c).ok());
        match bytes {
            Some(b) if &digest(&b) == want => {
                let dest = root.join(&rel);
                if let Some(dir) = dest.parent() {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                }
                std::fs::write(&dest, b)
                    .with_context(|| format!("cannot write {}", dest.display()))?;
                say(&format!(
                    "· {name}: rebuilt {} from its committed record",
                    rel.display()
                ));
            }
            _ => say(&format!(
                "· {name}: {} rebuilt from its committed record is not the cubin the tune measured (the kernel or nvcc changed): the tune is stale",
                rel.display()
            )),
        }
    }
    Ok(())
}

/// The elite as committed: `topk.json`, only when it is the file the lock recorded.
fn committed_elite(o: &TuneOptions, entry: &LockEntry, root: &Path) -> Option<Vec<EliteEntry>> {
    let rel = o.file("topk.json");
    let bytes = std::fs::read(root.join(&rel)).ok()?;
    (entry.outputs.get(&rel) == Some(&digest(&bytes)))
        .then(|| serde_json::from_slice(&bytes).ok())
        .flatten()
}

/// The source an elite member compiled: the kernel's own, or its proposed source rebuilt
/// from the committed diff into the tune's source store.
fn member_source(
    o: &TuneOptions,
    member: &EliteEntry,
    root: &Path,
    kernel: &Path,
) -> anyhow::Result<PathBuf> {
    let Some(diff) = &member.diff else {
        return Ok(kernel.to_path_buf());
    };
    let sources = SourceStore::open(root, kernel)?;
    let patch = std::fs::read_to_string(root.join(diff)).with_context(|| {
        format!(
            "cannot read {diff}, the diff of {}'s source",
            o.elite_name(member.rank)
        )
    })?;
    let text = store::apply(sources.base(), &patch).map_err(|e| anyhow::anyhow!("{diff}: {e}"))?;
    Ok(sources.put(&text)?.path)
}
