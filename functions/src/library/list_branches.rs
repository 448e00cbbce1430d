//! `GET /branches` → `200` page of every branch, in id order.
//!
//! One `Query` on GSI1, partition `BRANCHES`: `create-branch` gives every branch GSI1 keys
//! `BRANCHES` / `<branchId>`, so the index partition holds the branches and nothing else (a
//! `Scan` of the table would read every item to find them). Branches are few and rarely created,
//! so one partition takes their writes easily. Always `200`: no branch is an empty list. A branch
//! created before branches carried these keys is not listed until it is written again.

use super::Branch;
use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use singlet_shared::keys;
use singlet_shared::schema::GSI1;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let page = Page::from_request(ctx, &req, keys::BRANCHES)?;
    let query = Query::index(GSI1, keys::BRANCHES);
    page.query::<Branch, _>(ctx, query, async { Ok(()) }).await
}
