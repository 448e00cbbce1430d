//! `export --s3` and `load --s3`: the table copied by DynamoDB's own engines, not scanned from
//! the operator's machine (docs/API.md, "The tools on AWS"; docs/guide/tools-on-aws.md).
//!
//! - [`export_to_s3`] starts `ExportTableToPointInTime` (a full export in DynamoDB JSON, the
//!   format `export <dir>` writes, consistent at one point in time; the table must have
//!   point-in-time recovery on, as the stack's has) and follows it with `DescribeExport` to its
//!   end.
//! - [`import_from_s3`] starts `ImportTable` into a new table, with the table's definition from
//!   the model (`singlet_functions::table::definition`, what `ensure_table` creates), follows it
//!   with `DescribeImport`, then does what `ImportTable` cannot ([`finish_import`]): deletes the
//!   outbox items the export held, and only then switches the stream and TTL on.
//!
//! Both start with a `ClientToken` made from what they were asked ([`client_token`]): the SDK
//! sends the same token on each of its own retries, and the same command run again within
//! DynamoDB's eight-hour idempotency window (say after the laptop lost its connection) follows
//! the export or import it started instead of starting a second one.
//!
//! An error (`Err`) is a run that could not start or could not be followed (a bad URL, no such
//! table, access denied, a describe that kept failing): the CLI's exit `2`. An export or import
//! that ran and ended `FAILED` or `CANCELLED` is a report, not an error: the CLI's exit `1`.

use crate::progress::Progress;
use crate::throttle::Throttle;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::primitives::{DateTime, DateTimeFormat};
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, ExportDescription, ExportFormat, ExportStatus, ExportType,
    ImportStatus, ImportTableDescription, InputCompressionType, InputFormat,
    ReturnConsumedCapacity, S3BucketSource, StreamViewType, TableCreationParameters, TableStatus,
    TimeToLiveStatus,
};
use futures::StreamExt;
use serde::Serialize;
use singlet_functions::store::pace::{HottestKey, KeyRef};
use singlet_shared::keys::{EVENT_PREFIX, OUTBOX_PREFIX};
use singlet_shared::schema::{ENTITY_TYPE, PK, SK, TTL_ATTRIBUTE};
use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

// ---- Where in S3 ------------------------------------------------------------------------------

/// An `s3://<bucket>/<prefix>` URL, checked before any call is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// The key prefix, without a leading or trailing `/`; empty for the bucket's root.
    pub prefix: String,
}

/// The longest `S3Prefix` `ExportTableToPointInTime` takes.
const MAX_PREFIX_BYTES: usize = 1024;

impl S3Location {
    /// `url` as a bucket and a prefix, or why it is not one: the scheme is `s3://`, the bucket a
    /// name DynamoDB takes (3 to 255 letters, digits, `.`, `-` and `_`, starting and ending with
    /// a letter or a digit: `ExportTableToPointInTime`'s own pattern), the prefix at most 1,024
    /// bytes with no empty, `.` or `..` part and no control character.
    pub fn parse(url: &str) -> Result<Self, String> {
        let bad =
            |why: &str| format!("{url:?} is not an S3 URL such as s3://my-bucket/exports: {why}");
        let Some(rest) = url.strip_prefix("s3://") else {
            return Err(bad("it does not start with s3://"));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("it names no bucket"));
        }
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
        if !(3..=255).contains(&bucket.len())
            || !bucket
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
            || !edge(bucket.chars().next())
            || !edge(bucket.chars().last())
        {
            return Err(bad(&format!(
                "{bucket:?} is not a bucket name (3 to 255 letters, digits, '.', '-' and '_', \
                 starting and ending with a letter or a digit)"
            )));
        }
        let prefix = prefix.trim_end_matches('/');
        if prefix.len() > MAX_PREFIX_BYTES {
            return Err(bad(&format!(
                "the prefix is {} bytes, more than DynamoDB's {MAX_PREFIX_BYTES}",
                prefix.len()
            )));
        }
        if prefix.chars().any(char::is_control) {
            return Err(bad("the prefix holds a control character"));
        }
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(bad("the prefix has an empty, '.' or '..' part"));
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// The key of `rest` under the prefix.
    pub fn key(&self, rest: &str) -> String {
        match self.prefix.as_str() {
            "" => rest.to_owned(),
            prefix => format!("{prefix}/{rest}"),
        }
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "s3://{}", self.bucket),
            prefix => write!(f, "s3://{}/{prefix}", self.bucket),
        }
    }
}

pub use crate::transfer::EXPORTS_FOLDER;

/// What `load --s3` takes: an export's prefix, and the export when the URL names it
/// (`s3://<bucket>/<prefix>/AWSDynamoDB/<exportId>`, with `/data`, `/manifest-summary.json` or
/// `/manifest-files.json` after it allowed, as copied from the console or `export --s3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSource {
    /// The prefix the export was asked to write under.
    pub location: S3Location,
    pub export_id: Option<String>,
}

