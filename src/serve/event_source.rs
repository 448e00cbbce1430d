//! The event-source mapping from the table's stream to `publish-events`, played by the runner as
//! Lambda plays it on AWS, with the values `template.yaml` declares
//! (`singlet_functions::events::mapping`; a test keeps the two equal):
//!
//! - it reads the stream (`aws-sdk-dynamodbstreams` against the engine's own endpoint), drops the
//!   records no filter pattern matches, and hands the others to the publisher in batches of at
//!   most `BATCH_SIZE`, as the Lambda event `{"Records": [...]}`; like Lambda's poller it reads
//!   on with the iterator each read returns, and seeks from the checkpoint only after a failure;
//! - a batch answered with `batchItemFailures` is done up to the lowest failed sequence number
//!   (the checkpoint, [`checkpoint`]), and goes again from there; a failed invocation goes again
//!   whole;
//! - a batch that fails again is split in two (`BisectBatchOnFunctionError`), each half tried on
//!   its own, so one bad record ends alone; a record that still fails after
//!   `MAXIMUM_RETRY_ATTEMPTS` retries, or is older than `MAXIMUM_RECORD_AGE_SECONDS`, goes to the
//!   on-failure destination (a JSON Lines file, `.singlet/events-failed.jsonl`), as Lambda's
//!   invocation record, and the records after it are still delivered.
//!
//! Like Lambda's, its checkpoint outlives the process: with [`EventSource::remember_in`] the
//! last sequence number delivered is kept in a file (`.singlet/stream-position.json` beside the
//! engine's data), so a restarted runner goes on where it stopped instead of publishing the whole
//! stream again.
//!
//! [`Faults`] breaks it on purpose: a publisher error every n-th invocation, every n-th batch
//! delivered twice (the bus's failing entries are `LocalBus::failing`).

use crate::serve::published_outbox::Published;
use crate::serve::unstreamed_outbox::Unstreamed;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodbstreams::error::SdkError;
use aws_sdk_dynamodbstreams::operation::get_records::{GetRecordsError, GetRecordsOutput};
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, Shard, ShardIteratorType};
use base64::Engine as _;
use serde_json::{Map, Value, json};
use singlet_functions::Ctx;
use singlet_functions::events::archive::TTL_PRINCIPAL;
use singlet_functions::events::mapping::{
    BATCH_SIZE, BISECT_BATCH_ON_FUNCTION_ERROR, MAXIMUM_RECORD_AGE_SECONDS, MAXIMUM_RETRY_ATTEMPTS,
    passes_filters,
};
use singlet_functions::routes::{Streamed, streamed};
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// How often the stream is read when it had nothing new: Lambda reads a shard four times a
/// second.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// Faults on demand, for the tests and for anyone who wants to watch the rules at work.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Every n-th invocation of the publisher fails as a whole (0: never).
    pub publisher_error_every: u64,
    /// Every n-th batch is delivered twice (0: never).
    pub duplicate_batch_every: u64,
}

/// What the mapping has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// `GetShardIterator` requests: one at the start, then one after each read or delivery
    /// that failed.
    pub seeks: u64,
    pub records_read: u64,
    /// Records the filter patterns let through.
    pub records_delivered: u64,
    pub invocations: u64,
    pub failed_invocations: u64,
    pub duplicated_batches: u64,
    /// Records sent to the on-failure destination.
    pub records_failed: u64,
    /// Outbox items the table held before its stream was on, delivered as the records they
    /// would have been.
    pub records_unstreamed: u64,
}

pub struct EventSource {
    streams: aws_sdk_dynamodbstreams::Client,
    ctx: Ctx,
    publisher: &'static Streamed,
    stream_arn: String,
    /// The shard being read.
    shard_id: String,
    /// The last sequence number read in that shard and delivered: the checkpoint, from which
    /// a read starts again after a failure.
    position: Option<String>,
    /// Where the next read starts: the `NextShardIterator` the last read returned. Each
    /// `GetShardIterator` is a request of its own under the engine's lock, so, like Lambda's
    /// poller, the mapping seeks from the checkpoint only when it has no iterator: at the
    /// start, after a read or a delivery that failed, and after the iterator expired or
    /// pointed into trimmed records.
    iterator: Option<String>,
    /// The children of shards read to their end, read one after another once the shard being
    /// read has ended too.
    next_shards: VecDeque<String>,
    on_failure: PathBuf,
    faults: Faults,
    batches: u64,
    /// Where the checkpoint is kept between runs, if anywhere.
    position_file: Option<PathBuf>,
    /// The outbox items the table held before its stream was on, delivered before the stream's
    /// records.
    unstreamed: Option<Unstreamed>,
    /// The outbox items published already (by this runner or an earlier one on this table),
    /// never delivered again ([`crate::serve::published_outbox`]).
    published: Published,
    /// How long [`Self::run`] waits after a read that found nothing new.
    poll_every: Duration,
    pub report: Report,
}

