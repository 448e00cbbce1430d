//! `mark-overdue`: the scheduled function (EventBridge, every 15 minutes) that moves every open
//! loan whose `dueDate` is before its "now" into the sparse overdue indexes (its branch's, GSI3,
//! and the library's, GSI4). Its "now" is the event's `time`, but never more than
//! [`CLOCK_SKEW`] ahead of its own clock: an event from the future (a replayed or forged one)
//! never marks a loan that is not due yet, and `asOf`, which only moves forward, never runs ahead
//! of the clock.
//!
//! For each open-loans shard, one `Query` on GSI1 (`GSI1PK = OPEN#nn AND GSI1SK < :now`, the sort
//! key being `<dueDate>#<checkoutId>`), paged; for each hit, one conditional `UpdateItem` that
//! removes the loan's GSI1 keys and sets its GSI3 and GSI4 keys, on the condition that it is
//! still in the open index with the due date that was read. So:
//! - a run costs the shards' (small, usually empty) queries plus the loans that fell due since the
//!   last run: a marked loan has left the open index and is never read again;
//! - a rerun, an overlapping run, or a run killed midway and repeated all end in the same state:
//!   an already-marked loan fails the condition and is skipped;
//! - a loan returned or renewed meanwhile (the index is eventually consistent) fails the condition
//!   and is never marked.
//!
//! A run that reaches the end records its "now" in `MARKER#mark-overdue` (one conditional
//! `UpdateItem` that only moves it forward): the overdue lists answer it as `asOf`. A run stopped
//! for its deadline records nothing. It stops starting new pages when its deadline nears, and logs
//! what it did.
//!
//! Every marked loan is one write into GSI4's one partition, `OVERDUE`: unpaced, a page's
//! hundred updates in flight at once put thousands of entries a second into that key, past
//! DynamoDB's 1,000 write units a second on one partition key value, and the index's
//! back-pressure would throttle the marker's writes and any return meanwhile. So each loan's
//! writes are admitted first by a [`Pacer`] that keeps every key they touch (the loan's, its
//! open-loans shard, its branch's overdue partition, `OVERDUE`) under
//! [`crate::store::pace::DEFAULT_MAX_KEY_WCU`] a second: 50,000 loans falling due at once take
//! about a minute, well inside the function's 15 minutes, and the run reports its
//! `hottestKey`. Pacing was chosen over sharding `OVERDUE` (docs/guide/capacity.md): it needs no
//! migration, and `find-all-overdue` stays one query in due-date order.

use super::Checkout;
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::report::RunReport;
use crate::store::pace::{HottestKey, KeyRef, Pacer};
use crate::store::{Query, decode};
use serde::{Deserialize, Serialize};
use singlet_shared::keys;
use singlet_shared::schema::GSI1;
use std::time::{Duration, SystemTime};
use time::OffsetDateTime;
use tracing::{error, info, warn};

/// Loans read per page of one shard.
/// Its function's name (`SINGLET_FUNCTION`, the route table's `SCHEDULED` entry).
pub const FUNCTION: &str = "mark-overdue";

pub const PAGE_SIZE: i32 = 100;
/// Stop starting pages when less than this is left before the deadline.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// The part of the EventBridge scheduled event the marker reads.
#[derive(Debug, Deserialize)]
pub struct ScheduledEvent {
    pub time: String,
}

/// What one run did.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub now: String,
    pub marked: u64,
    /// Loans the index still showed but that had been returned, renewed or marked meanwhile.
    pub skipped: u64,
    /// Items in the open-loans index that do not decode as a loan: logged by key and left
    /// where they are, so that one bad item never blocks the others.
    pub unreadable: u64,
    pub pages_read: u64,
    pub capacity_units: f64,
    /// False when the run stopped early for its deadline: the next run finishes the work.
    pub complete: bool,
    /// The key the run wrote most into in any one second (`OVERDUE` on GSI4 in a run of many).
    pub hottest_key: Option<HottestKey>,
}

/// How far ahead of the function's clock an event's time is believed: EventBridge's clock and
/// Lambda's differ by far less.
pub const CLOCK_SKEW: time::Duration = time::Duration::minutes(5);