impl ExportSource {
    pub fn parse(url: &str) -> Result<Self, String> {
        let location = S3Location::parse(url)?;
        let parts: Vec<&str> = match location.prefix.as_str() {
            "" => Vec::new(),
            prefix => prefix.split('/').collect(),
        };
        let Some(at) = parts.iter().rposition(|part| *part == EXPORTS_FOLDER) else {
            return Ok(Self {
                location,
                export_id: None,
            });
        };
        let bad = |why: &str| format!("{url:?} does not name an export: {why}");
        let id = parts.get(at + 1).ok_or_else(|| {
            bad("AWSDynamoDB/ is followed by no export id (s3://<bucket>/<prefix>/AWSDynamoDB/<exportId>)")
        })?;
        if !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(bad(&format!("{id:?} is not an export id")));
        }
        match parts[at + 2..] {
            [] | ["data"] | ["manifest-summary.json"] | ["manifest-files.json"] => {}
            _ => {
                return Err(bad(
                    "only data/, manifest-summary.json or manifest-files.json may follow the export id",
                ));
            }
        }
        Ok(Self {
            location: S3Location {
                bucket: location.bucket.clone(),
                prefix: parts[..at].join("/"),
            },
            export_id: Some((*id).to_owned()),
        })
    }
}

impl fmt::Display for ExportSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.export_id {
            None => write!(f, "{}", self.location),
            Some(id) => write!(
                f,
                "s3://{}/{}",
                self.location.bucket,
                self.location.key(&format!("{EXPORTS_FOLDER}/{id}"))
            ),
        }
    }
}

// ---- Tokens, errors, following ----------------------------------------------------------------

/// The `ClientToken` for a start of `kind` asked with `parts`: the same question, the same
/// token. DynamoDB applies a start once per token for eight hours after it completes
/// (`ClientToken` in the API reference of `ExportTableToPointInTime` and `ImportTable`), so a
/// start sent again, by the SDK's retries or by the operator running the command again, is
/// not applied twice. 32 hexadecimal digits of a SHA-256.
pub fn client_token(kind: &str, parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"singlet ");
    hash.update(kind.as_bytes());
    for part in parts {
        hash.update([0]);
        hash.update(part.as_bytes());
    }
    hash.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// How a run follows its export or import.
#[derive(Debug, Clone)]
pub struct Follow {
    /// Between two describes. DynamoDB's own console refreshes every few seconds; an export or
    /// import takes minutes at least.
    pub poll: Duration,
    /// Progress on standard error.
    pub shown: bool,
    /// How many describes in a row may fail with a transient error (a throttle, a `5xx`, a
    /// timeout), each after the SDK's own retries, before the run stops following: the export
    /// or import goes on in DynamoDB either way, and the same command follows it again.
    pub describe_failures: u32,
}

impl Default for Follow {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(10),
            shown: true,
            describe_failures: 10,
        }
    }
}

/// Why `what` could not be done, with DynamoDB's answer, and a hint for the answers an operator
/// can act on.
fn could_not<E, R>(what: &str, error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: fmt::Debug,
{
    let hint = match error.code() {
        Some("AccessDeniedException" | "UnrecognizedClientException") => {
            " (the credentials may not do it: docs/guide/tools-on-aws.md lists the IAM \
             permissions each command needs)"
        }
        Some("PointInTimeRecoveryUnavailableException") => {
            " (the table's point-in-time recovery is off: the stack's table has it on; for \
             another table, `aws dynamodb update-continuous-backups --table-name <table> \
             --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true`)"
        }
        Some("IdempotentParameterMismatchException" | "IdempotentParameterMismatch") => {
            " (the same start was asked within the last eight hours with other parameters: \
             wait, or change the prefix or table name)"
        }
        _ => "",
    };
    format!("cannot {what}{hint}: {}", DisplayErrorContext(error))
}

/// Whether `error` is worth asking again later: a throttle, a server error, a timeout, a
/// connection lost. The SDK has retried it already.
fn transient<E>(error: &SdkError<E, aws_sdk_dynamodb::config::http::HttpResponse>) -> bool
where
    E: ProvideErrorMetadata,
{
    match error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            service.raw().status().is_server_error()
                || matches!(
                    service.err().code(),
                    Some(
                        "ThrottlingException"
                            | "ProvisionedThroughputExceededException"
                            | "RequestLimitExceeded"
                            | "LimitExceededException"
                            | "InternalServerError"
                            | "ServiceUnavailable"
                    )
                )
        }
        _ => false,
    }
}

/// Whether a job DynamoDB answered a start with began before this run asked: more than a
/// minute ago (DynamoDB's clock and this machine's may differ by seconds).
fn before_this_run(start: &DateTime) -> bool {
    start.secs() + 60 < DateTime::from(std::time::SystemTime::now()).secs()
}

/// `time` as RFC 3339, for the reports.
fn rfc3339(time: Option<&DateTime>) -> Option<String> {
    time.and_then(|t| t.fmt(DateTimeFormat::DateTime).ok())
}

fn minutes_and_seconds(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    format!("{}m{:02}s", seconds / 60, seconds % 60)
}

/// The last part of an export's or import's ARN (`…/export/<id>`, `…/import/<id>`).
fn id_of(arn: &str) -> String {
    arn.rsplit('/').next().unwrap_or(arn).to_owned()
}

// ---- Export -----------------------------------------------------------------------------------

/// What [`export_to_s3`] saw at the export's end. `--json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    /// `COMPLETED` or `FAILED`.
    pub status: String,
    pub export_arn: String,
    pub export_id: String,
    pub table_arn: String,
    /// The point in time the export holds the table at.
    pub export_time: Option<String>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    /// The export's own folder, what `load --s3` takes: `s3://<bucket>/<prefix>/AWSDynamoDB/<id>`.
    pub export: String,
    /// Its `manifest-summary.json`.
    pub manifest: String,
    pub items: Option<i64>,
    /// The bytes DynamoDB bills the export by (the table's size at the export time).
    pub billed_bytes: Option<i64>,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    /// Whether this run followed an export an earlier run of the same command started (the
    /// same `ClientToken` within eight hours), rather than starting one: DynamoDB answered the
    /// start with an export that had ended, or that began more than a minute before. One that
    /// failed is answered again for those eight hours: another prefix starts another.
    pub started_earlier: bool,
}

