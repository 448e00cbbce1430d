//! `GET /patrons/{patronId}/checkouts` → `200` page of the patron's active loans (open or
//! overdue, as they read now: [`Checkout::as_read`]), in checkout-id order.
//!
//! One `Query` on the patron's loan partition, `begins_with(SK, CHECKOUT#)`. A return moves a loan
//! to `RETURNED#<checkoutId>`, outside that range, so the query reads (and pays for) active loans
//! only, however long the patron's history: a `FilterExpression` on a returned flag would read
//! every returned loan and pay for it before discarding it. `404` for an unknown patron, told by
//! one GSI1 read only when the first page is empty.

use super::{Checkout, as_read};
use crate::claims::principal;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::library::find_patron;
use crate::paging::Page;
use crate::store::Query;
use lambda_http::Request;
use singlet_shared::keys;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;
    if !principal(&req).may_reach_patron(&patron_id) {
        return Err(ApiError::not_found("patron"));
    }
    let partition = keys::patron_loans_partition(&patron_id);
    let page = Page::from_request(ctx, &req, &partition)?;
    let query = Query::table(partition).sort_begins_with(keys::CHECKOUT_PREFIX);
    let loans = page
        .read_or_missing::<Checkout, _>(ctx, query, async {
            find_patron(ctx, &patron_id).await.map(drop)
        })
        .await?;
    Ok(ok(&as_read(loans)))
}
