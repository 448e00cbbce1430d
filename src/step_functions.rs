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

/// Which tool a run runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    /// One migration, each segment writing its own items (with `dry_run`, planning them and
    /// writing nothing to the table). A migration that claims values (`plates-compact`) has its
    /// segments survey what every item claims first (the map run twice,
    /// `singlet_tools::migrate::on_aws`). Its results are the execution's own
    /// (`s3://<results bucket>/migrate/<execution name>/`): a run started again (`--attempt`)
    /// surveys again, and resumes its writes from the checkpoints in the table.
    Migrate { migration: String, dry_run: bool },
    /// `fsck`: each segment reads its items into the run's results
    /// (`s3://<results bucket>/fsck/<run>/`), then one judge checks them all and repairs
    /// (`singlet_tools::fsck::on_aws`). `run` names the results: the same run started again
    /// (`--attempt`) goes on from its segments' checkpoints there.
    Fsck {
        run: String,
        repair: bool,
        dry_run: bool,
    },
}

/// One tool's run on the state machine.
#[derive(Debug, Clone)]
pub struct Run {
    pub state_machine_arn: String,
    pub tool: Tool,
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
    /// Every field the state machine's paths read is there for every tool (a path to a field
    /// that is not there fails the execution).
    pub fn input(&self) -> Value {
        let (tool, migration, run, repair, dry_run) = match &self.tool {
            Tool::Migrate { migration, dry_run } => {
                ("migrate", Some(migration.as_str()), None, false, *dry_run)
            }
            Tool::Fsck {
                run,
                repair,
                dry_run,
            } => ("fsck", None, Some(run.as_str()), *repair, *dry_run),
        };
        // A migration's segments write at once, and share the limits; fsck's segments only
        // read, and its one judge makes every repair: it has the limits whole.
        let at_once = match self.tool {
            Tool::Migrate { .. } => f64::from(self.max_concurrency.min(self.segments).max(1)),
            Tool::Fsck { .. } => 1.0,
        };
        let survey = migration
            .and_then(singlet_functions::migrations::by_name)
            .is_some_and(|migration| migration.claims.is_some());
        json!({
            "tool": tool,
            "migration": migration,
            "survey": survey,
            "run": run.map_or_else(|| self.execution_name(), str::to_owned),
            "repair": repair,
            "dryRun": dry_run,
            "segments": (0..self.segments).collect::<Vec<u32>>(),
            "segmentCount": self.segments,
            "maxConcurrency": self.max_concurrency,
            "maxWcu": self.max_wcu.map(|wcu| wcu / at_once),
            "maxKeyWcu": self.max_key_wcu / at_once,
            "pageSize": self.page_size,
        })
    }

    /// The execution's name without its attempt: the tool, what it runs, a digest of the
    /// input (but its `run`, which is this name for a migration).
    fn name_stem(&self) -> String {
        let what = match &self.tool {
            Tool::Migrate { migration, .. } => format!("migrate-{migration}"),
            Tool::Fsck { run, .. } => format!("fsck-{run}"),
        };
        let mut input = self.clone();
        if let Tool::Fsck { run, .. } = &mut input.tool {
            run.clear();
        }
        let mut digested = serde_json::to_value(input.fields()).expect("JSON");
        digested["what"] = json!(what);
        let digest = Sha256::digest(digested.to_string().as_bytes());
        let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let mut name: String = what
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                _ => '_',
            })
            .take(60)
            .collect();
        name += &format!("-{hex}");
        name
    }

    /// What the digest of a name covers: everything of the input but the run's own name.
    fn fields(&self) -> Value {
        json!({
            "segments": self.segments,
            "maxConcurrency": self.max_concurrency,
            "maxWcu": self.max_wcu,
            "maxKeyWcu": self.max_key_wcu,
            "pageSize": self.page_size,
            "tool": format!("{:?}", self.tool),
        })
    }

    /// The execution's name: the tool, what it runs, a digest of the input and the attempt, so
    /// the same command names the same execution (at most 80 characters of `[A-Za-z0-9-_]`).
    pub fn execution_name(&self) -> String {
        format!("{}-{}", self.name_stem(), self.attempt)
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

impl Ended {
    /// How it ended, for a person: its status, and its error when it has one.
    pub fn how(&self) -> String {
        match &self.error {
            Some(error) => format!("{} ({error})", self.status),
            None => self.status.clone(),
        }
    }
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

/// The segments' reports of a succeeded execution's output: where the map's `ResultWriter`
/// put them in S3 (`reports` is then `{MapRunArn, ResultWriterDetails: {Bucket, Key}}`, the
/// key its `manifest.json`, which lists the files of the child executions' results, each a JSON
/// array whose items' `Output` is one segment's report), or, from a state machine without a
/// `ResultWriter`, the list under `reports` itself.
pub async fn segment_reports(
    s3: &aws_sdk_s3::Client,
    output: &Value,
) -> Result<Vec<Value>, String> {
    if let Some(inline) = output["reports"].as_array() {
        return Ok(inline.clone());
    }
    let details = &output["reports"]["ResultWriterDetails"];
    let (Some(bucket), Some(key)) = (details["Bucket"].as_str(), details["Key"].as_str()) else {
        return Err("the execution's output names no segment reports".into());
    };
    let manifest = read_s3_json(s3, &format!("s3://{bucket}/{key}")).await?;
    let mut reports = Vec::new();
    for file in manifest["ResultFiles"]["SUCCEEDED"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let file_key = file["Key"]
            .as_str()
            .ok_or("the map's manifest lists a file without a key")?;
        let url = format!("s3://{bucket}/{file_key}");
        let children = read_s3_json(s3, &url).await?;
        for child in children
            .as_array()
            .ok_or_else(|| format!("{url} is no list"))?
        {
            let text = child["Output"]
                .as_str()
                .ok_or_else(|| format!("{url} has a child execution without its Output"))?;
            reports.push(
                serde_json::from_str(text)
                    .map_err(|e| format!("{url} has an Output that is not JSON: {e}"))?,
            );
        }
    }
    Ok(reports)
}

/// The segments' reports gathered into the run's one report: the tools library's, which the
/// state machine's own gathering step runs too.
pub use singlet_tools::migrate::on_aws::gather;

/// The tools' state machine of the stack `stack`: the one template.yaml names
/// `<stack>-table-tools`, found among the account's state machines in the region
/// (`ListStateMachines`, which IAM grants on no narrower resource than `*`).
pub async fn state_machine_of_stack(client: &Client, stack: &str) -> Result<String, String> {
    let name = format!("{stack}-table-tools");
    let mut pages = client.list_state_machines().into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|error| {
            format!(
                "cannot list the state machines to find {name}: {}",
                aws_sdk_sfn::error::DisplayErrorContext(&error)
            )
        })?;
        if let Some(found) = page.state_machines().iter().find(|m| m.name() == name) {
            return Ok(found.state_machine_arn().to_owned());
        }
    }
    Err(format!(
        "no state machine is named {name} in this account and region: is the stack {stack} \
         deployed here (its TableToolsStateMachineArn output names it)?"
    ))
}

