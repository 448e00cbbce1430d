//! `GET /patrons/{patronId}/checkouts` → `200` page of the patron's active loans (open or
//! overdue), oldest first by id order.
//!
//! One `Query` on the patron's loan partition, `begins_with(SK, CHECKOUT#)`. A return moves a loan
//! to `RETURNED#<checkoutId>`, outside that range, so the query reads (and pays for) active loans
//! only, however long the patron's history: a `FilterExpression` on a returned flag would read
//! every returned loan and pay for it before discarding it. `404` for an unknown patron, told by
//! one GSI1 read only when the first page is empty.

use super::Checkout;
use crate::db::{Ctx, from_item, log_capacity, s};
use crate::http::{AllValid, HandlerResult, ok, path_id};
use crate::library::find_patron;
use crate::paging::Page;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use lambda_http::Request;
use singlet_shared::keys;

pub const ROUTE: &str = "active-checkouts";

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;
    let partition = keys::patron_loans_partition(&patron_id);
    let page = Page::from_request(ctx, &req, ROUTE, &partition)?;
    let output = ctx
        .db
        .query()
        .table_name(&*ctx.table)
        .key_condition_expression("PK = :pk AND begins_with(SK, :active)")
        .expression_attribute_values(":pk", s(&partition))
        .expression_attribute_values(":active", s(keys::CHECKOUT_PREFIX))
        .limit(page.limit)
        .set_exclusive_start_key(page.start.clone())
        .consistent_read(true)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await?;
    log_capacity("Query", output.consumed_capacity());
    if output.items().is_empty() && page.start.is_none() {
        find_patron(ctx, &patron_id).await?;
    }
    let loans = output
        .items()
        .iter()
        .map(from_item::<Checkout>)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ok(&page.reply(ctx, loans, output.last_evaluated_key())))
}
