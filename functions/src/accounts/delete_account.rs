//! `DELETE /accounts/{accountId}` → `204`; the account and both locks are gone, so the email and
//! the username can be claimed again at once.
//!
//! Read the account (to learn its email and username), then one `TransactWriteItems` deleting
//! the account only if it still holds what we read, and releasing each lock only if it still
//! names this account.

use super::{HOLDER, MAX_ATTEMPTS, Part, UniqueValue, load};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType, outbox};
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use crate::store::{Commit, Transaction, lock, s};
use lambda_http::Request;
use singlet_shared::keys;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (account_id,) = (path_id(&req, "accountId"),).all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let account = load(ctx, &req, &account_id).await?;
        let mut transaction = Transaction::new().delete(
            Part::Account,
            ctx.delete(&keys::account(&account_id))
                .condition_expression("email = :email AND username = :username")
                .expression_attribute_values(":email", s(account.email.as_str()))
                .expression_attribute_values(":username", s(account.username.as_str())),
        );
        for value in [
            UniqueValue::Email(account.email.clone()),
            UniqueValue::Username(account.username.clone()),
        ] {
            transaction = transaction.delete(
                Part::OldLock(value.kind()),
                lock::release(ctx, &value.lock_key(), HOLDER, &account_id),
            );
        }
        let transaction = transaction.put(
            Part::Event,
            outbox(
                ctx,
                &req,
                Event::deleted(EventType::AccountDeleted, &account_id),
            ),
        );
        match transaction.commit(ctx).await? {
            Commit::Done => {
                tracing::info!(%account_id, "account deleted");
                return Ok(no_content());
            }
            // Changed or deleted since we read it: read again (a deleted account is then 404).
            Commit::Cancelled(cancelled) if cancelled.failed(Part::Account) => {}
            Commit::Cancelled(_) => {
                tracing::error!(%account_id, "a lock of this account names another account");
                return Err(ApiError::Internal);
            }
        }
    }
    Err(ApiError::Unavailable)
}
