//! `GET /branches/{branchId}/overdue` → `200` `{items, nextCursor, asOf}`: a page of the branch's
//! overdue loans, oldest due first, and the time of the last complete `mark-overdue` run.
//!
//! One `Query` on the sparse overdue index GSI3 (`OVERDUE#<branchId>`, sorted by
//! `<dueDate>#<checkoutId>`), which holds only loans that `mark-overdue` moved there and a return
//! has not taken out: it never reads an open or a returned loan. At the same time, one `GetItem`
//! of `MARKER#mark-overdue` for `asOf` (`null` before the first complete run): a loan that fell
//! due after `asOf` is not listed yet, though it reads `overdue` everywhere at once. `404` for an
//! unknown branch, told by one `GetItem` only when the first page is empty.

use super::overdue_page;
use crate::context::Ctx;
use crate::http::{AllValid, HandlerResult, path_id};
use crate::library::load_branch;
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use singlet_shared::keys;
use singlet_shared::schema::GSI3;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (branch_id,) = (path_id(&req, "branchId"),).all_valid()?;
    let partition = keys::overdue_partition(&branch_id);
    let page = Page::from_request(ctx, &req, &partition)?;
    let query = Query::index(GSI3, partition);
    overdue_page(ctx, page, query, async {
        load_branch(ctx, &branch_id).await.map(drop)
    })
    .await
}
