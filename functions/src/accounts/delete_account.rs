//! `DELETE /accounts/{accountId}` → `204`; the account and both locks are gone, so the email and
//! the username can be claimed again at once.
//!
//! Read the account (to learn its email and username), then one `TransactWriteItems` deleting
//! the account only if it still holds what we read, and each lock only if it still names this
//! account.

use super::{HELD_BY_ACCOUNT, MAX_ATTEMPTS, Part, Unique, load};
use crate::db::{Commit, Ctx, Transaction, s};
use crate::error::ApiError;
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use lambda_http::Request;
use singlet_shared::keys;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (account_id,) = (path_id(&req, "accountId"),).all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let account = load(ctx, &account_id).await?;
        let mut transaction = Transaction::new().delete(
            Part::Account,
            ctx.delete(&keys::account(&account_id))
                .condition_expression("email = :email AND username = :username")
                .expression_attribute_values(":email", s(&account.email))
                .expression_attribute_values(":username", s(&account.username)),
        );
        for (unique, value) in [
            (Unique::Email, &account.email),
            (Unique::Username, &account.username),
        ] {
            let value = unique.parse(value).map_err(|_| ApiError::Internal)?;
            transaction = transaction.delete(
                Part::OldLock(unique),
                ctx.delete(&value.lock_key())
                    .condition_expression(HELD_BY_ACCOUNT)
                    .expression_attribute_values(":accountId", s(account_id.as_str())),
            );
        }
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
