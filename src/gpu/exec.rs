//! `repro exec`: one variant, one shape, one seed → one JSON line.

use clap::Args;

#[derive(Debug, Args)]
pub struct ExecArgs {
    #[arg(long)]
    pub variant: String,
    #[arg(long)]
    pub shape: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

pub fn main(_args: &ExecArgs) -> anyhow::Result<i32> {
    anyhow::bail!("repro exec is not available yet")
}
