//! `GET /patrons/{patronId}/checkouts/{checkoutId}` → `200` one loan, active or returned (as it
//! reads now: [`Checkout::as_read`]), or `404`.
//!
//! One `GetItem` of the active loan `PATRON#<patronId>`/`CHECKOUT#<checkoutId>`; only when there
//! is none, one `GetItem` of the returned loan `RETURNED#<checkoutId>`. An active loan (the loan
//! most often asked about) costs one read; a returned one two. A return moves the loan from one
//! key to the other in one transaction, so the second read finds what the first missed: there is
//! no moment when the loan is at neither key. A returned loan past its history's end
//! (`expiresAt`) is `404` at once, though TTL deletes it only later.

use super::Checkout;
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, ok, path_id};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id, checkout_id) =
        (path_id(&req, "patronId"), path_id(&req, "checkoutId")).all_valid()?;
    if !principal(&req).may_reach_patron(&patron_id) {
        return Err(ApiError::not_found("checkout"));
    }
    let now = clock::now();
    let active: Option<Checkout> = ctx
        .get(&Checkout::active_key_of(&patron_id, &checkout_id))
        .await?;
    let loan = match active {
        Some(loan) => loan,
        None => ctx
            .get_live(
                &Checkout::returned_key_of(&patron_id, &checkout_id),
                now.unix_timestamp(),
            )
            .await?
            .ok_or_else(|| ApiError::not_found("checkout"))?,
    };
    Ok(ok(&loan.as_read(now)))
}
