//! `publish-events`: the function the table's stream feeds. It decodes each record
//! ([`crate::events::stream`]), sends the events with `PutEvents` in batches of at most
//! [`MAX_ENTRIES`], sends again the entries that failed (`FailedEntryCount`,
//! `Entries[].ErrorCode`) up to [`ENTRY_ATTEMPTS`] times, and answers `batchItemFailures`
//! naming the first record it could not publish.
//!
//! Lambda's checkpoint is the lowest failed sequence number: every record from it on comes again.
//! So the publisher stops at its first failure (publishing what follows would only be sent twice)
//! and reports that one record. Order is kept: records are published in stream order, and a
//! `PutEvents` batch holds at most one event per subject, so an event is only sent once every
//! earlier event about its subject was accepted.
//!
//! A deletion by TTL of a retained item (a returned loan past `LoanHistoryDays`) carries no event:
//! the publisher archives the deleted item instead ([`crate::events::archive`]), in stream order
//! with the events, and a record it could not archive is the batch's failure like one it could not
//! publish.

use crate::context::Ctx;
use crate::events::Entry;
use crate::events::archive::{self, Archive};
use crate::events::bus::Bus;
use crate::events::stream::{Decoded, decode};
use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use std::time::{Duration, SystemTime};
use tracing::{info, warn};

/// `PutEvents` takes at most 10 entries.
pub const MAX_ENTRIES: usize = 10;
/// ... and at most 256 KB in all (each entry counted as its source, detail type and detail).
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;
/// Attempts at an entry that keeps failing before its record is reported as failed.
pub const ENTRY_ATTEMPTS: u32 = 3;

/// The function: the DynamoDB stream event in, the partial batch response out. An event that is
/// not a stream event, or a context with no bus, fails the invocation.
pub async fn run(
    ctx: &Ctx,
    event: serde_json::Value,
    _deadline: Option<SystemTime>,
) -> Result<serde_json::Value, String> {
    let event: Event = serde_json::from_value(event)
        .map_err(|e| format!("the event is not a DynamoDB stream event: {e}"))?;
    let bus = ctx
        .bus
        .as_deref()
        .ok_or("EVENT_BUS_NAME is not set: the publisher has no bus")?;
    let response = publish(bus, ctx.archive.as_deref(), &event.records).await;
    Ok(serde_json::to_value(response).expect("a batch response serialises"))
}

/// What one batch of records published (and archived), and the first record it could not.
/// Without an archive (a publisher deployed without `ARCHIVE_BUCKET`), TTL deletions are skipped
/// as every other record without an event is.
pub async fn publish(
    bus: &dyn Bus,
    archive: Option<&dyn Archive>,
    records: &[EventRecord],
) -> DynamoDbEventResponse {
    let mut pending: Vec<(&str, Entry)> = Vec::new();
    let mut undecodable = None;
    let mut archived = 0;
    for record in records {
        let sequence = sequence_number(record);
        if let (Some(archive), Some(object)) = (archive, archive::archived(record)) {
            if let Err(error) = archive.put(&object.key, &object.body).await {
                warn!(sequence, error, "a TTL deletion cannot be archived");
                undecodable = Some(sequence);
                break;
            }
            archived += 1;
            continue;
        }
        match decode(record) {
            Decoded::Publish(entry) => pending.push((sequence, entry)),
            Decoded::Skip => {}
            Decoded::Undecodable(reason) => {
                warn!(sequence, reason, "a stream record cannot be published");
                undecodable = Some(sequence);
                break;
            }
        }
    }
    let mut published = 0;
    for batch in batches(&pending) {
        let entries: Vec<Entry> = batch.iter().map(|(_, entry)| entry.clone()).collect();
        if let Some(failed) = put_with_retries(bus, &entries).await {
            info!(published, "published events, then stopped at a failure");
            return failure(batch[failed].0);
        }
        published += entries.len();
    }
    info!(
        published,
        archived,
        records = records.len(),
        "published events"
    );
    match undecodable {
        Some(sequence) => failure(sequence),
        None => DynamoDbEventResponse::default(),
    }
}

/// Consecutive runs of at most [`MAX_ENTRIES`] entries and [`MAX_REQUEST_BYTES`], with at most
/// one entry per subject in each.
pub fn batches<T>(entries: &[(T, Entry)]) -> Vec<&[(T, Entry)]> {
    let mut batches: Vec<&[(T, Entry)]> = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, (_, entry)) in entries.iter().enumerate() {
        let size = entry.source.len() + entry.detail_type.len() + entry.detail.len();
        let current = &entries[start..i];
        let full = current.len() == MAX_ENTRIES
            || bytes + size > MAX_REQUEST_BYTES
            || current.iter().any(|(_, e)| e.subject == entry.subject);
        if full && !current.is_empty() {
            batches.push(current);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < entries.len() {
        batches.push(&entries[start..]);
    }
    batches
}

/// Sends `entries`, then again those that failed, up to [`ENTRY_ATTEMPTS`] times; the index of
/// the first entry still failing, if any.
async fn put_with_retries(bus: &dyn Bus, entries: &[Entry]) -> Option<usize> {
    let mut failing: Vec<usize> = (0..entries.len()).collect();
    for attempt in 1..=ENTRY_ATTEMPTS {
        let sent: Vec<Entry> = failing.iter().map(|&i| entries[i].clone()).collect();
        match bus.put_events(&sent).await {
            Ok(outcomes) => {
                let mut still = Vec::new();
                for (&i, outcome) in failing.iter().zip(outcomes) {
                    if let Some(code) = outcome {
                        // The event id and the code only: a detail can hold personal data.
                        warn!(event_id = %entries[i].event_id, code, attempt, "PutEvents refused an entry");
                        still.push(i);
                    }
                }
                failing = still;
            }
            Err(error) => warn!(error, attempt, "PutEvents failed"),
        }
        if failing.is_empty() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
    }
    failing.first().copied()
}

fn sequence_number(record: &EventRecord) -> &str {
    record.change.sequence_number.as_deref().unwrap_or_default()
}

fn failure(sequence: &str) -> DynamoDbEventResponse {
    let mut failed = DynamoDbBatchItemFailure::default();
    failed.item_identifier = Some(sequence.to_owned());
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures.push(failed);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(subject: &str, bytes: usize) -> ((), Entry) {
        (
            (),
            Entry {
                source: String::new(),
                detail_type: String::new(),
                detail: "x".repeat(bytes),
                event_id: String::new(),
                subject: subject.to_owned(),
            },
        )
    }

    #[test]
    fn a_batch_holds_ten_entries_at_most() {
        let entries: Vec<_> = (0..25).map(|i| entry(&format!("s{i}"), 10)).collect();
        let sizes: Vec<usize> = batches(&entries).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [10, 10, 5]);
    }

    #[test]
    fn a_batch_holds_one_event_per_subject() {
        let entries = [entry("a", 1), entry("b", 1), entry("a", 1), entry("c", 1)];
        let sizes: Vec<usize> = batches(&entries).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 2]);
    }

    #[test]
    fn a_batch_stays_under_256_kb() {
        let entries = [
            entry("a", 200 * 1024),
            entry("b", 100 * 1024),
            entry("c", 1),
        ];
        let sizes: Vec<usize> = batches(&entries).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [1, 2]);
    }
}
