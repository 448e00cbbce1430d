//! What `migrate <name> --on-aws` and `fsck --on-aws` share: the options that name the stack's
//! tools state machine and shape the run, and starting and following its execution
//! ([`singlet::step_functions`]).

use clap::Args;
use singlet::step_functions::{Ended, Run, Tool, start_and_follow, state_machine_of_stack};

/// The options of a run on the stack's tools state machine (with `--on-aws`).
#[derive(Args, Debug, Clone)]
pub struct StateMachineArgs {
    /// With --on-aws: the tools' state machine, the stack's `TableToolsStateMachineArn` output.
    #[arg(long, env = "SINGLET_STATE_MACHINE_ARN")]
    pub state_machine: Option<String>,
    /// With --on-aws: the stack's name, instead of --state-machine: its state machine is the
    /// one named `<stack>-table-tools` (found by `ListStateMachines`).
    #[arg(long)]
    pub stack: Option<String>,
    /// With --on-aws: segments run at once (the map's concurrency). A migration's segments
    /// share --max-wcu and --max-key-wcu between them. Default: every segment at once.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_concurrency: Option<u32>,
    /// With --on-aws: which start of this run. An execution's name (the tool, a digest of the
    /// input, the attempt) is taken once it has ended: start a run that failed again with the
    /// next attempt; it resumes from the segments' checkpoints.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: u32,
    /// With --on-aws: milliseconds between two looks at the execution.
    #[arg(long, default_value_t = 10_000, hide = true)]
    pub poll_ms: u64,
}

/// The standard AWS configuration (environment, profile, role), on the runner's HTTPS client.
pub async fn aws_config() -> aws_config::SdkConfig {
    aws_config::from_env()
        .http_client(singlet_functions::context::https_client())
        .load()
        .await
}

/// An S3 client of `config`; path-style on an endpoint of its own (`AWS_ENDPOINT_URL_S3`: a
/// local S3, the tests', has no bucket subdomains).
pub fn s3_client(config: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let mut s3 = aws_sdk_s3::config::Builder::from(config);
    if std::env::var("AWS_ENDPOINT_URL_S3").is_ok_and(|url| !url.is_empty()) {
        s3.set_force_path_style(Some(true));
    }
    aws_sdk_s3::Client::from_conf(s3.build())
}

impl StateMachineArgs {
    /// The state machine's ARN: `--state-machine`, or the one of `--stack`.
    pub async fn state_machine_arn(&self, client: &aws_sdk_sfn::Client) -> Result<String, String> {
        let arn = match (&self.state_machine, &self.stack) {
            (Some(_), Some(_)) => {
                return Err("give --state-machine or --stack, not both".into());
            }
            (None, None) => {
                return Err(
                    "--on-aws needs --stack <the stack's name> or --state-machine \
                            <the stack's TableToolsStateMachineArn output>"
                        .into(),
                );
            }
            (Some(arn), None) => arn.clone(),
            (None, Some(stack)) => state_machine_of_stack(client, stack).await?,
        };
        if !arn.contains(":stateMachine:") {
            return Err(format!(
                "{arn} is not a state machine's ARN (arn:aws:states:<region>:<account>:stateMachine:<name>)"
            ));
        }
        Ok(arn)
    }

    /// Starts `tool` with `segments` and the limits on the state machine (or finds the
    /// execution of the same name) and follows it to its end, each status on standard error
    /// after `label`.
    pub async fn start_and_follow(
        &self,
        label: &str,
        client: &aws_sdk_sfn::Client,
        tool: Tool,
        segments: u32,
        (max_wcu, max_key_wcu): (Option<f64>, f64),
        page_size: Option<i32>,
    ) -> Result<Ended, String> {
        let run = Run {
            state_machine_arn: self.state_machine_arn(client).await?,
            tool,
            segments,
            max_concurrency: self.max_concurrency.unwrap_or(segments),
            max_wcu,
            max_key_wcu,
            page_size,
            attempt: self.attempt,
        };
        let poll = std::time::Duration::from_millis(self.poll_ms);
        let ended = start_and_follow(client, &run, poll, |line| {
            eprintln!("{label} on AWS: {line}")
        })
        .await?;
        if ended.started_earlier {
            eprintln!(
                "{label} on AWS: {} had been started before (the same command): its end is {}, \
                 and nothing was run twice; start a new run with --attempt {}",
                ended.execution_arn,
                ended.status,
                self.attempt + 1
            );
        }
        Ok(ended)
    }
}