/// The JSON object at `url` (`s3://<bucket>/<key>`): what a run left in the results bucket.
pub async fn read_s3_json(client: &aws_sdk_s3::Client, url: &str) -> Result<Value, String> {
    let (bucket, key) = url
        .strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
        .ok_or_else(|| format!("{url} is not an s3://<bucket>/<key> URL"))?;
    let object = client
        .get_object()
        .bucket(bucket)
        .key(key)
        .send()
        .await
        .map_err(|error| {
            format!(
                "cannot read {url}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&error)
            )
        })?;
    let bytes = object
        .body
        .collect()
        .await
        .map_err(|e| format!("cannot read {url}: {e}"))?;
    serde_json::from_slice(&bytes.to_vec()).map_err(|e| format!("{url} is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(migration: &str) -> Run {
        Run {
            state_machine_arn: "arn:aws:states:us-east-1:123456789012:stateMachine:s-table-tools"
                .into(),
            tool: Tool::Migrate {
                migration: migration.into(),
                dry_run: false,
            },
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

    /// The run is complete only when every segment was read to its end, none is missing and
    /// no item was left unsettled; a dry run never is, though its segments all ended.
    #[test]
    fn gathered_reports_are_complete_only_when_every_segment_is() {
        let report = |complete: bool| json!({"scanned": 2, "changed": 1, "complete": complete});
        let both = [report(true), report(true)];
        assert_eq!(gather("m", &both, 2, false)["complete"], true);
        assert_eq!(gather("m", &both, 2, false)["scanned"], 4);
        assert_eq!(
            gather("m", &both, 3, false)["complete"],
            false,
            "one missing"
        );
        let one_stopped = [report(true), report(false)];
        assert_eq!(gather("m", &one_stopped, 2, false)["complete"], false);
        assert_eq!(gather("m", &[], 0, false)["complete"], false);
        let unsettled = [report(true), json!({"unsettled": 1, "complete": true})];
        assert_eq!(gather("m", &unsettled, 2, false)["complete"], false);
        assert_eq!(gather("m", &unsettled, 2, false)["ended"], true);
        let dry = [
            json!({"complete": true, "sample": ["VEHICLE#a", "VEHICLE#b"]}),
            json!({"complete": true, "sample": ["VEHICLE#c", "VEHICLE#d", "VEHICLE#e", "VEHICLE#f"]}),
        ];
        let gathered = gather("m", &dry, 2, true);
        assert_eq!(
            (
                &gathered["complete"],
                &gathered["ended"],
                &gathered["dryRun"]
            ),
            (&json!(false), &json!(true), &json!(true))
        );
        assert_eq!(gathered["sample"].as_array().unwrap().len(), 5);
    }

    /// A migration that claims values asks for its survey; the others do not. A migration's
    /// results are its execution's own, so another attempt surveys again; a dry run is another
    /// execution than the run that writes.
    #[test]
    fn a_migration_that_claims_values_is_surveyed_first_in_its_executions_own_results() {
        let plates = run("plates-compact");
        assert_eq!(plates.input()["survey"], true);
        assert_eq!(run("vehicles-by-depot").input()["survey"], false);
        assert_eq!(plates.input()["run"], plates.execution_name());
        let again = Run {
            attempt: 2,
            ..run("plates-compact")
        };
        assert_ne!(again.input()["run"], plates.input()["run"]);
        let dry = Run {
            tool: Tool::Migrate {
                migration: "plates-compact".into(),
                dry_run: true,
            },
            ..run("plates-compact")
        };
        assert_eq!(dry.input()["dryRun"], true);
        assert_ne!(dry.execution_name(), plates.execution_name());
    }
}