impl ExportReport {
    pub fn completed(&self) -> bool {
        self.status == ExportStatus::Completed.as_str()
    }
}

/// The ARN of `table`, from `DescribeTable`; a table that is not there is said so.
async fn table_arn(client: &Client, table: &str) -> Result<String, String> {
    match client.describe_table().table_name(table).send().await {
        Ok(described) => described
            .table()
            .and_then(|t| t.table_arn())
            .map(str::to_owned)
            .ok_or_else(|| format!("DescribeTable gave no ARN for {table}")),
        Err(error) if error.code() == Some("ResourceNotFoundException") => Err(format!(
            "there is no table {table} to export (in this account and region): `--table` names it"
        )),
        Err(error) => Err(could_not(&format!("describe the table {table}"), &error)),
    }
}

/// Starts a full export of `table` to `to` in DynamoDB JSON, as `ExportTableToPointInTime`
/// writes it, and follows it to its end.
pub async fn export_to_s3(
    client: &Client,
    table: &str,
    to: &S3Location,
    follow: &Follow,
) -> Result<ExportReport, String> {
    let table_arn = table_arn(client, table).await?;
    let token = client_token("export", &[&table_arn, &to.bucket, &to.prefix]);
    let asked = Instant::now();
    let started = client
        .export_table_to_point_in_time()
        .table_arn(&table_arn)
        .s3_bucket(&to.bucket)
        .set_s3_prefix((!to.prefix.is_empty()).then(|| to.prefix.clone()))
        .export_format(ExportFormat::DynamodbJson)
        .export_type(ExportType::FullExport)
        .client_token(&token)
        .send()
        .await
        .map_err(|e| could_not(&format!("start the export of {table} to {to}"), &e))?;
    let mut description = started
        .export_description
        .ok_or("ExportTableToPointInTime answered no ExportDescription")?;
    let arn = description
        .export_arn()
        .ok_or("ExportTableToPointInTime answered no ExportArn")?
        .to_owned();
    // An export started before this run: DynamoDB gave back the one this token started, ended
    // already, or started more than a minute ago.
    let started_earlier = description.export_status() != Some(&ExportStatus::InProgress)
        || description.start_time().is_some_and(before_this_run);
    let progress = Progress::new(follow.shown);
    if follow.shown {
        progress.finish(&format!(
            "{} the export of {table} to {to}: {arn}",
            if started_earlier {
                "following (the same command started it earlier)"
            } else {
                "started"
            }
        ));
    }
    let mut failures = 0;
    while description.export_status() == Some(&ExportStatus::InProgress) {
        progress.count(|| {
            format!(
                "export {}: in progress for {}",
                id_of(&arn),
                minutes_and_seconds(asked.elapsed())
            )
        });
        tokio::time::sleep(follow.poll).await;
        match client.describe_export().export_arn(&arn).send().await {
            Ok(described) => {
                failures = 0;
                description = described
                    .export_description
                    .ok_or("DescribeExport answered no ExportDescription")?;
            }
            Err(error) if transient(&error) && failures + 1 < follow.describe_failures => {
                failures += 1;
            }
            Err(error) => {
                progress.interrupt();
                return Err(format!(
                    "{}; the export goes on in DynamoDB: the same command follows it again \
                     (within eight hours), or `aws dynamodb describe-export --export-arn {arn}`",
                    could_not("follow the export", &error)
                ));
            }
        }
    }
    let report = export_report(&description, &arn, &table_arn, to, started_earlier);
    progress.finish(&format!(
        "export {}: {} after {}",
        report.export_id,
        report.status,
        minutes_and_seconds(asked.elapsed())
    ));
    Ok(report)
}

fn export_report(
    description: &ExportDescription,
    arn: &str,
    table_arn: &str,
    to: &S3Location,
    started_earlier: bool,
) -> ExportReport {
    let id = id_of(arn);
    let bucket = description.s3_bucket().unwrap_or(&to.bucket);
    let folder = to.key(&format!("{EXPORTS_FOLDER}/{id}"));
    let manifest = description
        .export_manifest()
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{folder}/manifest-summary.json"));
    ExportReport {
        status: description
            .export_status()
            .map_or("UNKNOWN", |s| s.as_str())
            .to_owned(),
        export_arn: arn.to_owned(),
        export_id: id,
        table_arn: table_arn.to_owned(),
        export_time: rfc3339(description.export_time()),
        start_time: rfc3339(description.start_time()),
        end_time: rfc3339(description.end_time()),
        export: format!("s3://{bucket}/{folder}"),
        manifest: format!("s3://{bucket}/{manifest}"),
        items: description.item_count(),
        billed_bytes: description.billed_size_bytes(),
        failure_code: description.failure_code().map(str::to_owned),
        failure_message: description.failure_message().map(str::to_owned),
        started_earlier,
    }
}

// ---- Import -----------------------------------------------------------------------------------

/// The export an import reads, as found among the account's exports.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundExport {
    pub export_id: String,
    /// Where its data files are: `ImportTable` reads every object under this prefix, so it is
    /// the export's `data/` folder, not its manifests.
    pub data_prefix: String,
    /// The items the export holds, when DynamoDB still describes it (it lists the exports of
    /// the last 90 days, of this account and region).
    pub items: Option<i64>,
    pub export_time: Option<String>,
}

