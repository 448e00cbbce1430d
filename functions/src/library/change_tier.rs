//! `PUT /patrons/{patronId}/tier` `{membershipTier}` → `200` patron with the tier's loan limit and
//! loan period; `400`; `404`.
//!
//! Read the patron (GSI1: its branch), then one conditional `UpdateItem` of the row: the tier,
//! `loanLimit` and `loanPeriodDays` together, only if the row exists (a patron removed meanwhile
//! is `404`, never a row brought back to life), answering the row as it is after the update
//! (`ALL_NEW`). `activeLoans` is not touched: a patron above its new limit keeps its loans, and
//! since a checkout is guarded by `activeLoans < loanLimit` it borrows nothing until it is under
//! the limit again. Loans already made keep the loan period they were made with (a renewal adds
//! the loan's own period).

use super::{Patron, Tier, change_tier, find_patron};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::store::decode;
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, tier) = (
        path_id(&req, "patronId"),
        body.required("membershipTier", Tier::parse),
    )
        .all_valid()?;
    let patron = find_patron(ctx, &patron_id).await?;
    let changed = ctx
        .update_item(change_tier(&patron, tier))
        .await?
        .ok_or_else(|| ApiError::not_found("patron"))?;
    let changed: Patron = decode(&changed)?;
    tracing::info!(%patron_id, tier = ?tier, "membership tier changed");
    Ok(ok(&changed))
}