/// The event's `time` as "now"; an error naming the event's time when it has no valid one.
pub fn event_time(event: &ScheduledEvent) -> Result<OffsetDateTime, String> {
    clock::parse_iso(&event.time)
        .ok_or_else(|| format!("the event's time {:?} is not ISO-8601", event.time))
}

/// The run's "now": the earlier of the event's time and the clock plus [`CLOCK_SKEW`].
pub fn run_time(event: OffsetDateTime, clock: OffsetDateTime) -> OffsetDateTime {
    event.min(clock + CLOCK_SKEW)
}

/// The scheduled function: "now" from the event's `time` ([`run_time`]), stopping [`DEADLINE_MARGIN`] before
/// the deadline when there is one. An error fails the invocation, which Lambda retries and then
/// sends to the function's on-failure destination.
pub async fn run(
    ctx: &Ctx,
    event: serde_json::Value,
    deadline: Option<SystemTime>,
) -> Result<Report, String> {
    let event: ScheduledEvent = serde_json::from_value(event)
        .map_err(|e| format!("the event is not an EventBridge scheduled event: {e}"))?;
    let now = run_time(event_time(&event)?, ctx.clock.now());
    if now < event_time(&event)? {
        warn!(event = event.time, now = %clock::iso(now), "the event's time is ahead of the clock; marking as of the clock");
    }
    let report = mark_overdue(ctx, now, PAGE_SIZE, || {
        deadline.is_none_or(|deadline| {
            deadline
                .duration_since(SystemTime::now())
                .is_ok_and(|left| left > DEADLINE_MARGIN)
        })
    })
    .await
    .map_err(|e| format!("mark-overdue failed: {e:?}"))?;
    Ok(report)
}

impl RunReport for Report {
    fn counts(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("LoansMarked", self.marked),
            // Index entries read but left alone: moved meanwhile, or unreadable.
            ("ItemsSkipped", self.skipped + self.unreadable),
            ("PagesRead", self.pages_read),
        ]
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("reports serialise")
    }
}

/// A run the table throttled past the SDK's retries (a hot index key: every loan marked lands
/// on its branch's and the library's overdue keys): back-pressure, not a failure. It stops as a
/// run stopped for its deadline does, incomplete; the loans it did not mark are still in the
/// open index, and the next run marks them.
fn throttled(mut report: Report, pacer: &Pacer) -> Report {
    report.hottest_key = pacer.hottest();
    warn!(
        ?report,
        "mark-overdue was throttled; it stops here and the next run goes on"
    );
    report
}

/// Marks every open loan due before `now`, at most [`crate::store::pace::DEFAULT_MAX_KEY_WCU`]
/// write units a second into any one key. `may_start_page` is asked before each page: the
/// Lambda stops for its deadline, a test stops after a few pages.
pub async fn mark_overdue(
    ctx: &Ctx,
    now: OffsetDateTime,
    page_size: i32,
    may_start_page: impl FnMut() -> bool,
) -> Result<Report, ApiError> {
    mark_overdue_paced(ctx, now, page_size, may_start_page, &Pacer::system()).await
}

/// The keys one loan's mark writes, a unit each (a loan is under 1 KB): the loan itself, its
/// open-loans shard (the entry removed), and the overdue indexes' entries put.
pub fn keys_written(loan: &Checkout) -> Vec<(KeyRef, f64)> {
    use crate::model::Entity;
    let overdue = Checkout {
        status: super::LoanStatus::Overdue,
        ..loan.clone()
    };
    let mut written = vec![
        (KeyRef::table(loan.active_key().into_key().pk), 1.0),
        (
            KeyRef::index(
                GSI1.name,
                keys::open_loan(&loan.checkout_id, &loan.due_date).pk,
            ),
            1.0,
        ),
    ];
    written.extend(
        overdue
            .index_keys()
            .into_iter()
            .map(|(index, key)| (KeyRef::index(index.name, key.pk), 1.0)),
    );
    written
}