/// Finds the export `source` names among this account's exports (`ListExports`, then
/// `DescribeExport` of each that could be it): the one its id names, or, without one, the one
/// completed export under its prefix. An export the account does not describe (older than 90
/// days, or another account's) is taken by its id alone, its item count unknown.
pub async fn find_export(client: &Client, source: &ExportSource) -> Result<FoundExport, String> {
    let location = &source.location;
    let data_prefix = |id: &str| location.key(&format!("{EXPORTS_FOLDER}/{id}/data/"));
    let mut candidates: Vec<ExportDescription> = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let page = client
            .list_exports()
            .set_next_token(next.take())
            .send()
            .await
            .map_err(|e| could_not("list this account's exports", &e))?;
        for summary in page.export_summaries() {
            let Some(arn) = summary.export_arn() else {
                continue;
            };
            let wanted = match &source.export_id {
                Some(id) => id_of(arn) == *id,
                None => {
                    summary.export_status() == Some(&ExportStatus::Completed)
                        && summary.export_type() != Some(&ExportType::IncrementalExport)
                }
            };
            if !wanted {
                continue;
            }
            let described = client
                .describe_export()
                .export_arn(arn)
                .send()
                .await
                .map_err(|e| could_not(&format!("describe the export {arn}"), &e))?;
            if let Some(description) = described.export_description {
                let prefix = description.s3_prefix().unwrap_or("").trim_matches('/');
                if description.s3_bucket() == Some(location.bucket.as_str())
                    && prefix == location.prefix
                {
                    candidates.push(description);
                } else if source.export_id.is_some() {
                    return Err(format!(
                        "the export {} is in s3://{}/{prefix}, not {}: name it there",
                        id_of(arn),
                        description.s3_bucket().unwrap_or("?"),
                        location
                    ));
                }
            }
        }
        next = page.next_token.filter(|t| !t.is_empty());
        if next.is_none() {
            break;
        }
    }
    if let Some(id) = &source.export_id {
        let Some(description) = candidates.pop() else {
            return Ok(FoundExport {
                export_id: id.clone(),
                data_prefix: data_prefix(id),
                items: None,
                export_time: None,
            });
        };
        return loadable(&description).map(|()| FoundExport {
            export_id: id.clone(),
            data_prefix: data_prefix(id),
            items: description.item_count(),
            export_time: rfc3339(description.export_time()),
        });
    }
    match candidates.len() {
        0 => Err(format!(
            "no completed export of this account and region is under {location}: name the \
             export, s3://{}/{}",
            location.bucket,
            location.key(&format!("{EXPORTS_FOLDER}/<exportId>"))
        )),
        1 => {
            let description = candidates.pop().expect("one");
            loadable(&description)?;
            let id = id_of(description.export_arn().unwrap_or_default());
            Ok(FoundExport {
                data_prefix: data_prefix(&id),
                export_id: id,
                items: description.item_count(),
                export_time: rfc3339(description.export_time()),
            })
        }
        _ => {
            candidates.sort_by_key(|d| std::cmp::Reverse(d.export_time().map(|t| t.secs())));
            let listed: Vec<String> = candidates
                .iter()
                .map(|d| {
                    format!(
                        "{} (at {}, {} items)",
                        id_of(d.export_arn().unwrap_or_default()),
                        rfc3339(d.export_time()).unwrap_or_default(),
                        d.item_count().unwrap_or_default()
                    )
                })
                .collect();
            Err(format!(
                "{} completed exports are under {location}, newest first: {}; name one, \
                 s3://{}/{}",
                candidates.len(),
                listed.join(", "),
                location.bucket,
                location.key(&format!("{EXPORTS_FOLDER}/<exportId>"))
            ))
        }
    }
}

/// Whether an export can be imported as a copy of the table: completed, full, DynamoDB JSON.
fn loadable(description: &ExportDescription) -> Result<(), String> {
    let id = id_of(description.export_arn().unwrap_or_default());
    if description.export_status() != Some(&ExportStatus::Completed) {
        return Err(format!(
            "the export {id} is {}, not COMPLETED: there is nothing whole to load",
            description
                .export_status()
                .map_or("UNKNOWN", |s| s.as_str())
        ));
    }
    if description.export_type() == Some(&ExportType::IncrementalExport) {
        return Err(format!(
            "the export {id} is incremental (changes over a period), not the table"
        ));
    }
    if description
        .export_format()
        .is_some_and(|f| *f != ExportFormat::DynamodbJson)
    {
        return Err(format!(
            "the export {id} is in {}, not DYNAMODB_JSON",
            description.export_format().map_or("?", |f| f.as_str())
        ));
    }
    Ok(())
}

/// What [`import_from_s3`] asks of a run.
#[derive(Debug, Clone)]
pub struct ImportSettings {
    pub follow: Follow,
    /// The write units a second the outbox items' deletes may take ([`delete_outbox`]).
    pub max_wcu: f64,
    /// The write units a second they may take of any one partition key value.
    pub max_key_wcu: f64,
    /// Parallel scan segments for finding the outbox items.
    pub segments: u32,
}

impl Default for ImportSettings {
    fn default() -> Self {
        Self {
            follow: Follow::default(),
            max_wcu: 1_000.0,
            max_key_wcu: singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU,
            segments: 8,
        }
    }
}