/// The checkpoint as the position file holds it: for which stream and shard, and the last
/// sequence number delivered there.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Position {
    stream_arn: String,
    shard_id: String,
    sequence_number: String,
}

/// Enables the table's stream (`NEW_AND_OLD_IMAGES`, as the template does) unless it is on. A
/// stream switched on starts empty: the outbox items written before are the runner's to publish
/// ([`crate::serve::unstreamed_outbox`], listed before this is called).
pub async fn enable_stream(db: &aws_sdk_dynamodb::Client, table: &str) -> Result<(), String> {
    let described = db
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| format!("cannot describe the table: {e}"))?;
    let enabled = described
        .table()
        .and_then(|t| t.stream_specification())
        .is_some_and(|s| s.stream_enabled());
    if enabled {
        return Ok(());
    }
    db.update_table()
        .table_name(table)
        .stream_specification(singlet_functions::table::stream_specification())
        .send()
        .await
        .map_err(|e| format!("cannot enable the table's stream: {e}"))?;
    Ok(())
}

impl EventSource {
    /// The mapping for `ctx`'s table (its stream enabled first), publishing with `ctx`'s bus and
    /// sending what fails for good to `on_failure`.
    pub async fn start(
        ctx: Ctx,
        streams: aws_sdk_dynamodbstreams::Client,
        on_failure: PathBuf,
        faults: Faults,
    ) -> Result<Self, String> {
        enable_stream(&ctx.db, &ctx.table).await?;
        let listed = streams
            .list_streams()
            .table_name(&*ctx.table)
            .send()
            .await
            .map_err(|e| format!("cannot list the table's streams: {e}"))?;
        let stream_arn = listed
            .streams()
            .last()
            .and_then(|s| s.stream_arn())
            .ok_or("the table has no stream")?
            .to_owned();
        // The oldest shard the stream keeps (the one whose parent it no longer lists), read from
        // its start as a new mapping with `StartingPosition: TRIM_HORIZON` reads it; its
        // descendants follow as each one ends ([`Self::shard_ended`]).
        let shards = describe_shards(&streams, &stream_arn).await?;
        let shard_id = shards
            .iter()
            .find(|s| {
                s.parent_shard_id()
                    .is_none_or(|parent| !shards.iter().any(|p| p.shard_id() == Some(parent)))
            })
            .and_then(|s| s.shard_id())
            .ok_or("the table's stream has no shard")?
            .to_owned();
        if let Some(dir) = on_failure.parent().filter(|d| !d.as_os_str().is_empty()) {
            singlet_tools::files::create_private_dir(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        Ok(Self {
            streams,
            ctx,
            publisher: streamed("publish-events").expect("publish-events is a stream function"),
            stream_arn,
            shard_id,
            position: None,
            iterator: None,
            next_shards: VecDeque::new(),
            on_failure,
            faults,
            batches: 0,
            position_file: None,
            unstreamed: None,
            published: Published::none(),
            poll_every: POLL_EVERY,
            report: Report::default(),
        })
    }

    /// The same mapping, keeping its checkpoint in `file` and starting from the one it holds
    /// when that names this stream (another table's or an earlier engine's stream is read from
    /// its start, as a new mapping would), in the shard it names. A file that cannot be read as
    /// a checkpoint is said so and ignored.
    pub fn remember_in(mut self, file: PathBuf) -> Self {
        match std::fs::read(&file) {
            Ok(bytes) => match serde_json::from_slice::<Position>(&bytes) {
                Ok(kept) if kept.stream_arn == self.stream_arn => {
                    self.shard_id = kept.shard_id;
                    self.position = Some(kept.sequence_number);
                }
                Ok(_) => tracing::info!(
                    file = %file.display(),
                    "the kept stream position is another stream's: reading this one from its start"
                ),
                Err(error) => tracing::warn!(
                    file = %file.display(),
                    %error,
                    "the kept stream position is unreadable: reading the stream from its start"
                ),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(file = %file.display(), %error, "cannot read the kept stream position")
            }
        }
        self.position_file = Some(file);
        self
    }

    /// The same mapping, waiting `every` after a read that found nothing new (instead of
    /// [`POLL_EVERY`]): for an engine whose `GetRecords` takes longer the longer its stream is
    /// (moto's), where reads four times a second slow every other call.
    pub fn polling_every(mut self, every: Duration) -> Self {
        self.poll_every = every;
        self
    }

    /// The same mapping, delivering `unstreamed` (the outbox items the table held before its
    /// stream was on) before it reads the stream.
    pub fn first_delivering(mut self, unstreamed: Option<Unstreamed>) -> Self {
        self.unstreamed = unstreamed;
        self
    }

    /// The same mapping, delivering no outbox item `published` holds, and writing there each it
    /// delivers.
    pub fn publishing_once(mut self, published: Published) -> Self {
        self.published = published;
        self
    }

    /// Delivers `batch`, and writes its outbox items down as published.
    async fn deliver_once(&mut self, batch: Vec<Value>) -> Result<(), String> {
        let now = self.ctx.clock.now().unix_timestamp();
        self.deliver(batch.clone()).await?;
        self.published.add(&batch, now)
    }

    /// Delivers the outbox items listed before the stream was on, a batch at a time, each
    /// counted once delivered; gone once all were.
    async fn deliver_unstreamed(&mut self) -> Result<(), String> {
        while let Some(unstreamed) = &self.unstreamed {
            let mut batch = unstreamed.next_batch(BATCH_SIZE);
            if batch.is_empty() {
                break;
            }
            for record in &mut batch {
                record["eventSourceARN"] = json!(self.stream_arn);
            }
            let count = batch.len();
            self.report.records_unstreamed += count as u64;
            self.deliver_once(batch).await?;
            if let Some(unstreamed) = &mut self.unstreamed {
                unstreamed.delivered(count)?;
            }
        }
        if self.unstreamed.take().is_some() {
            tracing::info!("published the outbox items the table held before its stream was on");
        }
        Ok(())
    }

    /// Keeps the checkpoint in the position file, replaced whole (written aside, then renamed),
    /// so a runner killed mid-write finds the previous one.
    fn keep_position(&self) -> Result<(), String> {
        let (Some(file), Some(sequence)) = (&self.position_file, &self.position) else {
            return Ok(());
        };
        let position = Position {
            stream_arn: self.stream_arn.clone(),
            shard_id: self.shard_id.clone(),
            sequence_number: sequence.clone(),
        };
        let aside = file.with_extension("json.partial");
        let json = serde_json::to_vec(&position).expect("a position is JSON");
        // Private like everything else the runner keeps beside its data (`--data` may name a
        // file outside `.singlet/`).
        singlet_tools::files::write_private_file(&aside, json)
            .and_then(|()| std::fs::rename(&aside, file))
            .map_err(|e| format!("cannot keep the stream position in {}: {e}", file.display()))
    }

    /// Plays the mapping for ever: delivers the outbox items the table held before its stream
    /// was on, then reads the stream, delivers, and waits [`POLL_EVERY`] (or what
    /// [`Self::polling_every`] says) when there was nothing new. An engine that does not answer
    /// is logged and read again.
    pub async fn run(mut self) {
        while let Err(error) = self.deliver_unstreamed().await {
            tracing::warn!(
                error,
                "cannot publish the outbox items written before the stream; trying again"
            );
            tokio::time::sleep(self.poll_every * 4).await;
        }
        loop {
            match self.poll().await {
                Ok(0) => tokio::time::sleep(self.poll_every).await,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(error, "cannot read the table's stream; trying again");
                    tokio::time::sleep(self.poll_every * 4).await;
                }
            }
        }
    }

    /// Delivers the outbox items the table held before its stream was on, then reads and
    /// delivers until the stream has nothing new.
    pub async fn drain(&mut self) -> Result<Report, String> {
        self.deliver_unstreamed().await?;
        while self.poll().await? > 0 {}
        Ok(self.report)
    }

    /// One read of the stream, its records delivered: how many records it read.
    pub async fn poll(&mut self) -> Result<usize, String> {
        loop {
            let (read, moved_on) = self.read_shard().await?;
            // A shard that ended on an empty read hands over to its child at once, so that a
            // drain does not stop at the boundary.
            if read > 0 || !moved_on {
                return Ok(read);
            }
        }
    }

    /// One read of the shard being read, its records delivered: how many records it read, and
    /// whether the shard ended and the mapping moved on to its child.
    async fn read_shard(&mut self) -> Result<(usize, bool), String> {
        let output = match self.iterator.take() {
            Some(kept) => match self.read(kept).await {
                // Lambda's rule for an iterator that can no longer be read: seek again from
                // the checkpoint (the records past it are still there, or trimmed for good).
                Err(error)
                    if error.as_service_error().is_some_and(|e| {
                        e.is_expired_iterator_exception() || e.is_trimmed_data_access_exception()
                    }) =>
                {
                    let error = crate::serve::engine::cause_chain(&error);
                    tracing::info!(
                        error,
                        "the stream iterator can no longer be read: seeking from the checkpoint"
                    );
                    let sought = self.seek().await?;
                    self.read(sought).await
                }
                read => read,
            },
            None => {
                let sought = self.seek().await?;
                self.read(sought).await
            }
        }
        .map_err(|e| {
            format!(
                "GetRecords failed: {}",
                crate::serve::engine::cause_chain(&e)
            )
        })?;
        let records = output.records.unwrap_or_default();
        let read = records.len();
        self.report.records_read += read as u64;
        let delivered: Vec<Value> = records
            .iter()
            .map(|record| lambda_record(record, &self.stream_arn))
            .filter(passes_filters)
            // A stream switched on again may hold the old one's records (dynoxide's does).
            .filter(|record| !self.published.holds(record))
            .collect();
        self.report.records_delivered += delivered.len() as u64;
        // A delivery that fails returns here with no iterator kept and the checkpoint where it
        // was, so the next poll reads these records again, as Lambda does.
        for batch in delivered.chunks(BATCH_SIZE) {
            self.deliver_once(batch.to_vec()).await?;
        }
        if let Some(last) = records
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|d| d.sequence_number())
        {
            self.position = Some(last.to_owned());
            self.keep_position()?;
        }
        let moved_on = match output.next_shard_iterator {
            Some(next) => {
                self.iterator = Some(next);
                false
            }
            None => self.shard_ended().await?,
        };
        Ok((read, moved_on))
    }

