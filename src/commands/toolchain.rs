//! `repro toolchain` (what nvcc is in use, and where it came from) and `repro toolchain
//! install [VERSION]` (install ahead of time what `repro run` would install).

use super::exit;
use indicatif::{ProgressBar, ProgressStyle};
use repro_base::errors::UsageError;
use repro_engine::display;
use repro_pipeline::toolchain::install::Installer;
use repro_pipeline::toolchain::search::Found;
use repro_pipeline::{toolchain::NvccSearch, toolchain::NvccVersion, toolchain::Toolchain};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The project root and its pin; a missing pipeline file means no pin (the commands also
/// work outside a project).
fn project_pin(file: &Path) -> anyhow::Result<(PathBuf, Option<NvccVersion>)> {
    if !file.exists() {
        return Ok((std::env::current_dir()?, None));
    }
    let project = repro_stages::load(file)?;
    let pin = repro_pipeline::toolchain::pin(&project.pipeline).copied();
    Ok((project.root, pin))
}

fn describe(version: &Result<String, String>) -> String {
    match version {
        Ok(line) => NvccVersion::from_release_line(line)
            .map_or_else(|| line.clone(), |v| format!("nvcc {v}")),
        Err(why) => format!("unusable ({why})"),
    }
}

/// `repro toolchain`: exit 0 when an nvcc is usable, 1 when none is.
pub fn show(file: &Path) -> anyhow::Result<i32> {
    let (root, pin) = project_pin(file)?;
    let search = NvccSearch::from_env();
    match &pin {
        Some(p) => display::out_line(&format!(
            "pinned:     nvcc {p} (`toolchain:` in {})",
            file.display()
        ))?,
        None => display::out_line(&format!(
            "pinned:     nothing ({} has no `toolchain:`): the first nvcc found is used",
            file.display()
        ))?,
    }
    let chosen = search.find(&root, pin.as_ref());
    match &chosen {
        Ok(tc) => display::out_line(&format!(
            "in use:     {} from {}: {}",
            describe(&Ok(tc.version.clone())),
            tc.source,
            tc.nvcc.display()
        ))?,
        Err(_) => display::out_line("in use:     none")?,
    }
    let in_use = chosen.as_ref().ok().map(|tc: &Toolchain| tc.nvcc.clone());
    let others: Vec<Found> = search
        .all(&root)
        .into_iter()
        .filter(|f| Some(&f.nvcc) != in_use.as_ref())
        .collect();
    for (i, f) in others.iter().enumerate() {
        let label = if i == 0 { "also found:" } else { "" };
        let note = match (
            &pin,
            f.version
                .as_ref()
                .ok()
                .and_then(|l| NvccVersion::from_release_line(l)),
        ) {
            (Some(p), Some(v)) if v != *p => " (not the pinned version)",
            _ => "",
        };
        display::out_line(&format!(
            "{label:11} {} from {}: {}{note}",
            describe(&f.version),
            f.source,
            f.nvcc.display()
        ))?;
    }
    if let Some(dir) = &search.cache {
        display::out_line(&format!("cache:      {}", dir.display()))?;
    }
    match chosen {
        Ok(_) => Ok(exit::OK),
        Err(e) => {
            display::err(&format!("error: {e}"));
            Ok(exit::FAILED)
        }
    }
}

/// `repro toolchain install [VERSION]`.
pub fn install(file: &Path, version: Option<&str>, quiet: bool) -> anyhow::Result<i32> {
    let (root, pin) = project_pin(file)?;
    let v: NvccVersion = match (version, pin) {
        (Some(s), _) => s.parse().map_err(UsageError)?,
        (None, Some(p)) => p,
        (None, None) => {
            return Err(UsageError(format!(
                "{} pins no nvcc, so there is nothing to install\n  help: name a version \
                 (`repro toolchain install {}`), or pin one in pipeline.yaml with `toolchain: \
                 {{nvcc: {}}}`",
                file.display(),
                repro_pipeline::toolchain::RECOMMENDED_NVCC,
                repro_pipeline::toolchain::RECOMMENDED_NVCC
            ))
            .into())
        }
    };
    if let Ok(tc) = NvccSearch::from_env().find(&root, Some(&v)) {
        display::out_line(&format!(
            "nvcc {v} is already here, from {}: {}",
            tc.source,
            tc.nvcc.display()
        ))?;
        return Ok(exit::OK);
    }
    let spinner = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner:.cyan} {wide_msg} {elapsed:>4}")
                .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    });
    let say = |line: &str| match &spinner {
        Some(bar) => bar.set_message(line.to_string()),
        None if !quiet => display::err(line),
        None => {}
    };
    let result = Installer::from_env().and_then(|i| i.install(&v, &say));
    if let Some(bar) = &spinner {
        bar.finish_and_clear();
    }
    let nvcc = result?;
    display::out_line(&format!("installed nvcc {v}: {}", nvcc.display()))?;
    Ok(exit::OK)
}
