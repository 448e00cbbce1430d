//! `GET /overdue` → `200` `{items, nextCursor, asOf}`: a page of the overdue loans of every
//! branch, oldest due first, and the time of the last complete `mark-overdue` run.
//!
//! One `Query` on the sparse index GSI4, partition `OVERDUE`, ascending (sorted by
//! `<dueDate>#<checkoutId>`): `mark-overdue` sets a loan's GSI4 keys when it marks it (with its
//! branch's GSI3 keys), and a return takes them away, so the query reads overdue loans only and
//! its cost grows with them, never with the open or returned loans. At the same time, one
//! `GetItem` of `MARKER#mark-overdue` for `asOf` (`null` before the first complete run). Always
//! `200`: the library exists, and an empty list is an answer.

use super::overdue_page;
use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use singlet_shared::keys;
use singlet_shared::schema::GSI4;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let page = Page::from_request(ctx, &req, keys::ALL_OVERDUE)?;
    let query = Query::index(GSI4, keys::ALL_OVERDUE);
    overdue_page(ctx, page, query, async { Ok(()) }).await
}
