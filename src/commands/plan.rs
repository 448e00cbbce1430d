//! `singlet plan`: the table at a size, by arithmetic from the route table's declared units
//! (docs/guide/capacity.md): each key family's busiest key against DynamoDB's per-key limits,
//! the bulk work paced, storage and cost.

use super::output;
use super::runner::RunnerArgs;
use clap::Args;
use singlet::plan;
use std::path::PathBuf;
use std::process::ExitCode;

/// `plan`'s options.
#[derive(Args)]
pub struct PlanArgs {
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
    /// A workload file (JSON); without it, the contract's default workload.
    #[arg(long)]
    workload: Option<PathBuf>,
    /// Also run the workload for this many seconds (1 to 300) at its peak through the API on
    /// an in-memory engine with its partition limits, on a virtual clock, and print each key
    /// family's measured busiest key beside the plan's.
    #[arg(long, value_name = "SECONDS")]
    simulate: Option<u32>,
}

/// `plan [--json] [--workload <file>] [--simulate <seconds>]`: `0` when no key family is hot
/// (and the simulation, when asked, measures none hotter than planned), `1` when one is, `2`
/// when the workload or the seconds cannot be read (said on stderr, nothing on stdout).
pub async fn run(runner: &RunnerArgs, args: PlanArgs) -> ExitCode {
    let (json, workload) = (args.json, args.workload.as_deref());
    let planned = workload
        .map(|path| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the workload {}: {e}", path.display()))
                .and_then(|text| {
                    plan::Workload::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
                })
        })
        .unwrap_or_else(|| Ok(plan::Workload::default()))
        .and_then(|workload| plan::plan(&workload));
    let report = match planned {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let simulation = match args.simulate {
        None => None,
        Some(seconds) => match plan::simulate::simulate(&report, seconds, &runner.key_dir).await {
            Ok(simulation) => Some(simulation),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    };
    if json {
        let mut out = serde_json::to_value(&report.plan).expect("a plan serialises");
        if let Some(simulation) = &simulation {
            out["simulation"] = serde_json::to_value(simulation).expect("it serialises");
        }
        output::line(serde_json::to_string_pretty(&out).expect("a plan serialises"));
    } else {
        output::text(plan::text(&report));
        if let Some(simulation) = &simulation {
            output::text(plan::simulate::text(simulation));
        }
    }
    let held = simulation.as_ref().is_none_or(|s| s.holds());
    if report.any_hot() || !held {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
