//! Accounts, unique on two attributes: email and username.
//!
//! The account `ACCT#<id>`/`PROFILE` and one lock per unique value, `UNIQ#EMAIL#<email>`/`LOCK`
//! and `UNIQ#HANDLE#<username>`/`LOCK`, each naming the account that holds it. The unique
//! attributes are one type, [`Unique`], and a transaction's parts are `Part::Account` and
//! `Part::Lock(Unique)`: a cancellation is read by what each part is, so adding a third unique
//! attribute is one more variant, never a shifted index.

pub mod change_email;
pub mod change_username;
pub mod check_email;
pub mod check_username;
pub mod create_account;
pub mod delete_account;
pub mod get_account;

use crate::claims::principal;
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::events::{Event, EventType};
use crate::http::{AllValid, HandlerResult, JsonBody, ok, path, path_id};
use crate::ids::IdKey;
use crate::model::Field;
use crate::recording::outbox;
use crate::store::lock::{self, Swapped};
use crate::store::{Commit, Condition, Put, RACE_ATTEMPTS, Transaction, Update};
use lambda_http::Request;
use singlet_shared::{Email, Id, Invalid, Key, Username};

pub use crate::model::accounts::{Account, AccountRow, EmailLock, OwnerLock, UsernameLock};

/// The lock that keeps a subject without `accounts:admin` to one account: keyed by a keyed hash
/// of its subject, naming the account.
pub fn owner_lock(ctx: &Ctx, owner: &str, account_id: &Id) -> OwnerLock {
    owner_lock_under(&ctx.owners, owner, account_id)
}

/// [`owner_lock`] under the key `ids` alone: `fsck` recomputes every account's with the owner key.
pub fn owner_lock_under(ids: &IdKey, owner: &str, account_id: &Id) -> OwnerLock {
    OwnerLock {
        pseudonym: ids.pseudonym("account owner", &[owner]),
        account_id: account_id.clone(),
    }
}

/// The attributes that are unique across all accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unique {
    Email,
    Username,
}

impl Unique {
    pub const ALL: [Unique; 2] = [Unique::Email, Unique::Username];

    /// The event of a change of this attribute to `value`: the account as it is after it.
    pub fn event(self, account_id: &Id, value: &UniqueValue, account: &Account) -> Event {
        let mut changed = account.clone();
        value.set_on(&mut changed);
        let kind = match self {
            Unique::Email => EventType::AccountEmailChanged,
            Unique::Username => EventType::AccountUsernameChanged,
        };
        Event::new(kind, account_id, &changed)
    }

    /// The field's name in bodies, errors and the account item.
    pub fn field(self) -> &'static str {
        match self {
            Unique::Email => "email",
            Unique::Username => "username",
        }
    }

    /// The account's attribute holding the value.
    pub fn attribute(self) -> Field<AccountRow> {
        match self {
            Unique::Email => AccountRow::EMAIL,
            Unique::Username => AccountRow::USERNAME,
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
            UniqueValue::Email(email) => EmailLock::key_of(email).into_key(),
            UniqueValue::Username(username) => UsernameLock::key_of(username).into_key(),
        }
    }

    /// A put of this value's lock naming `account_id`, unless another holds it.
    pub fn claim(&self, account_id: &Id) -> Put {
        match self {
            UniqueValue::Email(email) => lock::claim(&email_lock(account_id, email)),
            UniqueValue::Username(username) => lock::claim(&username_lock(account_id, username)),
        }
    }

    /// Moves the account `account_id` from `old` (of the same attribute) to this value: its
    /// lock claimed, the old one released, the account updated only if it still holds `old`,
    /// and `event` put.
    async fn swap(
        &self,
        ctx: &Ctx,
        old: &UniqueValue,
        account_id: &Id,
        event: Put,
    ) -> Result<Swapped, ApiError> {
        let attribute = self.kind().attribute();
        let update = Update::<AccountRow>::at(AccountRow::key_of(account_id))
            .set(attribute, self.as_str())
            .when(Condition::equals(attribute, old.as_str()));
        match (self, old) {
            (UniqueValue::Email(new), UniqueValue::Email(old)) => {
                let (new, old) = (email_lock(account_id, new), email_lock(account_id, old));
                lock::swap(ctx, &new, &old, update, event).await
            }
            (UniqueValue::Username(new), UniqueValue::Username(old)) => {
                let (new, old) = (
                    username_lock(account_id, new),
                    username_lock(account_id, old),
                );
                lock::swap(ctx, &new, &old, update, event).await
            }
            _ => unreachable!("a value is swapped for one of the same attribute"),
        }
    }

    /// The put that rewrites this value's lock, held by `account_id` under another spelling of
    /// it (one key), to this spelling ([`lock::respell`]).
    fn respelled_lock(&self, account_id: &Id) -> Put {
        match self {
            UniqueValue::Email(email) => lock::respell(&email_lock(account_id, email)),
            UniqueValue::Username(username) => lock::respell(&username_lock(account_id, username)),
        }
    }

    /// Whether this value's lock, as a cancelled write found it (`old`), names another account.
    fn held_by_other(&self, old: Option<&crate::store::Item>, account_id: &Id) -> bool {
        match self {
            UniqueValue::Email(_) => lock::held_by_other::<EmailLock>(old, account_id.as_str()),
            UniqueValue::Username(_) => {
                lock::held_by_other::<UsernameLock>(old, account_id.as_str())
            }
        }
    }

    /// The account's current value of the same attribute.
    pub fn current(&self, account: &Account) -> UniqueValue {
        match self {
            UniqueValue::Email(_) => UniqueValue::Email(account.email.clone()),
            UniqueValue::Username(_) => UniqueValue::Username(account.username.clone()),
        }
    }

    /// Sets this value on `account`.
    pub fn set_on(&self, account: &mut Account) {
        match self {
            UniqueValue::Email(email) => account.email = email.clone(),
            UniqueValue::Username(username) => account.username = username.clone(),
        }
    }
}

