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
        "unsettled": sum("unsettled"),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(migration: &str) -> Run {
        Run {
            state_machine_arn: "arn:aws:states:us-east-1:123456789012:stateMachine:s-table-tools"
                .into(),
            migration: migration.into(),
            segments: 8,
            max_concurrency: 4,
            max_wcu: Some(1000.0),
            max_key_wcu: 800.0,
            page_size: None,
            attempt: 1,
        }
    }

    /// The name is Step Functions' (at most 80 of `[A-Za-z0-9-_]`), the same for the same
    /// command, another for other limits or another attempt.
    #[test]
    fn an_execution_is_named_by_its_input_and_attempt() {
        let name = run("vehicles-by-depot").execution_name();
        assert_eq!(name, run("vehicles-by-depot").execution_name());
        let long = run(&"x".repeat(200)).execution_name();
        for name in [&name, &long] {
            assert!(name.len() <= 80, "{name}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            );
        }
        let slower = Run {
            max_wcu: Some(10.0),
            ..run("vehicles-by-depot")
        };
        assert_ne!(slower.execution_name(), name);
        let again = Run {
            attempt: 2,
            ..run("vehicles-by-depot")
        };
        assert_ne!(again.execution_name(), name);
        assert!(again.execution_name().ends_with("-2"));
        assert_eq!(
            execution_arn(&run("m").state_machine_arn, "n").unwrap(),
            "arn:aws:states:us-east-1:123456789012:execution:s-table-tools:n"
        );
        assert_eq!(execution_arn("arn:aws:lambda:x", "n"), None);
    }

    /// Each running segment's share of the limits: four at once share 1,000 and 800.
    #[test]
    fn the_limits_are_shared_by_the_segments_running_at_once() {
        let input = run("m").input();
        assert_eq!(input["maxWcu"], 250.0);
        assert_eq!(input["maxKeyWcu"], 200.0);
        assert_eq!(input["segments"].as_array().unwrap().len(), 8);
        let unlimited = Run {
            max_wcu: None,
            ..run("m")
        };
        assert!(unlimited.input()["maxWcu"].is_null());
    }

    /// The run is complete only when every segment's report says so and none is missing.
    #[test]
    fn gathered_reports_are_complete_only_when_every_segment_is() {
        let report = |complete: bool| json!({"scanned": 2, "changed": 1, "complete": complete});
        let output = json!({"segmentCount": 2, "reports": [report(true), report(true)]});
        assert_eq!(gather("m", &output)["complete"], true);
        assert_eq!(gather("m", &output)["scanned"], 4);
        let one_missing = json!({"segmentCount": 3, "reports": [report(true), report(true)]});
        assert_eq!(gather("m", &one_missing)["complete"], false);
        let one_stopped = json!({"segmentCount": 2, "reports": [report(true), report(false)]});
        assert_eq!(gather("m", &one_stopped)["complete"], false);
        assert_eq!(gather("m", &json!({}))["complete"], false);
    }
}
