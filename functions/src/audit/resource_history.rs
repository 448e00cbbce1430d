//! `GET /resources/{resourceId}/history?limit=&cursor=&order=` → `200`
//! `{current, items: [events oldest first], nextCursor}`, or `404`; `?order=desc`: newest first
//! (`?order=asc`, the default, oldest first; anything else is `400`).
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
//! names its key, and the cursor is signed for this route, this partition and this order.
//!
//! Newest first, every page is one descending `Query` of `begins_with(SK, "EVENT#")` (`CURRENT`
//! sorts before the events, so it would come last), `limit` + 1 events from the newest or after
//! the cursor's, then one `GetItem` for `current`: one more read unit than the first page oldest
//! first, and the same order of reads, so `current` is never older than any event on the page.

use super::{Event, Resource, ResourceEvent, load};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::paging::{Page, Paged};
use crate::store::{Item, Query, decode, key_item};
use lambda_http::{Request, RequestExt};
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
    let (resource_id, descending) = (path_id(&req, "resourceId"), descending(&req)).all_valid()?;
    let partition = keys::resource_partition(&resource_id);
    // A cursor is bound to its order too: the key it carries means "after" in one order only.
    let scope = if descending {
        format!("{partition}\n{DESCENDING}")
    } else {
        partition.clone()
    };
    let page = Page::from_request(ctx, &req, &scope)?;

    let (current, mut events): (Resource, Vec<Event>) = match (&page.start, descending) {
        // Page one: `CURRENT` (it sorts first), `limit` events, and one more that says whether
        // another page follows. No `CURRENT` means no such resource.
        (None, false) => {
            let mut items = query(ctx, Query::table(&partition), None, page.limit + 2)
                .await?
                .into_iter();
            let current = match items.next() {
                Some(first) if is_current(&first, &resource_id) => decode(&first)?,
                _ => return Err(ApiError::not_found("resource")),
            };
            (current, decode_events(items)?)
        }
        // A later page: `limit` + 1 events after the cursor's, then `current`.
        (start, false) => {
            let events = Query::table(&partition).sort_begins_with(keys::EVENT_PREFIX);
            let items = query(ctx, events, start.clone(), page.limit + 1).await?;
            let events = decode_events(items.into_iter())?;
            (load(ctx, &resource_id).await?, events)
        }
        // Newest first: `CURRENT` sorts before the events, so it would come last; every page is
        // `limit` + 1 events from the newest (or after the cursor's) down, then `current`.
        (start, true) => {
            let events = Query::table(&partition)
                .sort_begins_with(keys::EVENT_PREFIX)
                .descending(true);
            let items = query(ctx, events, start.clone(), page.limit + 1).await?;
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

const DESCENDING: &str = "desc";

/// `?order=`: `asc` (the default, oldest first) or `desc` (newest first).
fn descending(req: &Request) -> Result<bool, FieldError> {
    let query = req.query_string_parameters();
    match query.first("order") {
        None | Some("asc") => Ok(false),
        Some(DESCENDING) => Ok(true),
        Some(_) => Err(FieldError::new("order", Code::Invalid)),
    }
}

/// One page of one strongly consistent `Query` on the resource's partition.
async fn query(
    ctx: &Ctx,
    query: Query,
    start: Option<Item>,
    limit: i32,
) -> Result<Vec<Item>, ApiError> {
    let page = ctx.query(query.start_after(start).limit(limit)).await?;
    Ok(page.items)
}

/// Whether `item` is the resource's `CURRENT` (it sorts before every event).
fn is_current(item: &Item, resource_id: &singlet_shared::Id) -> bool {
    let current = key_item(&Resource::key_of(resource_id));
    current
        .iter()
        .all(|(name, value)| item.get(name) == Some(value))
}

fn decode_events(items: impl Iterator<Item = Item>) -> Result<Vec<Event>, ApiError> {
    items
        .map(|item| decode::<ResourceEvent>(&item).map(|stored| stored.event))
        .collect()
}
