//! Which stages a request is about, and whether the upstream of `repro stage X` is current.

use super::Selection;
use crate::{status::StageStatus, status::State};
use repro_base::errors::UsageError;
use repro_pipeline::dag::BitSet;
use repro_pipeline::Project;
use repro_pipeline::{diag::did_you_mean, diag::quoted_list};
use std::collections::BTreeSet;

/// The chosen stages and the forced ones, as indices.
pub(super) fn select(
    project: &Project,
    selection: &Selection,
    force: bool,
) -> anyhow::Result<(Vec<usize>, BTreeSet<usize>)> {
    let dag = &project.dag;
    let (chosen, with_deps, downstream): (Vec<usize>, bool, bool) = match selection {
        Selection::All => ((0..dag.len()).collect(), false, false),
        Selection::Named {
            names,
            with_deps,
            downstream,
        } => {
            let mut chosen = Vec::new();
            for name in names {
                let Some(i) = dag.index(name) else {
                    let all = project.stages.iter().map(|s| s.name.as_str());
                    let help = did_you_mean(name, all.clone())
                        .unwrap_or_else(|| format!("the stages are {}", quoted_list(all)));
                    return Err(UsageError(format!(
                        "no stage named `{name}` in {}\n  help: {help}",
                        project.file.display()
                    ))
                    .into());
                };
                chosen.push(i);
            }
            (chosen, *with_deps, *downstream)
        }
        Selection::Kind(kind) => {
            let chosen: Vec<usize> = (0..dag.len())
                .filter(|&i| project.stages[i].kind.kind() == kind)
                .collect();
            if chosen.is_empty() {
                return Err(UsageError(format!(
                    "{} has no stage with `uses: {kind}`\n  help: add one, e.g. `stages: {{{kind}: {{uses: {kind}}}}}`",
                    project.file.display()
                ))
                .into());
            }
            (chosen, true, false)
        }
    };
    let mut set: BTreeSet<usize> = chosen.iter().copied().collect();
    if downstream {
        set.extend(dag.descendants(&chosen));
    }
    let forced: BTreeSet<usize> = if force { set.clone() } else { BTreeSet::new() };
    if with_deps {
        set.extend(dag.ancestors(&chosen));
    }
    let ordered = dag
        .topo_order()
        .iter()
        .copied()
        .filter(|i| set.contains(i))
        .collect();
    Ok((ordered, forced))
}

/// `repro stage X` without `--with-deps`: every upstream outside the selection must be
/// up to date, else say which is not and stop.
pub(super) fn check_upstream(
    project: &Project,
    statuses: &[StageStatus],
    selected: &[usize],
) -> anyhow::Result<()> {
    let dag = &project.dag;
    let mut inside = BitSet::new(dag.len());
    let mut upstream = BitSet::new(dag.len());
    for &i in selected {
        inside.insert(i);
        upstream.union_with(dag.ancestors_of(i));
    }
    let mut problems = Vec::new();
    for j in upstream.iter().filter(|&j| !inside.contains(j)) {
        let why = match &statuses[j].state {
            State::UpToDate | State::Kept { .. } => continue,
            State::Stale(changes) => format!(
                "is stale ({})",
                changes
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            State::NeverRun => "has never run".to_string(),
            State::Failed(_) => "failed last time".to_string(),
        };
        for &i in selected.iter().filter(|&&i| dag.needs_transitively(i, j)) {
            problems.push(format!(
                "stage `{}` needs `{}`, which {why}",
                project.stages[i].name, project.stages[j].name
            ));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = selected
        .iter()
        .map(|&i| project.stages[i].name.as_str())
        .collect();
    anyhow::bail!(
        "{}\n  help: run `repro stage {} --with-deps` to bring the upstream up to date first, or `repro run`",
        problems.join("\n"),
        names.join(" ")
    )
}
