//! `DELETE /accounts/{accountId}` → `204`; the account and both locks are gone, so the email and
//! the username can be claimed again at once.
//!
//! Read the account (to learn its email and username), then one `TransactWriteItems` deleting
//! the account only if it still holds what we read, releasing each lock (and its owner's
//! one-account lock) only if it still names this account, and leaving the `Idempotency-Key`
//! record that created it, if any, with no personal data (a replay is then `410`) and none of
//! its outbox items, which hold its emails and usernames ([`recording::forgetting`]).

use super::{AccountRow, Part, Unique, email_lock, load_row, owner_lock, username_lock};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, no_content, path_id};
use crate::recording::{self, outbox};
use crate::store::{Commit, Condition, Delete, RACE_ATTEMPTS, Transaction, lock};
use lambda_http::Request;

pub async fn handle(ctx: &Ctx, req: Request) -> HandlerResult {
    let (account_id,) = (path_id(&req, "accountId"),).all_valid()?;

    for _ in 0..RACE_ATTEMPTS {
        let row = load_row(ctx, &req, &account_id).await?;
        let account = &row.account;
        let mut transaction = Transaction::new()
            .delete(
                Part::Account,
                Delete::<AccountRow>::at(AccountRow::key_of(&account_id)).when(
                    Condition::equals(AccountRow::EMAIL, &account.email)
                        .and_equals(AccountRow::USERNAME, &account.username),
                ),
            )
            .delete(
                Part::OldLock(Unique::Email),
                lock::release(&email_lock(&account_id, &account.email)),
            )
            .delete(
                Part::OldLock(Unique::Username),
                lock::release(&username_lock(&account_id, &account.username)),
            )
            .put(
                Part::Event,
                outbox(&req, Event::deleted(EventType::AccountDeleted, &account_id)),
            );
        // Its owner may make another account now.
        if row.owners_one {
            transaction = transaction.delete(
                Part::OwnerLock,
                lock::release(&owner_lock(ctx, &row.owner, &account_id)),
            );
        }
        let transaction = recording::forgetting(
            ctx,
            transaction,
            Part::Forgotten,
            &req,
            EventType::AccountDeleted,
            &account_id,
        )
        .await?;
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
