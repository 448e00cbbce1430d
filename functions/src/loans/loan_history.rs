//! `GET /patrons/{patronId}/history` → `200` page of the patron's returned loans, newest return
//! first.
//!
//! One `Query` on GSI1, partition `HISTORY#<patronId>`, descending: a return puts the loan at
//! `RETURNED#<checkoutId>` with GSI1 keys `HISTORY#<patronId>` / `<returnedDate>#<checkoutId>`, so
//! the index holds the patron's returned loans sorted by return date, and the query reads those
//! and nothing else (no active loan, no other patron's). The index is eventually consistent: on
//! AWS a loan returned a moment ago can be missing for a moment. `404` for an unknown patron, told
//! by one GSI1 read only when the first page is empty. A removed patron's returned loans stay (see
//! `remove_patron`), so its history still answers while it has one.

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
use singlet_shared::schema::GSI1;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (patron_id,) = (path_id(&req, "patronId"),).all_valid()?;
    if !principal(&req).may_reach_patron(&patron_id) {
        return Err(ApiError::not_found("patron"));
    }
    let partition = keys::loan_history_partition(&patron_id);
    let page = Page::from_request(ctx, &req, &partition)?;
    let query = Query::index(GSI1, partition).descending(true);
    let loans = page
        .read_or_missing::<Checkout, _>(ctx, query, async {
            find_patron(ctx, &patron_id).await.map(drop)
        })
        .await?;
    Ok(ok(&as_read(loans)))
}
