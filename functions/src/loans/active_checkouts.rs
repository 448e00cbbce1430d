//! `GET /patrons/{patronId}/checkouts` → `200` page of the patron's active loans (open or
//! overdue), in checkout-id order.
//!
//! One `Query` on the patron's loan partition, `begins_with(SK, CHECKOUT#)`. A return moves a loan
//! to `RETURNED#<checkoutId>`, outside that range, so the query reads (and pays for) active loans
//! only, however long the patron's history: a `FilterExpression` on a returned flag would read
//! every returned loan and pay for it before discarding it. `404` for an unknown patron, told by
//! one GSI1 read only when the first page is empty.

use super::Checkout;
use crate::db::{Ctx, s};
use crate::http::{AllValid, HandlerResult, path_id};
use crate::library::find_patron;
use crate::paging::Page;
use lambda_http::Request;
use singlet_shared::keys;

pub const ROUTE: &str = "active-checkouts";

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;
    let partition = keys::patron_loans_partition(&patron_id);
    let page = Page::from_request(ctx, &req, ROUTE, &partition)?;
    let query = ctx
        .db
        .query()
        .table_name(&*ctx.table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :active)")
        .expression_attribute_values(":pk", s(&partition))
        .expression_attribute_values(":active", s(keys::CHECKOUT_PREFIX))
        .consistent_read(true);
    page.query::<Checkout, _>(ctx, query, async {
        find_patron(ctx, &patron_id).await.map(drop)
    })
    .await
}
