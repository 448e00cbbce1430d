//! The options every command takes ([`RunnerArgs`]: the engine and table, the token key, the
//! logs), and the parsers more than one command uses.

use clap::Args;
use singlet::serve::logging::LogFormat;
use std::path::PathBuf;

/// The options every command takes, before or after its name (`global`): the engine and table
/// it works on, the token key, and the logs.
#[derive(Args)]
#[command(next_help_heading = "Runner options (before or after a command)")]
pub struct RunnerArgs {
    /// Where the embedded engine keeps its data.
    #[arg(
        long,
        default_value = ".singlet/singlet.db",
        conflicts_with = "in_memory",
        global = true
    )]
    pub data: PathBuf,
    /// Keep the embedded engine's data in memory only.
    #[arg(long, global = true)]
    pub in_memory: bool,
    /// An external DynamoDB endpoint instead of the embedded engine (on a loopback address, local
    /// credentials and region are used when the environment has none).
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB", global = true)]
    pub endpoint: Option<String>,
    /// The table's name.
    #[arg(long, env = "TABLE_NAME", default_value = singlet_shared::schema::DEFAULT_TABLE_NAME, global = true, value_parser = parse_table_name)]
    pub table: String,
    /// Where the runner's own token-signing key is made on first use.
    #[arg(long, default_value = ".singlet", global = true)]
    pub key_dir: PathBuf,
    /// `human` lines or `json` objects on standard error; `auto`: human on a terminal.
    #[arg(long, value_enum, default_value_t = LogFormat::Auto, global = true)]
    pub log_format: LogFormat,
    /// The events file: every published event, one line of JSON each, as an EventBridge rule
    /// target receives it (serving, and `invoke publish-events`).
    #[arg(long, default_value = ".singlet/events.jsonl", global = true)]
    pub events_out: PathBuf,
    /// How long a returned loan stays in its patron's history, in days, before it expires
    /// (the template's `LoanHistoryDays`).
    #[arg(long, default_value_t = singlet_functions::context::DEFAULT_LOAN_HISTORY_DAYS,
          value_parser = parse_loan_history_days, global = true)]
    pub loan_history_days: i64,
    /// The archive of what TTL deleted: one file per deleted item, named by its stream record's
    /// `eventID`, each one line of the export format (serving, and `invoke publish-events`).
    #[arg(long, default_value = ".singlet/archive", global = true)]
    pub archive_dir: PathBuf,
    /// DynamoDB's per-key limits on the embedded engine (1,000 write and 3,000 read units a
    /// second per partition key value, of the table and each index), for every client.
    #[arg(long, value_enum, default_value = "on", global = true)]
    pub partition_limits: singlet::serve::partition_limits::Switch,
}

pub fn parse_clock(raw: &str) -> Result<time::OffsetDateTime, String> {
    singlet_functions::clock::settable(raw)
}

fn parse_loan_history_days(raw: &str) -> Result<i64, String> {
    singlet_functions::context::parse_loan_history_days(raw)
}

/// A name DynamoDB takes for a table: 3 to 255 letters, digits, `_`, `-` and `.`, or a table's
/// ARN (`arn:aws:dynamodb:<region>:<account>:table/<name>`, another account's table on an
/// external endpoint); told before any engine is opened, not as the engine's validation error.
fn parse_table_name(raw: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    // arn:<partition>:dynamodb:<region>:<12-digit account>:table/<name>
    let name = match raw.split(':').collect::<Vec<_>>()[..] {
        ["arn", partition, "dynamodb", region, account, resource]
            if partition.starts_with("aws")
                && !region.is_empty()
                && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit()) =>
        {
            resource.strip_prefix("table/").unwrap_or_default()
        }
        _ => raw,
    };
    if (3..=255).contains(&name.len()) && name.chars().all(allowed) {
        Ok(raw.to_owned())
    } else {
        Err(format!(
            "{raw:?} is not a table name: 3 to 255 letters, digits, _, - and . (or a table's ARN)"
        ))
    }
}

/// What a command that could not run exits with (clap's usage errors too); `1` is left to a
/// command that ran and has something to report.
pub const COULD_NOT_RUN: u8 = 2;

/// `--poll` of `export --s3` and `load --s3`: seconds, more than 0 and at most an hour.
pub fn parse_poll(raw: &str) -> Result<f64, String> {
    match raw.parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 3600.0 => Ok(seconds),
        _ => Err(format!(
            "{raw:?} is not a poll interval: seconds, more than 0 and at most 3600"
        )),
    }
}

/// `--max-wcu`, when given, is a positive number: told before any engine is opened.
pub fn check_max_wcu(max_wcu: Option<f64>) -> Result<(), String> {
    if max_wcu.is_some_and(|max| max.is_nan() || max <= 0.0) {
        return Err("--max-wcu must be more than 0".into());
    }
    Ok(())
}

/// `--max-key-wcu` is a number of units a second above 0.
pub fn check_max_key_wcu(max: f64) -> Result<(), String> {
    if max.is_nan() || max <= 0.0 {
        return Err("--max-key-wcu must be more than 0".into());
    }
    Ok(())
}