    /// A `GetShardIterator` from the checkpoint: after the last sequence number delivered, or
    /// the shard's start when none was. A checkpoint whose records were trimmed (older than the
    /// stream keeps) is read from the oldest record left, as Lambda does; what lay between is
    /// lost to every reader.
    async fn seek(&mut self) -> Result<String, String> {
        self.report.seeks += 1;
        let request = |kind: ShardIteratorType, after: Option<&String>| {
            self.streams
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(&self.shard_id)
                .shard_iterator_type(kind)
                .set_sequence_number(after.cloned())
                .send()
        };
        let sought = match &self.position {
            Some(after) => match request(ShardIteratorType::AfterSequenceNumber, Some(after)).await
            {
                Err(error)
                    if error
                        .as_service_error()
                        .is_some_and(|e| e.is_trimmed_data_access_exception()) =>
                {
                    tracing::warn!(
                        shard = self.shard_id,
                        after = %after,
                        "the stream no longer keeps the records after the checkpoint: reading from its oldest"
                    );
                    request(ShardIteratorType::TrimHorizon, None).await
                }
                sought => sought,
            },
            None => request(ShardIteratorType::TrimHorizon, None).await,
        };
        sought
            .map_err(|e| {
                format!(
                    "GetShardIterator failed: {}",
                    crate::serve::engine::cause_chain(&e)
                )
            })?
            .shard_iterator
            .ok_or_else(|| "the stream gave no shard iterator".to_owned())
    }

