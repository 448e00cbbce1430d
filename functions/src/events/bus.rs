//! Where events are published: EventBridge on AWS (the bus `EVENT_BUS_NAME` names), the runner's
//! local bus on a developer's machine (`src/serve/local_bus.rs`, appending to the events file).

use super::Entry;
// The `futures` crate's own alias, not `routes::BoxFuture`: the context holds a bus, and the route
// table holds every handler that takes a context.
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use futures::future::BoxFuture;

/// One `PutEvents` call: each entry's outcome in order, `None` when it was accepted and its
/// `ErrorCode` when it was not. A call that failed as a whole is an `Err`.
pub trait Bus: Send + Sync {
    fn put_events<'a>(
        &'a self,
        entries: &'a [Entry],
    ) -> BoxFuture<'a, Result<Vec<Option<String>>, String>>;
}

/// EventBridge: one `PutEvents` per call, on the bus the template names.
pub struct EventBridge {
    client: aws_sdk_eventbridge::Client,
    bus_name: String,
}

impl EventBridge {
    pub fn new(client: aws_sdk_eventbridge::Client, bus_name: impl Into<String>) -> Self {
        Self {
            client,
            bus_name: bus_name.into(),
        }
    }
}

impl Bus for EventBridge {
    fn put_events<'a>(
        &'a self,
        entries: &'a [Entry],
    ) -> BoxFuture<'a, Result<Vec<Option<String>>, String>> {
        Box::pin(async move {
            let request = entries.iter().map(|entry| {
                PutEventsRequestEntry::builder()
                    .event_bus_name(&self.bus_name)
                    .source(&entry.source)
                    .detail_type(&entry.detail_type)
                    .detail(&entry.detail)
                    .build()
            });
            let output = self
                .client
                .put_events()
                .set_entries(Some(request.collect()))
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "PutEvents failed: {}",
                        aws_sdk_eventbridge::error::DisplayErrorContext(e)
                    )
                })?;
            // A `200` can still carry failed entries: `FailedEntryCount`, and an `ErrorCode` on
            // each entry that failed, in the order they were sent.
            let results = output.entries();
            if results.len() != entries.len() {
                return Err(format!(
                    "PutEvents answered {} entries for {} sent",
                    results.len(),
                    entries.len()
                ));
            }
            Ok(results
                .iter()
                .map(|result| result.error_code().map(str::to_owned))
                .collect())
        })
    }
}
