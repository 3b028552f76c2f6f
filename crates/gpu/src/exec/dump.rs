//! `repro exec --dump-inputs`: a workload's cases as files, for baseline scripts.

use super::dims::{is_dims, parse_dims};
use super::project::Project;
use crate::{client::ExecRequest, client::ExecTarget};
use crate::{timing::L2Mode, timing::Method};
use anyhow::{bail, Context as _};
use rayon::prelude::*;
use repro_pipeline::workload::inputs::Case;
use repro_pipeline::workload::problem::Problem;
use repro_pipeline::{workload::exprs::Bindings, workload::exprs::Compiled};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `index.json` of a `--dump-inputs` folder: what a baseline script reads.
#[derive(Serialize)]
struct DumpIndex<'a> {
    workload: &'a str,
    primary: &'a str,
    /// The workload's default precision class (per-class thresholds of `gates` use it).
    #[serde(skip_serializing_if = "Option::is_none")]
    precision: Option<&'a str>,
    /// Output name → its gates, as declared.
    gates: &'a indexmap::IndexMap<String, repro_pipeline::workload::spec::OutputGates>,
    entries: Vec<DumpEntry>,
}

#[derive(Serialize)]
struct DumpEntry {
    shape: String,
    dims: Bindings,
    seed: u64,
    /// The input recipe.
    inputs: String,
    /// Whether bench times this (shape, recipe): the shape's first recipe only.
    timed: bool,
    /// Whether the absolute gates apply to this recipe.
    absolute_gates: bool,
    /// Folder (relative to the index) holding the case (`repro_pipeline::workload::case`).
    dir: String,
}

/// Cases of at least this many elements (all arguments together) are drawn one at a time.
const LARGE_CASE: usize = 1 << 22;

/// What `repro exec --dump-inputs` writes.
pub struct DumpRequest<'a> {
    pub dir: &'a Path,
    pub workload: Option<&'a str>,
    /// A shape name or dimensions; `None`: every shape of the workload.
    pub shape: Option<&'a str>,
    pub seed: Option<u64>,
    pub recipe: Option<&'a str>,
}

/// `repro exec --dump-inputs DIR`: write the cases of every shape × recipe × seed of a
/// workload of the pipeline at `file` (or only the `shape`, `seed`, `recipe` given), each a
/// folder in the layout of `repro_pipeline::workload::case`, with an `index.json`. Needs no GPU.
/// Returns how many cases it wrote.
pub fn dump_inputs(file: &Path, req: &DumpRequest) -> anyhow::Result<usize> {
    let project = Project::load(file)?;
    let exec = ExecRequest {
        target: ExecTarget::Cubin {
            path: PathBuf::new(),
            entry: String::new(),
            defines: Bindings::new(),
        },
        workload: req.workload.map(String::from),
        shape: String::new(),
        inputs: None,
        precision: None,
        seed: 0,
        warmup: 0,
        iters: 0,
        l2: L2Mode::Warm,
        method: Method::Isolated,
        timing: false,
        profile: None,
        check: true,
    };
    let (name, decl) = project.workload_of(&exec)?;
    let c = Compiled::new(name, decl, &[]).map_err(|p| {
        anyhow::anyhow!(
            "{}",
            p.iter()
                .map(|p| project.render(p))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let shapes: Vec<(String, Bindings)> = match req.shape {
        Some(s) if is_dims(s) => vec![(
            s.to_string(),
            parse_dims(s, &decl.dims).map_err(anyhow::Error::msg)?,
        )],
        Some(s) => vec![(
            s.to_string(),
            c.dims(s)
                .with_context(|| format!("no shape `{s}` in workload `{name}`"))?,
        )],
        None => decl
            .shapes
            .keys()
            .map(|s| (s.clone(), c.dims(s).expect("declared")))
            .collect(),
    };
    let seeds = req.seed.map_or_else(|| decl.seeds.clone(), |s| vec![s]);
    let mut entries = Vec::new();
    for (shape, dims) in shapes {
        let recipes = decl.recipes_of(&shape);
        let chosen: Vec<&str> = req.recipe.map_or_else(|| recipes.clone(), |r| vec![r]);
        for recipe in chosen {
            if !decl.recipe_names().contains(&recipe) {
                bail!(
                    "no input recipe `{recipe}` in workload `{name}` (recipes: {})",
                    decl.recipe_names().join(", ")
                );
            }
            for &seed in &seeds {
                entries.push(DumpEntry {
                    shape: shape.clone(),
                    dims: dims.clone(),
                    seed,
                    inputs: recipe.to_string(),
                    timed: recipes.first() == Some(&recipe),
                    absolute_gates: decl.recipes.get(recipe).is_none_or(|r| r.absolute_gates),
                    dir: format!("{}-{recipe}-seed{seed}", shape.replace([',', '='], "_")),
                });
            }
        }
    }
    // Every case draws from its own streams, so the small ones are drawn side by side; the
    // large ones after, one at a time, in order (their draw uses every core already, and
    // side by side they would hold many times the memory). The first that fails, in the
    // index's order, is the error.
    let draw = |e: &DumpEntry| -> Result<anyhow::Result<()>, Problem> {
        let case = Case::generate_for(&c, &e.shape, e.dims.clone(), &e.inputs, e.seed)?;
        let dir = req.dir.join(&e.dir);
        Ok(repro_pipeline::workload::case::write(
            &dir, name, decl, &case,
        ))
    };
    let elements = |e: &DumpEntry| -> usize {
        (0..decl.args.len())
            .filter_map(|i| c.extents(i, &e.dims, "").ok())
            .map(|x| x.iter().product::<usize>())
            .sum()
    };
    let small: Vec<_> = entries
        .par_iter()
        .map(|e| (elements(e) < LARGE_CASE).then(|| draw(e)))
        .collect();
    for (e, drawn) in entries.iter().zip(small) {
        let written = drawn.unwrap_or_else(|| draw(e));
        written.map_err(|p| anyhow::anyhow!("{}", project.render(&p)))??;
    }
    let index = DumpIndex {
        workload: name,
        primary: &decl.primary,
        precision: decl.precision.as_deref(),
        gates: &decl.gates,
        entries,
    };
    std::fs::create_dir_all(req.dir)
        .with_context(|| format!("cannot create {}", req.dir.display()))?;
    let path = req.dir.join("index.json");
    std::fs::write(&path, repro_schema::to_json_pretty(&index))
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(index.entries.len())
}