/// What [`import_from_s3`] saw and did. `--json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// `COMPLETED`, `FAILED` or `CANCELLED`.
    pub status: String,
    pub import_arn: String,
    pub table: String,
    pub table_arn: Option<String>,
    pub export_id: String,
    /// What `ImportTable` read: `s3://<bucket>/<prefix>/AWSDynamoDB/<id>/data/`.
    pub source: String,
    /// The items the export holds, when DynamoDB describes the export.
    pub export_items: Option<i64>,
    pub imported_items: i64,
    pub processed_items: i64,
    pub processed_bytes: Option<i64>,
    /// Lines `ImportTable` could not import: each is in the import's CloudWatch log group.
    pub errors: i64,
    pub log_group: Option<String>,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    /// Whether this run followed an import an earlier run of the same command started (found by
    /// its `ClientToken` on the existing table, or answered by DynamoDB to the start). One that
    /// failed or was cancelled is answered again for eight hours: another table name starts
    /// another.
    pub started_earlier: bool,
    /// What was done after the import (`None` unless it completed).
    pub finished: Option<Finished>,
}

impl ImportReport {
    /// Completed with every item of the export in the table: nothing failed, and as many
    /// imported as the export holds (when that is known).
    pub fn whole(&self) -> bool {
        self.status == ImportStatus::Completed.as_str()
            && self.errors == 0
            && self
                .export_items
                .is_none_or(|items| items == self.imported_items)
    }
}

/// What [`finish_import`] did to the imported table.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finished {
    /// Outbox items deleted before the stream was on.
    pub outbox_deleted: u64,
    /// The key those deletes wrote most in any one second (`hottestKey`, as every bulk tool
    /// reports it).
    pub hottest_key: Option<HottestKey>,
    /// Whether this run switched the stream on (`false`: it was on already, a run resumed).
    pub stream_switched_on: bool,
    pub ttl_switched_on: bool,
}

/// Whether `table` exists: its description, or `None`.
async fn describe_table(
    client: &Client,
    table: &str,
) -> Result<Option<aws_sdk_dynamodb::types::TableDescription>, String> {
    match client.describe_table().table_name(table).send().await {
        Ok(described) => Ok(described.table),
        Err(error) if error.code() == Some("ResourceNotFoundException") => Ok(None),
        Err(error) => Err(could_not(&format!("describe the table {table}"), &error)),
    }
}

/// The import of `table` this run's token started, if an earlier run did (`ListImports` of the
/// table, `DescribeImport` of each).
async fn own_import(
    client: &Client,
    table_arn: &str,
    token: &str,
) -> Result<Option<ImportTableDescription>, String> {
    let mut next: Option<String> = None;
    loop {
        let page = client
            .list_imports()
            .table_arn(table_arn)
            .set_next_token(next.take())
            .send()
            .await
            .map_err(|e| could_not("list the table's imports", &e))?;
        for summary in page.import_summary_list() {
            let Some(arn) = summary.import_arn() else {
                continue;
            };
            let described = client
                .describe_import()
                .import_arn(arn)
                .send()
                .await
                .map_err(|e| could_not(&format!("describe the import {arn}"), &e))?;
            if let Some(description) = described.import_table_description
                && description.client_token() == Some(token)
            {
                return Ok(Some(description));
            }
        }
        next = page.next_token.filter(|t| !t.is_empty());
        if next.is_none() {
            return Ok(None);
        }
    }
}

/// The `TableCreationParameters` of a copy named `table`: the table's definition from the model
/// (`singlet_functions::table::definition`, what `ensure_table` creates and the template
/// declares), on demand as the template's. `ImportTable` takes no stream or TTL:
/// [`finish_import`] switches them on.
pub fn table_creation_parameters(table: &str) -> TableCreationParameters {
    let definition = singlet_functions::table::definition();
    TableCreationParameters::builder()
        .table_name(table)
        .set_attribute_definitions(Some(definition.attribute_definitions))
        .set_key_schema(Some(definition.key_schema))
        .set_global_secondary_indexes(Some(definition.global_secondary_indexes))
        .billing_mode(BillingMode::PayPerRequest)
        .build()
        .expect("complete")
}