    /// One `GetRecords` at `iterator` (at most 1,000 records, the API's maximum).
    async fn read(&self, iterator: String) -> Result<GetRecordsOutput, SdkError<GetRecordsError>> {
        self.streams
            .get_records()
            .shard_iterator(iterator)
            .send()
            .await
    }

    /// The shard was read to its end (`GetRecords` gave no `NextShardIterator`): the mapping
    /// goes on with its children, from their start, as Lambda does. A child not yet listed is
    /// looked for again at the next poll. The embedded engine never gets here: dynoxide (3.2)
    /// keeps one shard per table for ever (`streams::shard_id`, "one shard per table in
    /// simplified model"; its `DescribeStream` lists that one shard with no ending sequence
    /// number, and its `GetRecords` always answers a `NextShardIterator`), so the tests play a
    /// split through a proxy (`a_shard_that_ends_hands_over_to_its_child`). An external engine's
    /// or AWS's shards end and split; two children of one shard are read one after the other
    /// here, where Lambda reads them side by side.
    async fn shard_ended(&mut self) -> Result<bool, String> {
        if self.next_shards.is_empty() {
            let shards = describe_shards(&self.streams, &self.stream_arn).await?;
            let mut children: Vec<String> = shards
                .iter()
                .filter(|s| s.parent_shard_id() == Some(self.shard_id.as_str()))
                .filter_map(|s| s.shard_id().map(str::to_owned))
                .collect();
            children.sort();
            self.next_shards.extend(children);
        }
        let Some(child) = self.next_shards.pop_front() else {
            tracing::info!(
                shard = self.shard_id,
                "the stream's shard ended and has no child yet"
            );
            return Ok(false);
        };
        tracing::info!(
            ended = self.shard_id,
            next = child,
            "the stream's shard ended: reading its child"
        );
        self.shard_id = child;
        self.position = None;
        Ok(true)
    }

