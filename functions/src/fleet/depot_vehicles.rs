//! `GET /depots/{depot}/vehicles?limit=&cursor=` → `200` `{items: [vehicle], nextCursor}`, newest
//! first; `400` depot.
//!
//! One `Query` on the depot index GSI5, partition `DEPOT#<depot>` (the depot folded as plates
//! are: `North`, ` north ` and `NORTH` are one depot), descending by `<addedAt>#<vehicleId>`.
//! The index projects the whole vehicle, so a page is that one `Query` and nothing else. Always
//! `200`: a depot is not an entity of its own, so a depot with no vehicles is an empty list.
//! Vehicles registered before this route existed appear once `migrate vehicles-by-depot` has
//! written their index keys.

use super::Vehicle;
use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, path};
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use singlet_shared::schema::GSI5;
use singlet_shared::{Depot, keys};

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (depot,) = (path(&req, "depot", Depot::parse),).all_valid()?;
    let partition = keys::depot_partition(&depot);
    let page = Page::from_request(ctx, &req, &partition)?;
    let query = Query::index(GSI5, partition).descending(true);
    page.query::<Vehicle, _>(ctx, query, async { Ok(()) }).await
}
