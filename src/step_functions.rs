//! `migrate <name> --on-aws`: a migration run by the stack's tools state machine
//! (template.yaml's `TableToolsStateMachine`, docs/guide/tools-on-step-functions.md) instead of
//! this machine. One `StartExecution` whose input is the segment list and the limits, named from
//! that input (a start retried, or the same command run again, is the same execution, never a
//! second run beside it), then `DescribeExecution` every few seconds until it ends, and the
//! segments' reports gathered into the `--json` report `migrate` prints.

use aws_sdk_sfn::Client;
use aws_sdk_sfn::types::ExecutionStatus;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// One migration's run on the state machine.
#[derive(Debug, Clone)]
pub struct Run {
    pub state_machine_arn: String,
    pub migration: String,
    pub segments: u32,
    /// Child executions at once (the map's `MaxConcurrencyPath`).
    pub max_concurrency: u32,
    /// Write units per second for the whole table, at most: each segment running at once is
    /// given its share.
    pub max_wcu: Option<f64>,
    /// Write units per second into one key, at most: shared the same way, since segments running
    /// at once can write the same index key.
    pub max_key_wcu: f64,
    pub page_size: Option<i32>,
    /// Which start of this run (`--attempt`): an execution's name is taken for 90 days once it
    /// ends, so a run that failed is started again under the next attempt.
    pub attempt: u32,
}

impl Run {
    /// The execution's input: the map's items (`segments`) and what each item's event takes.
    pub fn input(&self) -> Value {
        let at_once = f64::from(self.max_concurrency.min(self.segments).max(1));
        json!({
            "tool": "migrate",
            "migration": self.migration,
            "segments": (0..self.segments).collect::<Vec<u32>>(),
            "segmentCount": self.segments,
            "maxConcurrency": self.max_concurrency,
            "maxWcu": self.max_wcu.map(|wcu| wcu / at_once),
            "maxKeyWcu": self.max_key_wcu / at_once,
            "pageSize": self.page_size,
        })
    }

    /// The execution's name: the tool, the migration, a digest of the input and the attempt, so
    /// the same command names the same execution (at most 80 characters of `[A-Za-z0-9-_]`).
    pub fn execution_name(&self) -> String {
        let digest = Sha256::digest(self.input().to_string().as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let mut name: String = format!("migrate-{}", self.migration)
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                _ => '_',
            })
            .take(60)
            .collect();
        name += &format!("-{hex}-{}", self.attempt);
        name
    }
}

/// The execution `name` of the state machine `state_machine_arn`:
/// `arn:<partition>:states:<region>:<account>:execution:<machine>:<name>`.
pub fn execution_arn(state_machine_arn: &str, name: &str) -> Option<String> {
    let (head, machine) = state_machine_arn.split_once(":stateMachine:")?;
    Some(format!("{head}:execution:{machine}:{name}"))
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    pub execution_arn: String,
    /// `SUCCEEDED`, `FAILED`, `TIMED_OUT` or `ABORTED`.
    pub status: String,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub cause: Option<String>,
    /// The execution had been started before this command (the same name): its end is told,
    /// nothing is run twice.
    pub started_earlier: bool,
}

/// Starts the run (or finds the execution of the same name) and follows it to its end,
/// `progress` told each status as it is polled.
pub async fn start_and_follow(
    client: &Client,
    run: &Run,
    poll: Duration,
    mut progress: impl FnMut(&str),
) -> Result<Ended, String> {
    let name = run.execution_name();
    let started = client
        .start_execution()
        .state_machine_arn(&run.state_machine_arn)
        .name(&name)
        .input(run.input().to_string())
        .send()
        .await;
    let (execution_arn, started_earlier) = match started {
        Ok(started) => (started.execution_arn().to_owned(), false),
        Err(error) => {
            let service = error.as_service_error();
            if service.is_some_and(|e| e.is_execution_already_exists()) {
                let arn = execution_arn(&run.state_machine_arn, &name)
                    .ok_or("the state machine's ARN has no `:stateMachine:`")?;
                (arn, true)
            } else {
                return Err(format!(
                    "cannot start {name} on {}: {}",
                    run.state_machine_arn,
                    aws_sdk_sfn::error::DisplayErrorContext(&error)
                ));
            }
        }
    };
    progress(&format!(
        "{} {execution_arn}",
        if started_earlier {
            "following the execution started earlier,"
        } else {
            "started"
        }
    ));
    loop {
        let described = client
            .describe_execution()
            .execution_arn(&execution_arn)
            .send()
            .await
            .map_err(|error| {
                format!(
                    "cannot follow {execution_arn}: {}",
                    aws_sdk_sfn::error::DisplayErrorContext(&error)
                )
            })?;
        let status = described.status();
        match status {
            ExecutionStatus::Running | ExecutionStatus::PendingRedrive => {
                progress(&format!("{name}: {}", status.as_str()));
                tokio::time::sleep(poll).await;
            }
            _ => {
                let output = described
                    .output()
                    .map(|text| serde_json::from_str(text).unwrap_or(Value::String(text.into())));
                return Ok(Ended {
                    execution_arn,
                    status: status.as_str().to_owned(),
                    output,
                    error: described.error().map(str::to_owned),
                    cause: described.cause().map(str::to_owned),
                    started_earlier,
                });
            }
        }
    }
}

/// The segments' reports of a succeeded execution's output, gathered into one report as the
/// laptop's `migrate --json` prints it: counts added, conflicts listed (each segment lists
/// at most [`singlet_tools::segment::CONFLICTS_LISTED`]; `conflictCount` is all of them),
/// complete when every segment is. `peakWcuPerSecond` is the segments' peaks added: an upper
/// bound, their peaks need not have been in the same second.
pub fn gather(migration: &str, output: &Value) -> Value {
    let reports = output["reports"].as_array().cloned().unwrap_or_default();
    let sum = |field: &str| -> u64 { reports.iter().filter_map(|r| r[field].as_u64()).sum() };
    let peak: f64 = reports
        .iter()
        .filter_map(|r| r["peakWcuPerSecond"].as_f64())
        .sum();
    let conflicts: Vec<Value> = reports
        .iter()
        .flat_map(|r| r["conflicts"].as_array().cloned().unwrap_or_default())
        .collect();
    let hottest = reports
        .iter()
        .filter(|r| r["hottestKey"].is_object())
        .max_by(|a, b| {
            let units = |r: &Value| r["hottestKey"]["peakWcuPerSecond"].as_f64().unwrap_or(0.0);
            units(a).total_cmp(&units(b))
        })
        .map(|r| r["hottestKey"].clone());
    let segments = output["segmentCount"].as_u64().unwrap_or(0);
    json!({
        "migration": migration,
        "scanned": sum("scanned"),
        "changed": sum("changed"),
        "alreadyChanged": sum("alreadyChanged"),
        "conflicts": conflicts,
        "conflictCount": sum("conflictCount"),
        "complete": !reports.is_empty()
            && reports.len() as u64 == segments
            && reports.iter().all(|r| r["complete"] == true),
        "dryRun": false,
        "peakWcuPerSecond": peak,
        "hottestKey": hottest,
        "segments": reports.len(),
    })
}