    /// One batch, by Lambda's rules: the checkpoint on partial failures, bisection, the retry
    /// count, the record age, the on-failure destination.
    async fn deliver(&mut self, batch: Vec<Value>) -> Result<(), String> {
        self.batches += 1;
        let duplicate = self.faults.duplicate_batch_every > 0
            && self
                .batches
                .is_multiple_of(self.faults.duplicate_batch_every);
        if duplicate {
            self.report.duplicated_batches += 1;
            self.invoke(&batch).await;
        }
        let mut queue: VecDeque<(Vec<Value>, u32)> = VecDeque::from([(batch, 0)]);
        while let Some((batch, retries)) = queue.pop_front() {
            let now = self.ctx.clock.now().unix_timestamp();
            let (expired, batch): (Vec<Value>, Vec<Value>) =
                batch.into_iter().partition(|record| too_old(record, now));
            if !expired.is_empty() {
                self.send_to_on_failure(&expired, "RecordAgeExceeded")?;
            }
            if batch.is_empty() {
                continue;
            }
            let from = match self.invoke(&batch).await {
                Some(response) => checkpoint(&batch, &response),
                None => Some(0),
            };
            let Some(from) = from else { continue };
            let rest = batch[from..].to_vec();
            if BISECT_BATCH_ON_FUNCTION_ERROR && rest.len() > 1 {
                let (first, second) = rest.split_at(rest.len() / 2);
                queue.push_front((second.to_vec(), retries));
                queue.push_front((first.to_vec(), retries));
            } else if retries >= MAXIMUM_RETRY_ATTEMPTS {
                self.send_to_on_failure(&rest, "RetryAttemptsExhausted")?;
            } else {
                queue.push_front((rest, retries + 1));
            }
        }
        Ok(())
    }

