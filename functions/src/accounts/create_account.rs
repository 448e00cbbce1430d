//! `POST /accounts` `{email, username, displayName?}` → `201` account.
//!
//! One `TransactWriteItems`: the account and one lock per unique attribute (the locks the model
//! declares an account holds, `AccountRow::locks`), each put guarded by `attribute_not_exists`. The `409` names every attribute whose lock was taken (both when both
//! are), read from the cancellation by part, never by index. Safe to retry with
//! `Idempotency-Key`.

use super::{Account, AccountRow, MAX_DISPLAY_NAME_LEN, Part, owner_lock};
use crate::claims::principal;
use crate::clock;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{self, IdFrom, Idempotency, commit, new_id};
use crate::recording::outbox;
use crate::store::{Put, Transaction, lock};
use lambda_http::Request;
use singlet_shared::{Email, Id, Username};

/// A valid `POST /accounts` body: what the route and `import` check every account with.
pub struct NewAccount {
    email: Email,
    username: Username,
    display_name: Option<String>,
}

/// Checks a body as the route does: every field at fault in one `400`.
pub fn validate(body: &JsonBody) -> Result<NewAccount, ApiError> {
    let (email, username, display_name) = (
        body.required("email", Email::parse),
        body.required("username", Username::parse),
        body.optional_text("displayName", MAX_DISPLAY_NAME_LEN),
    )
        .all_valid()?;
    Ok(NewAccount {
        email,
        username,
        display_name,
    })
}

impl NewAccount {
    /// The account, named `account_id`, created at `created_at` (epoch milliseconds).
    pub fn account(self, account_id: Id, created_at: i64) -> Account {
        Account {
            account_id,
            email: self.email,
            username: self.username,
            display_name: self.display_name,
            created_at,
        }
    }
}

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let valid = validate(&body)?;
    let idempotency = Idempotency::from_request(ctx, &req, &body.value())?;
    let account_id = new_id(idempotency.as_ref());
    let account = valid.account(account_id.clone(), clock::now_millis());
    let response = created(format!("/accounts/{account_id}"), &account);

    let caller = principal(&req);
    // A subject owns one account; `accounts:admin` makes any number, for anyone.
    let owners_one = !caller.has_scope("accounts:admin");
    let row = AccountRow {
        account: account.clone(),
        owner: caller.subject.clone(),
        owners_one,
    };
    let mut transaction = Transaction::new()
        .put(Part::Account, Put::new_only(&row))
        .claim_locks_of(&row, Part::Claim);
    if owners_one {
        transaction = transaction.put(
            Part::OwnerLock,
            lock::claim(&owner_lock(ctx, &caller.subject, &account_id)),
        );
    }
    let transaction = transaction.put(
        Part::Event,
        outbox(
            &req,
            Event::new(EventType::AccountCreated, &account_id, &account),
        ),
    );
    let done = commit(ctx, transaction, &idempotency, IdFrom::Key, response).await?;
    let response = done.answer(|cancelled| {
        // Only an id derived from a spent Idempotency-Key can already exist.
        if cancelled.failed(Part::Account) {
            return idempotency::spent_key();
        }
        let mut taken = lock::taken(&cancelled, &row, Part::Claim);
        if cancelled.failed(Part::OwnerLock) {
            taken.push(FieldError::new("owner", Code::LimitReached));
        }
        ApiError::conflict(taken)
    })?;
    tracing::info!(%account_id, "account created");
    Ok(response)
}
