//! `singlet plan`: the table at a size, by arithmetic from the route table's declared units
//! (docs/guide/capacity.md): each key family's busiest key against DynamoDB's per-key limits,
//! the bulk work paced, storage and cost.

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
}

/// `plan [--json] [--workload <file>]`: `0` when no key family is hot, `1` when one is, `2`
/// when the workload cannot be read (said on stderr, nothing on stdout).
pub fn run(args: PlanArgs) -> ExitCode {
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
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.plan).expect("a plan serialises")
        );
    } else {
        print!("{}", plan::text(&report));
    }
    if report.any_hot() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