    /// One invocation of the publisher: its response, or `None` when it failed.
    async fn invoke(&mut self, batch: &[Value]) -> Option<DynamoDbEventResponse> {
        self.report.invocations += 1;
        let fail = self.faults.publisher_error_every > 0
            && self
                .report
                .invocations
                .is_multiple_of(self.faults.publisher_error_every);
        let outcome = if fail {
            Err("a publisher error, on purpose (--fault-publisher-error-every)".to_owned())
        } else {
            let event = json!({ "Records": batch });
            let function = self.publisher.function;
            crate::serve::iam::serving(function, (self.publisher.handler)(&self.ctx, event, None))
                .await
                .and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))
        };
        match outcome {
            Ok(response) => Some(response),
            Err(error) => {
                self.report.failed_invocations += 1;
                tracing::warn!(error, records = batch.len(), "publish-events failed");
                None
            }
        }
    }

    /// Lambda's on-failure invocation record for `batch` (which records, not what they hold),
    /// one line of the on-failure file.
    fn send_to_on_failure(&mut self, batch: &[Value], condition: &str) -> Result<(), String> {
        self.report.records_failed += batch.len() as u64;
        let sequence = |r: &Value| r["dynamodb"]["SequenceNumber"].clone();
        let arrival = |r: &Value| r["dynamodb"]["ApproximateCreationDateTime"].clone();
        let (first, last) = (&batch[0], &batch[batch.len() - 1]);
        let line = json!({
            "requestContext": {
                "condition": condition,
                "functionArn": "publish-events",
                "approximateInvokeCount": MAXIMUM_RETRY_ATTEMPTS + 1,
            },
            "timestamp": singlet_functions::clock::iso(singlet_functions::clock::now()),
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": sequence(first),
                "endSequenceNumber": sequence(last),
                "approximateArrivalOfFirstRecord": arrival(first),
                "approximateArrivalOfLastRecord": arrival(last),
                "batchSize": batch.len(),
                "streamArn": self.stream_arn,
            },
        });
        tracing::error!(
            condition,
            records = batch.len(),
            start = %sequence(first),
            "stream records sent to the on-failure destination"
        );
        // The records hold whole entities: the file is opened as the events file is.
        let mut file = singlet_tools::files::open_private_append(&self.on_failure)
            .map_err(|e| format!("cannot open {}: {e}", self.on_failure.display()))?;
        writeln!(file, "{line}").map_err(|e| format!("cannot append to the on-failure file: {e}"))
    }
}

/// Every shard `DescribeStream` lists for `stream_arn`, all its pages.
async fn describe_shards(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
) -> Result<Vec<Shard>, String> {
    let mut shards = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let described = streams
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(after.take())
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot describe the table's stream: {}",
                    crate::serve::engine::cause_chain(&e)
                )
            })?;
        let Some(description) = described.stream_description() else {
            return Ok(shards);
        };
        shards.extend_from_slice(description.shards());
        match description.last_evaluated_shard_id() {
            Some(last) => after = Some(last.to_owned()),
            None => return Ok(shards),
        }
    }
}

/// Fault: an outbox item whose `detail` is not an event, as a bug or a hand edit could leave.
/// The publisher reports it, the mapping retries it `MAXIMUM_RETRY_ATTEMPTS` times and then
/// sends it to the on-failure destination; the records after it are still delivered. Returns
/// its key's partition.
pub async fn write_undecodable_outbox_item(ctx: &Ctx) -> Result<String, String> {
    use singlet_functions::events::outbox::KEEP_SECONDS;
    use singlet_functions::model::outbox::OutboxItem;
    let id = format!("undecodable-{}", singlet_functions::clock::now_millis());
    let key = singlet_shared::keys::outbox("fault", &id, &id);
    // An outbox item in every way but its `detail`, which is no event.
    let fault = OutboxItem {
        key: key.clone(),
        source: "singlet.fault".into(),
        detail_type: "Undecodable".into(),
        detail: "this is not an event".into(),
        expires_at: singlet_functions::clock::now().unix_timestamp() + KEEP_SECONDS,
    };
    ctx.put_record(&fault)
        .await
        .map_err(|e| format!("cannot write the undecodable outbox item: {e:?}"))?;
    tracing::warn!(pk = %key.pk, "wrote an undecodable outbox item, on purpose");
    Ok(key.pk)
}

/// Lambda's checkpoint rule: the index of the lowest failed sequence number in `batch`, from
/// which it goes again; `None` when nothing failed. A failure naming no record of the batch
/// (empty, or unknown) fails the whole batch.
pub fn checkpoint(batch: &[Value], response: &DynamoDbEventResponse) -> Option<usize> {
    let mut lowest: Option<usize> = None;
    for failure in &response.batch_item_failures {
        let found = failure.item_identifier.as_deref().and_then(|id| {
            batch
                .iter()
                .position(|r| r["dynamodb"]["SequenceNumber"].as_str() == Some(id))
        });
        let Some(index) = found else { return Some(0) };
        lowest = Some(lowest.map_or(index, |l| l.min(index)));
    }
    lowest
}

