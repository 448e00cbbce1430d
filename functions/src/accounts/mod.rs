//! Accounts, unique on two attributes: email and username.
//!
//! The account `ACCT#<id>`/`PROFILE` and one lock per unique value, `UNIQ#EMAIL#<email>`/`LOCK`
//! and `UNIQ#HANDLE#<username>`/`LOCK`, each naming the account that holds it. The unique
//! attributes are one type, [`Unique`], and a transaction's parts are `Part::Account` and
//! `Part::Lock(Unique)`: a cancellation is read by what each part is, so adding a third unique
//! attribute is one more variant, never a shifted index.

pub mod change_email;
pub mod change_username;
pub mod create_account;
pub mod delete_account;
pub mod get_account;

use crate::db::{ABSENT, Commit, Ctx, Transaction, from_item, item, s};
use crate::error::{ApiError, Code, FieldError};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path_id};
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use lambda_http::Request;
use serde::{Deserialize, Serialize};
use singlet_shared::{Email, Id, Invalid, Key, Username, keys};

/// The account row, and the response body of every account route.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub account_id: String,
    pub email: String,
    pub username: String,
    pub display_name: Option<String>,
    pub created_at: i64,
}

/// A lock item: which account holds a unique value.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UniqueLock {
    pub account_id: String,
    pub value: String,
}

/// The attributes that are unique across all accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unique {
    Email,
    Username,
}

impl Unique {
    pub const ALL: [Unique; 2] = [Unique::Email, Unique::Username];

    /// The field's name in bodies, errors and the account item.
    pub fn field(self) -> &'static str {
        match self {
            Unique::Email => "email",
            Unique::Username => "username",
        }
    }

    /// Normalises a raw value; see `singlet_shared::normalise` for the rules.
    pub fn parse(self, raw: &str) -> Result<UniqueValue, Invalid> {
        match self {
            Unique::Email => Email::parse(raw).map(UniqueValue::Email),
            Unique::Username => Username::parse(raw).map(UniqueValue::Username),
        }
    }
}

/// A normalised unique value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UniqueValue {
    Email(Email),
    Username(Username),
}

impl UniqueValue {
    pub fn kind(&self) -> Unique {
        match self {
            UniqueValue::Email(_) => Unique::Email,
            UniqueValue::Username(_) => Unique::Username,
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            UniqueValue::Email(email) => email.as_str(),
            UniqueValue::Username(username) => username.as_str(),
        }
    }

    pub fn lock_key(&self) -> Key {
        match self {
            UniqueValue::Email(email) => keys::email_lock(email),
            UniqueValue::Username(username) => keys::handle_lock(username),
        }
    }

    pub fn lock(&self, account_id: &Id) -> UniqueLock {
        UniqueLock {
            account_id: account_id.to_string(),
            value: self.as_str().to_owned(),
        }
    }
}

/// The parts of every account transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Account,
    /// The lock being claimed.
    Lock(Unique),
    /// The lock being released.
    OldLock(Unique),
}

/// A lock may be deleted only by the account it names.
pub const HELD_BY_ACCOUNT: &str = "accountId = :accountId";

pub const MAX_DISPLAY_NAME_LEN: usize = 100;
pub const MAX_ATTEMPTS: usize = 3;

/// One strongly consistent read of an account, or `404`.
pub async fn load(ctx: &Ctx, account_id: &Id) -> Result<Account, ApiError> {
    ctx.get(&keys::account(account_id))
        .await?
        .ok_or_else(|| ApiError::not_found("account"))
}

/// `PUT /accounts/{accountId}/<field>` `{<field>}`: read the account, then one transaction that
/// claims the new value's lock (`attribute_not_exists`), deletes the old lock only if it still
/// names this account, and updates the account only if it still holds the old value. An account
/// changed between the read and the write is read again; a value held by another account is `409`.
pub async fn change_unique(ctx: &Ctx, req: Request, unique: Unique) -> HandlerResult {
    let body = JsonBody::from_request(&req)?;
    let field = unique.field();
    let (account_id, value) = (
        path_id(&req, "accountId"),
        body.required(field, |raw| unique.parse(raw)),
    )
        .all_valid()?;

    for _ in 0..MAX_ATTEMPTS {
        let mut account = load(ctx, &account_id).await?;
        let current = match unique {
            Unique::Email => &account.email,
            Unique::Username => &account.username,
        };
        if current == value.as_str() {
            return Ok(ok(&account));
        }
        let old = unique.parse(current).map_err(|_| ApiError::Internal)?;

        let commit = Transaction::new()
            .put(
                Part::Lock(unique),
                ctx.put(item(&value.lock_key(), &value.lock(&account_id)))
                    .condition_expression(ABSENT)
                    .return_values_on_condition_check_failure(
                        ReturnValuesOnConditionCheckFailure::AllOld,
                    ),
            )
            .delete(
                Part::OldLock(unique),
                ctx.delete(&old.lock_key())
                    .condition_expression(HELD_BY_ACCOUNT)
                    .expression_attribute_values(":accountId", s(account_id.as_str())),
            )
            .update(
                Part::Account,
                ctx.update(&keys::account(&account_id))
                    .update_expression("SET #field = :new")
                    .condition_expression("#field = :old")
                    .expression_attribute_names("#field", field)
                    .expression_attribute_values(":new", s(value.as_str()))
                    .expression_attribute_values(":old", s(old.as_str())),
            )
            .commit(ctx)
            .await?;

        match commit {
            Commit::Done => {
                tracing::info!(%account_id, field, "unique value changed");
                match &value {
                    UniqueValue::Email(email) => account.email = email.to_string(),
                    UniqueValue::Username(username) => account.username = username.to_string(),
                }
                return Ok(ok(&account));
            }
            Commit::Cancelled(cancelled) => {
                let holder = cancelled
                    .old(Part::Lock(unique))
                    .map(from_item::<UniqueLock>)
                    .transpose()?;
                if holder.is_some_and(|lock| lock.account_id != account_id.as_str()) {
                    return Err(ApiError::conflict(vec![FieldError::new(
                        field,
                        Code::Taken,
                    )]));
                }
                // The account changed since we read it: read it again.
            }
        }
    }
    Err(ApiError::Unavailable)
}