/// Imports the export `source` names into a new table `table` with `ImportTable`, follows it,
/// and once it completed, [`finish_import`]s the table. A table of that name that exists is
/// refused, unless this run's own earlier import made it (the same command run again): then
/// that import is followed and finished.
pub async fn import_from_s3(
    client: &Client,
    table: &str,
    source: &ExportSource,
    settings: &ImportSettings,
) -> Result<ImportReport, String> {
    let follow = &settings.follow;
    let export = find_export(client, source).await?;
    let bucket = &source.location.bucket;
    let parameters = table_creation_parameters(table);
    let token = client_token(
        "import",
        &[
            table,
            bucket,
            &export.data_prefix,
            &format!("{parameters:?}"),
        ],
    );
    let progress = Progress::new(follow.shown);
    let asked = Instant::now();
    let (mut description, started_earlier) = match describe_table(client, table).await? {
        None => {
            let started = client
                .import_table()
                .client_token(&token)
                .s3_bucket_source(
                    S3BucketSource::builder()
                        .s3_bucket(bucket)
                        .s3_key_prefix(&export.data_prefix)
                        .build()
                        .expect("complete"),
                )
                .input_format(InputFormat::DynamodbJson)
                .input_compression_type(InputCompressionType::Gzip)
                .table_creation_parameters(parameters)
                .send()
                .await
                .map_err(|e| {
                    could_not(
                        &format!(
                            "start the import of s3://{bucket}/{} into {table}",
                            export.data_prefix
                        ),
                        &e,
                    )
                })?;
            let description = started
                .import_table_description
                .ok_or("ImportTable answered no ImportTableDescription")?;
            let earlier = description.import_status() != Some(&ImportStatus::InProgress)
                || description.start_time().is_some_and(before_this_run);
            (description, earlier)
        }
        Some(existing) => {
            let arn = existing.table_arn().unwrap_or_default().to_owned();
            match own_import(client, &arn, &token).await? {
                Some(description) => (description, true),
                None => {
                    return Err(format!(
                        "the table {table} exists: load --s3 imports into a new table, which \
                         ImportTable creates; name another with --table (nothing was started)"
                    ));
                }
            }
        }
    };
    let arn = description
        .import_arn()
        .ok_or("ImportTable answered no ImportArn")?
        .to_owned();
    progress.finish(&format!(
        "{} the import of s3://{bucket}/{} into {table}: {arn}",
        if started_earlier {
            "following (the same command started it earlier)"
        } else {
            "started"
        },
        export.data_prefix
    ));
    let mut failures = 0;
    while matches!(
        description.import_status(),
        Some(ImportStatus::InProgress | ImportStatus::Cancelling)
    ) {
        progress.count(|| {
            let of = export
                .items
                .map_or(String::new(), |items| format!(" of {items}"));
            format!(
                "import {}: {} items processed{of}, {} imported, for {}",
                id_of(&arn),
                description.processed_item_count(),
                description.imported_item_count(),
                minutes_and_seconds(asked.elapsed())
            )
        });
        tokio::time::sleep(follow.poll).await;
        match client.describe_import().import_arn(&arn).send().await {
            Ok(described) => {
                failures = 0;
                description = described
                    .import_table_description
                    .ok_or("DescribeImport answered no ImportTableDescription")?;
            }
            Err(error) if transient(&error) && failures + 1 < follow.describe_failures => {
                failures += 1;
            }
            Err(error) => {
                progress.interrupt();
                return Err(format!(
                    "{}; the import goes on in DynamoDB: the same command follows it again and \
                     finishes the table (stream, TTL, outbox), or \
                     `aws dynamodb describe-import --import-arn {arn}`",
                    could_not("follow the import", &error)
                ));
            }
        }
    }
    let status = description
        .import_status()
        .map_or("UNKNOWN", |s| s.as_str())
        .to_owned();
    progress.finish(&format!(
        "import {}: {status} after {}, {} items imported",
        id_of(&arn),
        minutes_and_seconds(asked.elapsed()),
        description.imported_item_count()
    ));
    let finished = match description.import_status() {
        Some(ImportStatus::Completed) => Some(finish_import(client, table, settings).await?),
        _ => None,
    };
    Ok(ImportReport {
        status,
        import_arn: arn,
        table: table.to_owned(),
        table_arn: description.table_arn().map(str::to_owned),
        export_id: export.export_id,
        source: format!("s3://{bucket}/{}", export.data_prefix),
        export_items: export.items,
        imported_items: description.imported_item_count(),
        processed_items: description.processed_item_count(),
        processed_bytes: description.processed_size_bytes(),
        errors: description.error_count(),
        log_group: description.cloud_watch_log_group_arn().map(str::to_owned),
        failure_code: description.failure_code().map(str::to_owned),
        failure_message: description.failure_message().map(str::to_owned),
        started_earlier,
        finished,
    })
}

/// What `ImportTable` cannot set, done on the imported `table`: its outbox items deleted
/// ([`delete_outbox`]), then its stream switched on (`NEW_AND_OLD_IMAGES`, as the template
/// declares it and the publisher's mapping reads it) and its TTL (on `expiresAt`). In that
/// order: the deletes are made while no stream records them, and the stream, switched on after,
/// starts empty (DynamoDB records only the writes made after), so the copy publishes nothing its
/// original published. Each step looks first and does only what is not done, so a run stopped
/// part way and run again finishes the table.
pub async fn finish_import(
    client: &Client,
    table: &str,
    settings: &ImportSettings,
) -> Result<Finished, String> {
    let follow = &settings.follow;
    let progress = Progress::new(follow.shown);
    let described = until_active(client, table, follow).await?;
    let stream_on = described
        .stream_specification()
        .is_some_and(|s| s.stream_enabled());
    let deleted = delete_outbox(client, table, settings).await?;
    let outbox_deleted = deleted.items;
    progress.finish(&format!(
        "deleted {outbox_deleted} outbox items (events the exported table published)"
    ));
    let stream_switched_on = if stream_on {
        false
    } else {
        client
            .update_table()
            .table_name(table)
            .stream_specification(singlet_functions::table::stream_specification())
            .send()
            .await
            .map_err(|e| could_not(&format!("switch on {table}'s stream"), &e))?;
        until_active(client, table, follow).await?;
        progress.finish(&format!(
            "switched on {table}'s stream ({})",
            StreamViewType::from(singlet_functions::events::mapping::STREAM_VIEW_TYPE).as_str()
        ));
        true
    };
    let ttl = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(|e| could_not(&format!("describe {table}'s TTL"), &e))?;
    let ttl_on = ttl.time_to_live_description().is_some_and(|d| {
        matches!(
            d.time_to_live_status(),
            Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
        ) && d.attribute_name() == Some(TTL_ATTRIBUTE)
    });
    let ttl_switched_on = if ttl_on {
        false
    } else {
        client
            .update_time_to_live()
            .table_name(table)
            .time_to_live_specification(singlet_functions::table::time_to_live())
            .send()
            .await
            .map_err(|e| could_not(&format!("switch on {table}'s TTL"), &e))?;
        progress.finish(&format!("switched on {table}'s TTL on {TTL_ATTRIBUTE}"));
        true
    };
    Ok(Finished {
        outbox_deleted,
        hottest_key: deleted.hottest_key,
        stream_switched_on,
        ttl_switched_on,
    })
}