/// Whether `record` is older than the mapping's maximum record age at `now` (epoch seconds, by
/// the runner's clock, which is the engine's: a test that moves the one moves the other).
fn too_old(record: &Value, now: i64) -> bool {
    let created = record["dynamodb"]["ApproximateCreationDateTime"]
        .as_f64()
        .unwrap_or_default();
    now as f64 - created > MAXIMUM_RECORD_AGE_SECONDS as f64
}

/// A stream record as Lambda's DynamoDB event holds it.
pub fn lambda_record(record: &Record, stream_arn: &str) -> Value {
    let change = record.dynamodb();
    let mut dynamodb = Map::new();
    if let Some(change) = change {
        if let Some(at) = change.approximate_creation_date_time() {
            dynamodb.insert(
                "ApproximateCreationDateTime".into(),
                json!(at.as_secs_f64().floor()),
            );
        }
        for (name, image) in [
            ("Keys", change.keys()),
            ("NewImage", change.new_image()),
            ("OldImage", change.old_image()),
        ] {
            if let Some(image) = image {
                dynamodb.insert(name.into(), item_json(image));
            }
        }
        dynamodb.insert("SequenceNumber".into(), json!(change.sequence_number()));
        dynamodb.insert("SizeBytes".into(), json!(change.size_bytes()));
        if let Some(view) = change.stream_view_type() {
            dynamodb.insert("StreamViewType".into(), json!(view.as_str()));
        }
    }
    let mut event = json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(|n| n.as_str()),
        "eventVersion": record.event_version().unwrap_or("1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region().unwrap_or("local"),
        "eventSourceARN": stream_arn,
        "dynamodb": dynamodb,
    });
    if let Some(identity) = record.user_identity() {
        // dynoxide (3.2) writes a TTL deletion's identity in the Lambda event's casing
        // (`{"type": …, "principalId": …}`) where the DynamoDB Streams API, and so the SDK, reads
        // `{"Type": …, "PrincipalId": …}`: the SDK sees an identity with neither field. Only TTL
        // sets one, in dynoxide as in DynamoDB, so a missing field is read as TTL's, as
        // dynoxide's own reader of that column does.
        event["userIdentity"] = json!({
            "type": identity.r#type().unwrap_or("Service"),
            "principalId": identity.principal_id().unwrap_or(TTL_PRINCIPAL),
        });
    }
    event
}

fn item_json(item: &std::collections::HashMap<String, AttributeValue>) -> Value {
    Value::Object(
        item.iter()
            .map(|(name, value)| (name.clone(), value_json(value)))
            .collect(),
    )
}

/// An attribute value in DynamoDB's JSON, as a stream event carries it.
fn value_json(value: &AttributeValue) -> Value {
    let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": base64(b.as_ref()) }),
        AttributeValue::Ss(ss) => json!({ "SS": ss }),
        AttributeValue::Ns(ns) => json!({ "NS": ns }),
        AttributeValue::Bs(bs) => {
            json!({ "BS": bs.iter().map(|b| base64(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::M(m) => json!({ "M": item_json(m) }),
        AttributeValue::L(l) => json!({ "L": l.iter().map(value_json).collect::<Vec<_>>() }),
        AttributeValue::Null(n) => json!({ "NULL": n }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::streams::DynamoDbBatchItemFailure;

    fn batch(sequences: std::ops::RangeInclusive<u32>) -> Vec<Value> {
        sequences
            .map(|s| json!({"dynamodb": {"SequenceNumber": s.to_string()}}))
            .collect()
    }

    fn failures(ids: &[&str]) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        for id in ids {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = (!id.is_empty()).then(|| (*id).to_owned());
            response.batch_item_failures.push(failure);
        }
        response
    }

    #[test]
    fn failures_at_7_and_4_redeliver_from_4() {
        let batch = batch(1..=10);
        let from = checkpoint(&batch, &failures(&["7", "4"])).unwrap();
        assert_eq!(batch[from]["dynamodb"]["SequenceNumber"], "4");
    }

    #[test]
    fn no_failure_is_done_and_an_unknown_one_fails_the_batch() {
        let batch = batch(1..=10);
        assert_eq!(checkpoint(&batch, &failures(&[])), None);
        assert_eq!(checkpoint(&batch, &failures(&["99"])), Some(0));
        assert_eq!(checkpoint(&batch, &failures(&[""])), Some(0));
    }
}
