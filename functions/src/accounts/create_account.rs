//! `POST /accounts` `{email, username, displayName?}` → `201` account.
//!
//! One `TransactWriteItems`: the account and one lock per unique attribute, each put guarded by
//! `attribute_not_exists`. The `409` names every attribute whose lock was taken (both when both
//! are), read from the cancellation by part, never by index. Safe to retry with
//! `Idempotency-Key`.

use super::{Account, MAX_DISPLAY_NAME_LEN, Part, Unique};
use crate::clock;
use crate::db::{ABSENT, Creation, Ctx, Transaction, item};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, JsonBody, created};
use crate::idempotency::{self, Idempotency, new_id};
use lambda_http::Request;
use singlet_shared::keys;

pub const ROUTE: &str = "create-account";

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let (email, username, display_name) = (
        body.required("email", |raw| Unique::Email.parse(raw)),
        body.required("username", |raw| Unique::Username.parse(raw)),
        body.optional_text("displayName", MAX_DISPLAY_NAME_LEN),
    )
        .all_valid()?;
    let idempotency = Idempotency::from_request(&req, ROUTE, &body.value())?;
    let account_id = new_id(idempotency.as_ref());

    let account = Account {
        account_id: account_id.to_string(),
        email: email.as_str().to_owned(),
        username: username.as_str().to_owned(),
        display_name,
        created_at: clock::now_millis(),
    };
    let response = created(format!("/accounts/{account_id}"), &account);

    let mut transaction = Transaction::new().put(
        Part::Account,
        ctx.put(item(&keys::account(&account_id), &account))
            .condition_expression(ABSENT),
    );
    for value in [&email, &username] {
        transaction = transaction.put(
            Part::Lock(value.kind()),
            ctx.put(item(&value.lock_key(), &value.lock(&account_id)))
                .condition_expression(ABSENT),
        );
    }
    match transaction
        .commit_creating(ctx, idempotency, response)
        .await?
    {
        Creation::Created(response) => {
            tracing::info!(%account_id, "account created");
            Ok(response)
        }
        // Only an id derived from a spent Idempotency-Key can already exist.
        Creation::Cancelled(cancelled) if cancelled.failed(Part::Account) => {
            Err(idempotency::spent_key())
        }
        Creation::Cancelled(cancelled) => Err(ApiError::conflict(
            Unique::ALL
                .into_iter()
                .filter(|unique| cancelled.failed(Part::Lock(*unique)))
                .map(|unique| FieldError::new(unique.field(), Code::Taken))
                .collect(),
        )),
    }
}