/// `table`'s description once it and its indexes are `ACTIVE`.
async fn until_active(
    client: &Client,
    table: &str,
    follow: &Follow,
) -> Result<aws_sdk_dynamodb::types::TableDescription, String> {
    loop {
        let described = describe_table(client, table)
            .await?
            .ok_or_else(|| format!("the table {table} is gone"))?;
        let active = described.table_status() == Some(&TableStatus::Active)
            && described.global_secondary_indexes().iter().all(|index| {
                index
                    .index_status()
                    .is_none_or(|s| s.as_str() == TableStatus::Active.as_str())
            });
        if active {
            return Ok(described);
        }
        tokio::time::sleep(follow.poll).await;
    }
}

/// What marks an outbox item, as `load`'s `is_outbox` knows one: its `_et`, or, without one,
/// its key's shape (`OUTBOX#…` / `EVENT#…`). Both the scan's filter and each delete's
/// condition.
const OUTBOX_ITEM: &str = "#et = :outbox OR (attribute_not_exists(#et) AND begins_with(#pk, :outboxPrefix) AND begins_with(#sk, :eventPrefix))";

fn outbox_names() -> HashMap<String, String> {
    HashMap::from([
        ("#et".to_owned(), ENTITY_TYPE.to_owned()),
        ("#pk".to_owned(), PK.to_owned()),
        ("#sk".to_owned(), SK.to_owned()),
    ])
}

fn outbox_values() -> HashMap<String, AttributeValue> {
    use singlet_functions::model::{Entity, outbox::OutboxItem};
    HashMap::from([
        (
            ":outbox".to_owned(),
            AttributeValue::S(OutboxItem::TYPE.name.to_owned()),
        ),
        (
            ":outboxPrefix".to_owned(),
            AttributeValue::S(OUTBOX_PREFIX.to_owned()),
        ),
        (
            ":eventPrefix".to_owned(),
            AttributeValue::S(EVENT_PREFIX.to_owned()),
        ),
    ])
}

/// Deletes every outbox item of `table`: a parallel `Scan` filtered to them (their keys only),
/// each found one deleted with a `DeleteItem` conditioned on its still being an outbox item,
/// under `max_wcu` write units a second. An item gone meanwhile (its TTL) is not counted.
/// Returns how many it deleted.
///
/// Why: `ImportTable` imports every item of the export, and the export holds the outbox items
/// of the events its table published (or was about to). `load <dir>` leaves them out; here
/// they are in the table when the import ends, so they go before the stream is on, and the copy
/// holds what `load <dir>` would have written.
pub async fn delete_outbox(
    client: &Client,
    table: &str,
    settings: &ImportSettings,
) -> Result<Deleted, String> {
    let throttle = Throttle::new(Some(settings.max_wcu)).with_max_key_wcu(settings.max_key_wcu);
    let deleted = std::sync::atomic::AtomicU64::new(0);
    let progress = Progress::new(settings.follow.shown);
    let segments = settings.segments.max(1);
    futures::future::try_join_all((0..segments).map(|segment| {
        let (throttle, deleted, progress) = (&throttle, &deleted, &progress);
        async move {
            let mut start = None;
            loop {
                let page = client
                    .scan()
                    .table_name(table)
                    .segment(segment as i32)
                    .total_segments(segments as i32)
                    .filter_expression(OUTBOX_ITEM)
                    .projection_expression("#pk, #sk")
                    .set_expression_attribute_names(Some(outbox_names()))
                    .set_expression_attribute_values(Some(outbox_values()))
                    .set_exclusive_start_key(start)
                    .send()
                    .await
                    .map_err(|e| could_not(&format!("scan {table} for outbox items"), &e))?;
                let keys = page.items.unwrap_or_default();
                futures::stream::iter(keys)
                    .map(|key| async move {
                        // An outbox item is in no index: its own partition key is all it writes.
                        let pk = key
                            .get(PK)
                            .and_then(|pk| pk.as_s().ok())
                            .cloned()
                            .unwrap_or_default();
                        let admission = throttle.admit_keys(1.0, &[(KeyRef::table(pk), 1.0)]).await;
                        let answer = client
                            .delete_item()
                            .table_name(table)
                            .set_key(Some(key))
                            .condition_expression(OUTBOX_ITEM)
                            .set_expression_attribute_names(Some(outbox_names()))
                            .set_expression_attribute_values(Some(outbox_values()))
                            .return_consumed_capacity(ReturnConsumedCapacity::Total)
                            .send()
                            .await;
                        match answer {
                            Ok(output) => {
                                let units = output
                                    .consumed_capacity()
                                    .and_then(|c| c.capacity_units())
                                    .unwrap_or(1.0);
                                throttle.settle(admission, units);
                                let total =
                                    deleted.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                                progress.count(|| format!("deleted {total} outbox items"));
                                Ok(())
                            }
                            Err(error)
                                if error.code() == Some("ConditionalCheckFailedException") =>
                            {
                                throttle.settle(admission, 1.0);
                                Ok(())
                            }
                            Err(error) => Err(could_not(
                                &format!("delete an outbox item of {table}"),
                                &error,
                            )),
                        }
                    })
                    .buffer_unordered(16)
                    .collect::<Vec<Result<(), String>>>()
                    .await
                    .into_iter()
                    .collect::<Result<Vec<()>, String>>()?;
                match page.last_evaluated_key.filter(|key| !key.is_empty()) {
                    Some(key) => start = Some(key),
                    None => return Ok::<_, String>(()),
                }
            }
        }
    }))
    .await?;
    Ok(Deleted {
        items: deleted.load(std::sync::atomic::Ordering::Relaxed),
        hottest_key: throttle.hottest_key(),
    })
}

