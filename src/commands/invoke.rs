//! `singlet invoke`: one function run once on one event file, its response printed; or the
//! functions listed.

use super::connect::{connect, refuse_handlers_elsewhere};
use super::output;
use super::runner::{RunnerArgs, parse_clock};
use clap::Args;
use singlet::invoke;
use singlet::serve::local_bus::LocalBus;
use singlet::serve::retention::DirArchive;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// `invoke`'s options.
#[derive(Args)]
pub struct InvokeArgs {
    /// The function's name, as in template.yaml (`register-vehicle`, ...).
    #[arg(required_unless_present = "list")]
    function: Option<String>,
    /// An event file, such as events/register-vehicle.json; `-` reads standard input.
    #[arg(long, required_unless_present = "list")]
    event: Option<PathBuf>,
    /// List the functions (each one's route or schedule) instead.
    #[arg(long, conflicts_with_all = ["function", "event"])]
    list: bool,
    /// Run the function as if its clock read this time (ISO-8601, such as
    /// 2026-12-29T09:00:00Z): a loan checked out is due from then; a scheduled function's event
    /// fires then (its `time` is this), so `mark-overdue` marks what is due by then. Local only:
    /// nothing sets a function's clock on Lambda.
    #[arg(long, value_parser = parse_clock)]
    clock: Option<time::OffsetDateTime>,
}

/// Runs the function, or lists them.
pub async fn run(runner: &RunnerArgs, args: InvokeArgs) -> Result<ExitCode, String> {
    let (Some(function), Some(event)) = (args.function, args.event) else {
        output::text(invoke::list());
        return Ok(ExitCode::SUCCESS);
    };
    // The name first: a typo is told before any engine is opened.
    invoke::check_function(&function)?;
    refuse_handlers_elsewhere(runner)?;
    let mut event = read_event(&event)?;
    let (mut ctx, _) = connect(runner, None).await?;
    if let Some(at) = args.clock {
        ctx.clock = singlet_functions::clock::Clock::reading(at);
        event = invoke::fired_at(&function, event, at)?;
    }
    let ctx = ctx
        .with_bus(Arc::new(LocalBus::open(&runner.events_out)?))
        .with_archive(Arc::new(DirArchive::open(&runner.archive_dir)?));
    let response = invoke::invoke(&ctx, &function, &event).await?;
    output::line(serde_json::to_string_pretty(&response).expect("JSON"));
    Ok(ExitCode::SUCCESS)
}

/// An event file's text, or standard input's for `-`.
fn read_event(path: &std::path::Path) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read the event from standard input: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}
