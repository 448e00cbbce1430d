//! `POST /branches/{branchId}/patrons` `{cardNumber, firstName, lastName, email, membershipTier}`
//! → `201` patron, `location: /patrons/{patronId}`; `404` branch; `409` `cardNumber` `taken`.
//!
//! One `TransactWriteItems` of three parts: a `ConditionCheck` that the branch exists, the
//! patron row (with its GSI1 keys, so it can be found by id alone), and the card lock
//! `CARD#<cardNumber>` naming the patron, both puts guarded by `attribute_not_exists`. The card
//! number is normalised first (NFKC, lower case, trimmed: `C-1`, `c-1` and `Ｃ-１` are one card). So a
//! patron never exists at a branch that does not, nor without its card, nor a card without its
//! patron; of any number of concurrent registrations of one card, one wins. The patron id is
//! generated here, derived from the `Idempotency-Key` when there is one.
//!
//! The tier's limits are copied onto the row with `activeLoans` at 0, so a checkout guards its
//! increment with `activeLoans < loanLimit` on this one item.

use super::{Branch, MAX_NAME_LEN, Patron, Tier};
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, created, path_id};
use crate::idempotency::{self, IdFrom, Idempotency, commit, new_id};
use crate::recording::outbox;
use crate::store::lock::{self, LockPart};
use crate::store::{Check, Condition, Put, Transaction};
use lambda_http::Request;
use singlet_shared::{CardNumber, Email, Id};

/// The transaction's parts, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Branch,
    Patron,
    Lock(LockPart),
    Event,
}

/// A valid `POST /branches/{branchId}/patrons` body at its branch: what the route and `import`
/// check every patron with.
pub struct NewPatron {
    branch_id: Id,
    card_number: CardNumber,
    first_name: String,
    last_name: String,
    email: Email,
    tier: Tier,
}

/// Checks a body and its branch's id (the path's, or an imported row's `branchId`) as the route
/// does: every field at fault in one `400`.
pub fn validate(body: &JsonBody, branch_id: Result<Id, FieldError>) -> Result<NewPatron, ApiError> {
    let (branch_id, card_number, first_name, last_name, email, tier) = (
        branch_id,
        body.required("cardNumber", CardNumber::parse),
        body.text("firstName", MAX_NAME_LEN),
        body.text("lastName", MAX_NAME_LEN),
        body.required("email", Email::parse),
        body.required("membershipTier", Tier::parse),
    )
        .all_valid()?;
    Ok(NewPatron {
        branch_id,
        card_number,
        first_name,
        last_name,
        email,
        tier,
    })
}

impl NewPatron {
    /// The patron, named `patron_id`, registered at `at`, with its tier's limits and no loans.
    pub fn patron(self, patron_id: Id, at: time::OffsetDateTime) -> Patron {
        Patron {
            patron_id,
            branch_id: self.branch_id,
            card_number: self.card_number,
            first_name: self.first_name,
            last_name: self.last_name,
            email: self.email,
            membership_tier: self.tier,
            loan_limit: self.tier.loan_limit(),
            loan_period_days: self.tier.loan_period_days(),
            active_loans: 0,
            created_at: clock::iso(at),
        }
    }
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let valid = validate(&body, path_id(&req, "branchId"))?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let patron_id = new_id(idempotency.as_ref());
    let patron = valid.patron(patron_id.clone(), clock::now());
    let branch_id = patron.branch_id.clone();
    let response = created(format!("/patrons/{patron_id}"), &patron);

    let transaction = Transaction::new()
        .check(
            Part::Branch,
            Check::<Branch>::at(Branch::key_of(&branch_id), Condition::exists()),
        )
        .put(Part::Patron, Put::new_only(&patron))
        .claim_locks_of(&patron, Part::Lock)
        .put(
            Part::Event,
            outbox(
                &req,
                Event::new(EventType::PatronRegistered, &patron_id, &patron),
            ),
        );

    let done = commit(ctx, transaction, &idempotency, IdFrom::Key, response).await?;
    let response = done.answer(|cancelled| {
        // The branch first: a request at a branch that does not exist is a 404, whatever else.
        if cancelled.failed(Part::Branch) {
            return ApiError::not_found("branch");
        }
        match lock::taken(&cancelled, &patron, Part::Lock) {
            // Only an id derived from a spent Idempotency-Key can already exist.
            taken if taken.is_empty() => idempotency::spent_key(),
            taken => ApiError::conflict(taken),
        }
    })?;
    tracing::info!(%patron_id, %branch_id, "patron registered");
    Ok(response)
}