/// The lock of `email` naming `account_id`.
pub fn email_lock(account_id: &Id, email: &Email) -> EmailLock {
    EmailLock {
        account_id: account_id.clone(),
        value: email.clone(),
    }
}

/// The lock of `username` naming `account_id`.
pub fn username_lock(account_id: &Id, username: &Username) -> UsernameLock {
    UsernameLock {
        account_id: account_id.clone(),
        value: username.clone(),
    }
}

/// The parts of every account transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Account,
    /// The lock being claimed.
    Lock(Unique),
    /// A lock the account declares ([`AccountRow`]'s `locks`), claimed with a new account.
    Claim(crate::store::lock::LockPart),
    /// The lock being released.
    OldLock(Unique),
    /// What the table keeps of the deleted entity beside it: the record of the
    /// `Idempotency-Key` that created it, if one did (a tombstone now), and its outbox items
    /// ([`crate::recording::forgetting`]).
    Forgotten,
    /// The owner's one account ([`owner_lock`]).
    OwnerLock,
    /// The change's event.
    Event,
}

pub const MAX_DISPLAY_NAME_LEN: usize = 100;

/// One strongly consistent read of an account the caller may reach, or `404`: another subject's
/// account is answered as if it did not exist.
pub async fn load(ctx: &Ctx, req: &Request, account_id: &Id) -> Result<Account, ApiError> {
    load_row(ctx, req, account_id).await.map(|row| row.account)
}

/// [`load`], with what the account row keeps beside the account.
pub async fn load_row(ctx: &Ctx, req: &Request, account_id: &Id) -> Result<AccountRow, ApiError> {
    ctx.get::<AccountRow>(&AccountRow::key_of(account_id))
        .await?
        .filter(|row| principal(req).may_reach_account(&row.owner))
        .ok_or_else(|| ApiError::not_found("account"))
}

/// `GET /emails/{email}`, `GET /usernames/{username}`: whether a value is free to claim, normalised
/// exactly as sign-up normalises it (`400` for what sign-up would refuse), by one strongly
/// consistent `GetItem` of its lock and nothing else (no account is read). `200`
/// `{<field>: <normalised>, available}`. The answer is a hint, not a reservation: only the
/// claim's own `attribute_not_exists` decides, so a sign-up right after can still be `409`.
pub async fn check_unique(ctx: &Ctx, req: Request, unique: Unique) -> HandlerResult {
    let field = unique.field();
    let (value,) = (path(&req, field, |raw| unique.parse(raw)),).all_valid()?;
    let available = ctx.get_item(&value.lock_key()).await?.is_none();
    let mut body = serde_json::Map::new();
    body.insert(field.to_owned(), value.as_str().into());
    body.insert("available".to_owned(), available.into());
    Ok(ok(&body))
}

/// `PUT /accounts/{accountId}/<field>` `{<field>}`: read the account, then one transaction
/// ([`lock::swap`]) that claims the new value's lock (`attribute_not_exists`), deletes the old lock only if it still
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

    for _ in 0..RACE_ATTEMPTS {
        let mut account = load(ctx, &req, &account_id).await?;
        let old = value.current(&account);
        if old == value {
            return Ok(ok(&account));
        }

        let event = outbox(&req, unique.event(&account_id, &value, &account));
        // A look-alike of the account's own value has the same lock: it is spelled anew, and
        // nothing is claimed or released.
        if value.lock_key() == old.lock_key() {
            let attribute = value.kind().attribute();
            let update = Update::<AccountRow>::at(AccountRow::key_of(&account_id))
                .set(attribute, value.as_str())
                .when(Condition::equals(attribute, old.as_str()));
            let respelled = Transaction::new()
                .update(Part::Account, update)
                .put(Part::Lock(unique), value.respelled_lock(&account_id))
                .put(Part::Event, event)
                .commit(ctx)
                .await?;
            match respelled {
                Commit::Done => {
                    tracing::info!(%account_id, field, "unique value respelled");
                    value.set_on(&mut account);
                    return Ok(ok(&account));
                }
                Commit::Cancelled(cancelled)
                    if value.held_by_other(cancelled.old(Part::Lock(unique)), &account_id) =>
                {
                    return Err(ApiError::conflict(vec![FieldError::new(
                        field,
                        Code::Taken,
                    )]));
                }
                // The account changed since we read it: read it again.
                Commit::Cancelled(_) => continue,
            }
        }
        match value.swap(ctx, &old, &account_id, event).await? {
            Swapped::Done => {
                tracing::info!(%account_id, field, "unique value changed");
                value.set_on(&mut account);
                return Ok(ok(&account));
            }
            Swapped::Taken => {
                return Err(ApiError::conflict(vec![FieldError::new(
                    field,
                    Code::Taken,
                )]));
            }
            // The account changed since we read it: read it again.
            Swapped::OwnerChanged(_) | Swapped::LockDisagrees => {}
        }
    }
    Err(ApiError::Unavailable)
}
