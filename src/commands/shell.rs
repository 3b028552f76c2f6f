//! `repro completions <shell>` (clap_complete) and `repro man` (clap_mangen): both made
//! from the command line's own definitions, so they list exactly the commands and options
//! this binary has.

use super::exit;
use crate::{cli::Cli, cli::CompletionsArgs, cli::ManArgs};
use anyhow::Context;
use clap::CommandFactory;
use repro_engine::display;

/// `repro completions <shell>`: the script on stdout.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_string();
    // Into a buffer first: clap_complete panics when it cannot write.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, name, &mut script);
    display::out(&String::from_utf8_lossy(&script))?;
    Ok(exit::OK)
}

/// `repro man [--dir DIR]`: repro(1) on stdout, or every page written into `DIR`.
pub fn man(args: &ManArgs) -> anyhow::Result<i32> {
    let cmd = Cli::command();
    match &args.dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page)?;
            display::out(&String::from_utf8_lossy(&page))?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            display::out_line(&format!("wrote the man pages into {}", dir.display()))?;
        }
    }
    Ok(exit::OK)
}
