//! `GET /resources/{resourceId}/history?limit=&cursor=` → `200`
//! `{current, items: [events oldest first], nextCursor}`, or `404`.
//!
//! `CURRENT` sorts before every `EVENT#<seq>` in the resource's partition, so the first page is
//! one `Query` on the partition (`Limit` = limit + 2): `CURRENT`, then the oldest `limit`
//! events, then one more event that is read only to learn whether another page follows. The
//! cursor is the key of the page's last event, so `nextCursor` is `null` exactly on the last
//! page (never an empty page after it).
//!
//! A later page starts after its cursor's event, past `CURRENT`, so no single `Query` can read
//! both: it is one `Query` for the events (`ExclusiveStartKey` = the cursor, `Limit` = limit +
//! 1), then one `GetItem` for `current`. Carrying the state of page one in the cursor would save
//! that read but answer a stale `current`; reading the partition from its start again would cost
//! every earlier event; a `BatchGetItem` of the numbered events would cost a read unit per event
//! instead of one per 4 KB. The events are read first, so `current` is never older than any event
//! on the page. Every read in this pattern touches this resource's partition only: the `Query`
//! names its key, and the cursor is signed for this route and this partition.

use super::{Event, Resource, load};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::paging::{Page, Paged};
use crate::store::{Item, Query, decode, key_item};
use lambda_http::Request;
use serde::Serialize;
use singlet_shared::keys;

/// The response body: the present state first, then a page of the history.
#[derive(Debug, Serialize)]
struct History {
    current: Resource,
    #[serde(flatten)]
    page: Paged<Event>,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (resource_id,) = (path_id(&req, "resourceId"),).all_valid()?;
    let partition = keys::resource_partition(&resource_id);
    let page = Page::from_request(ctx, &req, &partition)?;

    let (current, mut events): (Resource, Vec<Event>) = match &page.start {
        // Page one: `CURRENT` (it sorts first), `limit` events, and one more that says whether
        // another page follows. No `CURRENT` means no such resource.
        None => {
            let mut items = query(ctx, &partition, None, page.limit + 2)
                .await?
                .into_iter();
            let current = match items.next() {
                Some(first) if is_current(&first, &resource_id) => decode(&first)?,
                _ => return Err(ApiError::not_found("resource")),
            };
            (current, decode_events(items)?)
        }
        // A later page: `limit` + 1 events after the cursor's, then `current`.
        Some(start) => {
            let items = query(ctx, &partition, Some(start.clone()), page.limit + 1).await?;
            let events = decode_events(items.into_iter())?;
            (load(ctx, &resource_id).await?, events)
        }
    };

    let limit = page.limit as usize;
    let more = events.len() > limit;
    events.truncate(limit);
    let cursor = events
        .last()
        .filter(|_| more)
        .map(|last| key_item(&keys::resource_event(&resource_id, last.sequence)));
    Ok(ok(&History {
        current,
        page: page.reply(ctx, events, cursor.as_ref()),
    }))
}

/// One strongly consistent `Query` on the resource's partition, in key order.
async fn query(
    ctx: &Ctx,
    partition: &str,
    start: Option<Item>,
    limit: i32,
) -> Result<Vec<Item>, ApiError> {
    let page = ctx
        .query(Query::table(partition).start_after(start).limit(limit))
        .await?;
    Ok(page.items)
}

/// Whether `item` is the resource's `CURRENT` (it sorts before every event).
fn is_current(item: &Item, resource_id: &singlet_shared::Id) -> bool {
    let current = key_item(&keys::resource_current(resource_id));
    current
        .iter()
        .all(|(name, value)| item.get(name) == Some(value))
}

fn decode_events(items: impl Iterator<Item = Item>) -> Result<Vec<Event>, ApiError> {
    items.map(|item| decode(&item)).collect()
}