/// What [`delete_outbox`] deleted, and the key it wrote most in any one second.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub items: u64,
    pub hottest_key: Option<HottestKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_url_is_a_bucket_and_a_prefix() {
        let location = S3Location::parse("s3://my-bucket/exports/prod/").unwrap();
        assert_eq!(location.bucket, "my-bucket");
        assert_eq!(location.prefix, "exports/prod");
        assert_eq!(location.to_string(), "s3://my-bucket/exports/prod");
        assert_eq!(location.key("AWSDynamoDB"), "exports/prod/AWSDynamoDB");
        let root = S3Location::parse("s3://my-bucket").unwrap();
        assert_eq!(root.prefix, "");
        assert_eq!(root.key("AWSDynamoDB"), "AWSDynamoDB");
        assert_eq!(S3Location::parse("s3://my-bucket/").unwrap(), root);
    }

    #[test]
    fn a_bad_s3_url_is_refused_with_its_reason() {
        for (url, why) in [
            ("my-bucket/exports", "does not start with s3://"),
            (
                "https://my-bucket.s3.amazonaws.com/x",
                "does not start with s3://",
            ),
            ("s3:/my-bucket", "does not start with s3://"),
            ("s3://", "names no bucket"),
            ("s3:///exports", "names no bucket"),
            ("s3://ab/exports", "not a bucket name"),
            ("s3://-bucket/exports", "not a bucket name"),
            ("s3://bucket-/exports", "not a bucket name"),
            ("s3://my bucket/exports", "not a bucket name"),
            ("s3://my-bucket/a//b", "empty, '.' or '..' part"),
            ("s3://my-bucket/a/../b", "empty, '.' or '..' part"),
            ("s3://my-bucket/a\nb", "control character"),
        ] {
            let error = S3Location::parse(url).unwrap_err();
            assert!(error.contains(why), "{url}: {error}");
        }
        let long = format!("s3://my-bucket/{}", "a".repeat(1025));
        assert!(S3Location::parse(&long).unwrap_err().contains("1024"));
    }

    #[test]
    fn an_export_source_names_its_export_when_the_url_does() {
        let prefix = ExportSource::parse("s3://b-1/exports").unwrap();
        assert_eq!(prefix.export_id, None);
        assert_eq!(prefix.location.prefix, "exports");
        for url in [
            "s3://b-1/exports/AWSDynamoDB/01700000000000-abcd1234",
            "s3://b-1/exports/AWSDynamoDB/01700000000000-abcd1234/",
            "s3://b-1/exports/AWSDynamoDB/01700000000000-abcd1234/data/",
            "s3://b-1/exports/AWSDynamoDB/01700000000000-abcd1234/manifest-summary.json",
        ] {
            let source = ExportSource::parse(url).unwrap();
            assert_eq!(source.location.prefix, "exports", "{url}");
            assert_eq!(
                source.export_id.as_deref(),
                Some("01700000000000-abcd1234"),
                "{url}"
            );
            assert_eq!(
                source.to_string(),
                "s3://b-1/exports/AWSDynamoDB/01700000000000-abcd1234"
            );
        }
        let at_root = ExportSource::parse("s3://b-1/AWSDynamoDB/0170-ab").unwrap();
        assert_eq!(at_root.location.prefix, "");
        assert!(
            ExportSource::parse("s3://b-1/x/AWSDynamoDB")
                .unwrap_err()
                .contains("no export id")
        );
        assert!(
            ExportSource::parse("s3://b-1/x/AWSDynamoDB/0170-ab/data/x.json.gz")
                .unwrap_err()
                .contains("only data/")
        );
    }

    #[test]
    fn a_client_token_is_the_same_for_the_same_question_only() {
        let a = client_token("export", &["arn", "bucket", "prefix"]);
        assert_eq!(a, client_token("export", &["arn", "bucket", "prefix"]));
        assert_eq!(a.len(), 32);
        assert_ne!(a, client_token("export", &["arn", "bucket", "other"]));
        assert_ne!(a, client_token("import", &["arn", "bucket", "prefix"]));
        // Parts are kept apart: moving a character across them is another question.
        assert_ne!(
            client_token("export", &["ab", "c"]),
            client_token("export", &["a", "bc"])
        );
    }

    #[test]
    fn an_import_creates_the_table_the_model_defines() {
        let parameters = table_creation_parameters("copy");
        let definition = singlet_functions::table::definition();
        assert_eq!(parameters.table_name(), "copy");
        assert_eq!(parameters.key_schema(), definition.key_schema.as_slice());
        assert_eq!(
            parameters.attribute_definitions(),
            definition.attribute_definitions.as_slice()
        );
        assert_eq!(
            parameters.global_secondary_indexes(),
            definition.global_secondary_indexes.as_slice()
        );
        assert_eq!(parameters.billing_mode(), Some(&BillingMode::PayPerRequest));
    }
}
