//! Small commands: `repro ncu parse` and `repro build --list`.

use super::exit;
use crate::{cli::GlobalArgs, cli::NcuParseArgs};
use anyhow::Context;
use repro_engine::display;
use repro_pipeline::Pipeline;
use std::path::Path;

/// `repro ncu parse FILE [--json]`.
pub fn ncu_parse(args: &NcuParseArgs) -> anyhow::Result<i32> {
    let summary = repro_ncu::summarize_file(&args.file)?;
    if args.json {
        display::out(&repro_schema::to_json_pretty(&summary))?;
    } else {
        display::out(&repro_ncu::table::render(&summary))?;
    }
    Ok(exit::OK)
}

/// `repro build --list`: print the table; exit code 0.
pub fn build_list(global: &GlobalArgs) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(&global.file).with_context(|| {
        format!(
            "cannot read {} (pass the pipeline file with -f)",
            global.file.display()
        )
    })?;
    let pipeline: Pipeline = serde_yaml::from_str(&text)
        .with_context(|| format!("{} is not a valid pipeline file", global.file.display()))?;
    let root = match global.file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let variants: Vec<&str> = pipeline.variants.keys().map(String::as_str).collect();
    display::out(&repro_stages::build::list::render(root, &variants)?)?;
    let (tails, warnings) = repro_stages::build::list::tails(&pipeline, &global.file)?;
    display::out(&tails)?;
    if !global.quiet {
        for w in warnings {
            display::err(&format!("warning: {w}"));
        }
    }
    Ok(exit::OK)
}
