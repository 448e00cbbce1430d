//! `PUT /patrons/{patronId}/tier` `{membershipTier}` → `200` patron with the tier's loan limit and
//! loan period; `400`; `404`.
//!
//! Read the patron (GSI1: its branch), then one `TransactWriteItems`: the conditional update of
//! the row, the tier, `loanLimit` and `loanPeriodDays` together, only if the row exists (a patron
//! removed meanwhile is `404`, never a row brought back to life), and the change's event
//! (`PatronTierChanged`, its outbox item). It was one `UpdateItem` (`ALL_NEW`) before events: the
//! event needs the caller as its `actor`, which the row does not hold (docs/COSTS.md). The answer
//! is the row read with its new tier, as `PUT /patrons/{patronId}/card` answers. `activeLoans` is
//! not touched: a patron above its new limit keeps its loans, and since a checkout is guarded by
//! `activeLoans < loanLimit` it borrows nothing until it is under the limit again. Loans already
//! made keep the loan period they were made with (a renewal adds the loan's own period).

use super::{Patron, Tier, change_tier, find_patron};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use crate::recording::outbox;
use crate::store::{Commit, Transaction};
use lambda_http::Request;

/// The transaction's parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Patron,
    Event,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (patron_id, tier) = (
        path_id(&req, "patronId"),
        body.required("membershipTier", Tier::parse),
    )
        .all_valid()?;
    let patron = find_patron(ctx, &patron_id).await?;
    let changed = Patron {
        membership_tier: tier,
        loan_limit: tier.loan_limit(),
        loan_period_days: tier.loan_period_days(),
        ..patron.clone()
    };
    let commit = Transaction::new()
        .update(Part::Patron, change_tier(&patron, tier))
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::PatronTierChanged, &patron_id, &changed),
            ),
        )
        .commit(ctx)
        .await?;
    if let Commit::Cancelled(_) = commit {
        return Err(ApiError::not_found("patron"));
    }
    tracing::info!(%patron_id, tier = ?tier, "membership tier changed");
    Ok(ok(&changed))
}
