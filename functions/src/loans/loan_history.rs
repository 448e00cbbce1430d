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
//!
//! A returned loan expires `LoanHistoryDays` after its return (`expiresAt`), and TTL deletes it
//! days after that: until then the index still holds it. The query never reads it: its key
//! condition starts at the oldest return date still kept (`now - LoanHistoryDays`), so expired
//! loans cost nothing and never leave a page short. A filter on `expiresAt` itself stays for
//! what the key cannot say exactly (a loan returned under a longer `LoanHistoryDays` that has
//! since been shortened is cut by the key condition; under a shortened-then-lengthened one, by
//! the filter): it reads nothing the key condition did not already read.

use super::{Checkout, as_read};
use crate::claims::principal;
use crate::clock;
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
    let now = clock::now();
    let kept_since = clock::iso(now - clock::days(ctx.loan_history_days));
    let query = Query::index(GSI1, partition)
        .sort_at_or_after(keys::loan_history_since(&kept_since))
        .descending(true)
        .live_at(now.unix_timestamp());
    let loans = page
        .read_or_missing::<Checkout, _>(ctx, query, async {
            find_patron(ctx, &patron_id).await.map(drop)
        })
        .await?;
    Ok(ok(&as_read(loans)))
}
