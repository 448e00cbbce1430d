//! `singlet render`: template.yaml's functions and Cargo.toml's watch router written from the
//! route table (exit 0 written or already current; with `--check`, 1 when a file differs).

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// `render`'s options.
#[derive(Args)]
pub struct RenderArgs {
    /// Write nothing: exit 1 when a file differs from its rendering.
    #[arg(long)]
    check: bool,
    /// The repository's root, where template.yaml and Cargo.toml are.
    #[arg(long, default_value = ".")]
    root: PathBuf,
}

/// Renders, or checks.
pub fn run(args: RenderArgs) -> Result<ExitCode, String> {
    singlet::render::cli(&args.root, args.check)
}
