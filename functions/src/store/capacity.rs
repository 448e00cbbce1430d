//! Consumed capacity: every request to the engine asks for it per index
//! (`ReturnConsumedCapacity=INDEXES`), and the data layer logs it here, per operation, table and
//! index. A request's total is also added to the meter of the request being served, if any
//! ([`metered`]): the request's log line, its metrics and the local runner's
//! `x-consumed-capacity` header read it.

use aws_sdk_dynamodb::types::{Capacity, ConsumedCapacity};
use serde::Serialize;
use std::cell::RefCell;
use std::future::Future;

/// Units consumed, split as DynamoDB bills them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumed {
    pub read_units: f64,
    pub write_units: f64,
}

/// Whether an operation is billed in read or write units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billing {
    Read,
    Write,
}

tokio::task_local! {
    static METER: RefCell<Consumed>;
}

/// Runs `work` with a fresh meter; returns its output and the units it consumed.
pub async fn metered<F: Future>(work: F) -> (F::Output, Consumed) {
    METER
        .scope(RefCell::new(Consumed::default()), async {
            let output = work.await;
            (output, METER.with(|meter| *meter.borrow()))
        })
        .await
}

fn units(capacity: Option<&Capacity>) -> f64 {
    capacity.and_then(|c| c.capacity_units()).unwrap_or(0.0)
}

/// The units each index consumed, `GSI1=1,GSI2=0.5`, sorted; written only when logged.
struct PerIndex<'c>(&'c ConsumedCapacity);

impl std::fmt::Display for PerIndex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(indexes) = self.0.global_secondary_indexes() else {
            return Ok(());
        };
        let mut names: Vec<&String> = indexes.keys().collect();
        names.sort();
        for (i, name) in names.into_iter().enumerate() {
            let separator = if i == 0 { "" } else { "," };
            write!(f, "{separator}{name}={}", units(indexes.get(name)))?;
        }
        Ok(())
    }
}

/// Logs what one request to the engine consumed, per table and index (at `debug`: each
/// request's total is in its `request handled` line, a marker run's in `mark-overdue finished`),
/// and meters it.
pub fn record<'c>(
    operation: &'static str,
    billing: Billing,
    capacities: impl IntoIterator<Item = &'c ConsumedCapacity>,
) -> f64 {
    let mut total = 0.0;
    for capacity in capacities {
        let all = capacity.capacity_units().unwrap_or(0.0);
        total += all;
        tracing::debug!(
            operation,
            units = all,
            table = units(capacity.table()),
            indexes = %PerIndex(capacity),
            "consumed capacity"
        );
    }
    let _ = METER.try_with(|meter| {
        let mut meter = meter.borrow_mut();
        match billing {
            Billing::Read => meter.read_units += total,
            Billing::Write => meter.write_units += total,
        }
    });
    total
}
