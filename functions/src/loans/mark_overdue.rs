//! `mark-overdue`: the scheduled function (EventBridge, every 15 minutes) that moves every open
//! loan whose `dueDate` is before the event's `time` into the sparse overdue index.
//!
//! For each open-loans shard, one `Query` on GSI1 (`GSI1PK = OPEN#nn AND GSI1SK < :now`, the sort
//! key being `<dueDate>#<checkoutId>`), paged; for each hit, one conditional `UpdateItem` that
//! removes the loan's GSI1 keys and sets its GSI3 keys, on the condition that it is still in the
//! open index with the due date that was read. So:
//! - a run costs the shards' (small, usually empty) queries plus the loans that fell due since the
//!   last run: a marked loan has left the open index and is never read again;
//! - a rerun, an overlapping run, or a run killed midway and repeated all end in the same state:
//!   an already-marked loan fails the condition and is skipped;
//! - a loan returned or renewed meanwhile (the index is eventually consistent) fails the condition
//!   and is never marked.
//!
//! It stops starting new pages when its deadline nears, and logs what it did.

use super::{Checkout, LoanStatus};
use crate::clock;
use crate::db::{Ctx, from_item, key_item, s};
use crate::error::ApiError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use serde::{Deserialize, Serialize};
use singlet_shared::schema::{GSI1, GSI3};
use singlet_shared::{Id, keys};
use std::time::{Duration, SystemTime};
use time::OffsetDateTime;
use tracing::{info, warn};

pub const FUNCTION: &str = "mark-overdue";
/// Loans read per page of one shard.
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
    pub pages_read: u64,
    pub capacity_units: f64,
    /// False when the run stopped early for its deadline: the next run finishes the work.
    pub complete: bool,
}

/// The event's `time` as "now"; `400`-style error text for an event without a valid one.
pub fn event_time(event: &ScheduledEvent) -> Result<OffsetDateTime, String> {
    clock::parse_iso(&event.time)
        .ok_or_else(|| format!("the event's time {:?} is not ISO-8601", event.time))
}

/// Marks every open loan due before `now`. `may_start_page` is asked before each page: the
/// Lambda stops for its deadline, a test stops after a few pages.
pub async fn mark_overdue(
    ctx: &Ctx,
    now: OffsetDateTime,
    page_size: i32,
    mut may_start_page: impl FnMut() -> bool,
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
                warn!(
                    ?report,
                    "mark-overdue stopped before its deadline; the next run goes on"
                );
                return Ok(report);
            }
            let page = ctx
                .db
                .query()
                .table_name(&*ctx.table)
                .index_name(GSI1.name)
                .key_condition_expression("#pk = :shard AND #sk < :now")
                .expression_attribute_names("#pk", GSI1.pk)
                .expression_attribute_names("#sk", GSI1.sk)
                .expression_attribute_values(":shard", s(keys::open_loans_partition(shard)))
                .expression_attribute_values(":now", s(&before))
                .limit(page_size)
                .set_exclusive_start_key(start)
                .return_consumed_capacity(ReturnConsumedCapacity::Total)
                .send()
                .await?;
            report.pages_read += 1;
            report.capacity_units += page
                .consumed_capacity()
                .and_then(|c| c.capacity_units())
                .unwrap_or(0.0);
            let loans: Vec<Checkout> = page
                .items()
                .iter()
                .map(from_item)
                .collect::<Result<_, _>>()?;
            let outcomes =
                futures::future::join_all(loans.iter().map(|loan| mark(ctx, loan))).await;
            for outcome in outcomes {
                let (marked, capacity) = outcome?;
                report.capacity_units += capacity;
                if marked {
                    report.marked += 1;
                } else {
                    report.skipped += 1;
                }
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
    }
    report.complete = true;
    info!(
        marked = report.marked,
        skipped = report.skipped,
        pages_read = report.pages_read,
        capacity = report.capacity_units,
        "mark-overdue finished"
    );
    Ok(report)
}

/// Moves one loan from the open index to the overdue index, if it is still open with the due date
/// that was read. Returns whether it moved, and the capacity consumed.
async fn mark(ctx: &Ctx, loan: &Checkout) -> Result<(bool, f64), ApiError> {
    let ids = (
        Id::parse(&loan.patron_id),
        Id::parse(&loan.checkout_id),
        Id::parse(&loan.branch_id),
    );
    let (Ok(patron_id), Ok(checkout_id), Ok(branch_id)) = ids else {
        tracing::error!(checkout_id = %loan.checkout_id, "a loan in the open index has malformed ids");
        return Ok((false, 0.0));
    };
    let overdue = keys::overdue_loan(&branch_id, &checkout_id, &loan.due_date);
    let open = keys::open_loan(&checkout_id, &loan.due_date);
    let result = ctx
        .db
        .update_item()
        .table_name(&*ctx.table)
        .set_key(Some(key_item(&keys::checkout(&patron_id, &checkout_id))))
        .update_expression(
            "SET #status = :overdue, #g3pk = :g3pk, #g3sk = :g3sk REMOVE #g1pk, #g1sk",
        )
        .condition_expression("#g1pk = :open AND dueDate = :due")
        .expression_attribute_names("#status", "status")
        .expression_attribute_names("#g1pk", GSI1.pk)
        .expression_attribute_names("#g1sk", GSI1.sk)
        .expression_attribute_names("#g3pk", GSI3.pk)
        .expression_attribute_names("#g3sk", GSI3.sk)
        .expression_attribute_values(
            ":overdue",
            serde_dynamo::to_attribute_value(LoanStatus::Overdue).expect("enum"),
        )
        .expression_attribute_values(":g3pk", s(overdue.pk))
        .expression_attribute_values(":g3sk", s(overdue.sk))
        .expression_attribute_values(":open", s(open.pk))
        .expression_attribute_values(":due", s(&loan.due_date))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await;
    match result {
        Ok(output) => Ok((
            true,
            output
                .consumed_capacity()
                .and_then(|c| c.capacity_units())
                .unwrap_or(0.0),
        )),
        Err(err)
            if matches!(
                err.as_service_error(),
                Some(UpdateItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok((false, 0.0))
        }
        Err(err) => Err(err.into()),
    }
}

/// The Lambda: "now" from the event's `time`, stopping `DEADLINE_MARGIN` before the deadline.
pub async fn serve() -> Result<(), lambda_runtime::Error> {
    crate::lambda::init_tracing();
    let ctx: &'static Ctx = Box::leak(Box::new(Ctx::from_env().await));
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<ScheduledEvent>| async move {
            let now = event_time(&event.payload)?;
            let deadline = event.context.deadline();
            let report = mark_overdue(ctx, now, PAGE_SIZE, || {
                deadline
                    .duration_since(SystemTime::now())
                    .is_ok_and(|left| left > DEADLINE_MARGIN)
            })
            .await
            .map_err(|e| format!("mark-overdue failed: {e:?}"))?;
            Ok::<_, lambda_runtime::Error>(report)
        },
    ))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

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