/// [`mark_overdue`], each loan's writes admitted by `pacer` first.
pub async fn mark_overdue_paced(
    ctx: &Ctx,
    now: OffsetDateTime,
    page_size: i32,
    mut may_start_page: impl FnMut() -> bool,
    pacer: &Pacer,
) -> Result<Report, ApiError> {
    let before = clock::iso(now);
    let mut report = Report {
        now: before.clone(),
        ..Report::default()
    };
    for shard in 0..keys::OPEN_LOAN_SHARDS {
        let mut start = None;
        loop {
            if !may_start_page() {
                report.hottest_key = pacer.hottest();
                warn!(
                    ?report,
                    "mark-overdue stopped before its deadline; the next run goes on"
                );
                return Ok(report);
            }
            let query = Query::index(GSI1, keys::open_loans_partition(shard))
                .sort_before(before.clone())
                .limit(page_size)
                .start_after(start);
            let (page, consumed) = crate::store::capacity::metered(ctx.query(query)).await;
            let page = match page {
                Err(ApiError::Throttled) => return Ok(throttled(report, pacer)),
                page => page?,
            };
            report.pages_read += 1;
            report.capacity_units += consumed.read_units;
            let mut loans = Vec::new();
            for item in &page.items {
                match decode::<Checkout>(item) {
                    Ok(loan) => loans.push(loan),
                    Err(_) => {
                        error!(
                            item = %crate::store::item::log_name(item),
                            "mark-overdue skipped an item it cannot read"
                        );
                        report.unreadable += 1;
                    }
                }
            }
            let mut marks = Vec::with_capacity(loans.len());
            for loan in &loans {
                pacer.admit(&keys_written(loan)).await;
                marks.push(crate::store::capacity::metered(
                    ctx.update_item(super::mark_overdue(loan)),
                ));
            }
            let mut was_throttled = false;
            for (outcome, consumed) in futures::future::join_all(marks).await {
                report.capacity_units += consumed.write_units;
                match outcome {
                    Ok(Some(_)) => report.marked += 1,
                    // Returned, renewed or marked since the index showed it.
                    Ok(None) => report.skipped += 1,
                    Err(ApiError::Throttled) => was_throttled = true,
                    Err(error) => return Err(error),
                }
            }
            if was_throttled {
                return Ok(throttled(report, pacer));
            }
            start = page.last_key;
            if start.is_none() {
                break;
            }
        }
    }
    report.complete = true;
    report.hottest_key = pacer.hottest();
    // Only a complete run moves `asOf`; an older run completing late leaves a newer time.
    let (recorded, consumed) =
        crate::store::capacity::metered(ctx.update_item(super::record_run(&before))).await;
    recorded?;
    report.capacity_units += consumed.write_units;
    info!(
        marked = report.marked,
        skipped = report.skipped,
        unreadable = report.unreadable,
        pages_read = report.pages_read,
        capacity = report.capacity_units,
        "mark-overdue finished"
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_the_event_time_but_never_past_the_clock_plus_five_minutes() {
        let clock = clock::parse_iso("2026-11-29T18:00:00Z").unwrap();
        let at = |raw: &str| clock::parse_iso(raw).unwrap();
        assert_eq!(
            run_time(at("2026-11-29T17:59:00Z"), clock),
            at("2026-11-29T17:59:00Z")
        );
        assert_eq!(
            run_time(at("2026-11-29T18:04:00Z"), clock),
            at("2026-11-29T18:04:00Z")
        );
        assert_eq!(
            run_time(at("2026-12-29T18:00:00Z"), clock),
            at("2026-11-29T18:05:00Z")
        );
    }

    #[test]
    fn the_event_time_is_now() {
        let event: ScheduledEvent =
            serde_json::from_str(r#"{"time": "2026-11-29T18:15:00Z", "detail": {}}"#).unwrap();
        assert_eq!(
            clock::iso(event_time(&event).unwrap()),
            "2026-11-29T18:15:00Z"
        );
        assert!(
            event_time(&ScheduledEvent {
                time: "yesterday".into()
            })
            .is_err()
        );
    }

    #[test]
    fn a_loan_due_at_now_is_not_before_now() {
        // The open-index sort key is `<dueDate>#<checkoutId>`; `< now` keeps a loan due exactly
        // at `now` out, and every loan due earlier in.
        let now = "2026-11-29T18:15:00Z";
        assert!(format!("{now}#k1").as_str() > now);
        assert!("2026-11-29T18:14:59Z#k1" < now);
    }
}
