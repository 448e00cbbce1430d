//! `POST /branches/{branchId}/patrons` `{cardNumber, firstName, lastName, email, membershipTier}`
//! → `201` patron, `location: /patrons/{patronId}`; `404` branch; `409` `cardNumber` `taken`.
//!
//! One `TransactWriteItems` of three parts: a `ConditionCheck` that the branch exists, the
//! patron row (with its GSI1 keys, so it can be found by id alone), and the card lock
//! `CARD#<cardNumber>` naming the patron, both puts guarded by `attribute_not_exists`. So a
//! patron never exists at a branch that does not, nor without its card, nor a card without its
//! patron; of any number of concurrent registrations of one card, one wins. The patron id is
//! generated here, derived from the `Idempotency-Key` when there is one.
//!
//! The tier's limits are copied onto the row with `activeLoans` at 0, so a checkout guards its
//! increment with `activeLoans < loanLimit` on this one item.

use super::{MAX_NAME_LEN, Patron, PatronCard, Tier};
use crate::clock;
use crate::db::{ABSENT, Creation, Ctx, PRESENT, Transaction, item, with_index};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, JsonBody, created, path_id};
use crate::idempotency::{self, Idempotency, new_id};
use lambda_http::Request;
use singlet_shared::schema::GSI1;
use singlet_shared::{Email, Id, keys};

pub const ROUTE: &str = "register-patron";

/// The transaction's parts, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Branch,
    Patron,
    Card,
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (branch_id, card_number, first_name, last_name, email, tier) = (
        path_id(&req, "branchId"),
        body.required("cardNumber", Id::parse),
        body.text("firstName", MAX_NAME_LEN),
        body.text("lastName", MAX_NAME_LEN),
        body.required("email", Email::parse),
        body.required("membershipTier", Tier::parse),
    )
        .all_valid()?;
    let idempotency = Idempotency::from_request(&req, ROUTE, &body.value())?;
    let patron_id = new_id(idempotency.as_ref());

    let patron = Patron {
        patron_id: patron_id.to_string(),
        branch_id: branch_id.to_string(),
        card_number: card_number.to_string(),
        first_name,
        last_name,
        email: email.to_string(),
        membership_tier: tier,
        loan_limit: tier.loan_limit(),
        loan_period_days: tier.loan_period_days(),
        active_loans: 0,
        created_at: clock::iso(clock::now()),
    };
    let card = PatronCard {
        card_number: card_number.to_string(),
        patron_id: patron_id.to_string(),
    };
    let response = created(format!("/patrons/{patron_id}"), &patron);

    let commit = Transaction::new()
        .check(
            Part::Branch,
            ctx.check(&keys::branch(&branch_id))
                .condition_expression(PRESENT),
        )
        .put(
            Part::Patron,
            ctx.put(with_index(
                item(&keys::patron(&branch_id, &patron_id), &patron),
                GSI1,
                &keys::patron_by_id(&patron_id),
            ))
            .condition_expression(ABSENT),
        )
        .put(
            Part::Card,
            ctx.put(item(&keys::card_lock(&card_number), &card))
                .condition_expression(ABSENT),
        )
        .commit_creating(ctx, idempotency, response)
        .await?;

    match commit {
        Creation::Created(response) => {
            tracing::info!(%patron_id, %branch_id, %card_number, "patron registered");
            Ok(response)
        }
        // The branch first: a request at a branch that does not exist is a 404, whatever else.
        Creation::Cancelled(cancelled) if cancelled.failed(Part::Branch) => {
            Err(ApiError::not_found("branch"))
        }
        Creation::Cancelled(cancelled) if cancelled.failed(Part::Card) => Err(ApiError::conflict(
            vec![FieldError::new("cardNumber", Code::Taken)],
        )),
        // Only an id derived from a spent Idempotency-Key can already exist.
        Creation::Cancelled(_) => Err(idempotency::spent_key()),
    }
}
