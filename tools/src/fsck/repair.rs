//! Repairs: each a conditional write on the items exactly as the confirmation read them, so that
//! a repair never undoes a write that came after, a second `--repair` finds nothing to write, and
//! a lock is never taken from an owner that holds its value. Written as the store's typed writes
//! (`Put`, `Update<E>`, `Delete<E>`, `Check<E>` on the entity's own fields), as every handler's.
//!
//! A repair that depends on a second item says so with a `Check` on it in the same transaction: a
//! lock is claimed only while its owner still holds the value, and an orphan is released only
//! while the owner it names is still absent or still holds another value.

use super::entity::{Claim, LockKind};
use singlet_functions::Ctx;
use singlet_functions::accounts::{AccountRow, EmailLock, OwnerLock, UsernameLock};
use singlet_functions::error::ApiError;
use singlet_functions::events::outbox::{self, OutboxItem};
use singlet_functions::fleet::{ChassisLock, PlateLock, Vehicle};
use singlet_functions::idempotency;
use singlet_functions::library::{BookAvailability, Copy, Patron, PatronCard};
use singlet_functions::loans::Checkout;
use singlet_functions::model::idempotency::{IdLock, IdempotencyRecord};
use singlet_functions::model::{Entity, Field, Held, KeyOf, TableEntity};
use singlet_functions::store::pace::{KeyRef, units_per_key};
use singlet_functions::store::{Check, Commit, Condition, Transaction, Update, lock};
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{INDEXES, Index, TTL_ATTRIBUTE};
use singlet_shared::{Id, IndexKey, Isbn13, Key};
use std::time::{SystemTime, UNIX_EPOCH};

/// What the table said about the owner a lock names, when the finding was confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The lock names an id whose owner cannot be located at all (a card lock naming a patron id
    /// that no patron has).
    Unknown,
    /// No item at the owner's key.
    Absent(Key),
    /// The owner exists and holds `value` in `field`, which is not the locked value.
    Holds {
        owner: Key,
        field: &'static str,
        value: String,
    },
}

/// A branch's count of a book's available copies, to set to `to`, the copies' count, if it is
/// still `seen` (`None`: if there is still no count).
#[derive(Debug, Clone)]
pub struct AvailableCopies {
    pub isbn: Isbn13,
    pub branch_id: Id,
    pub seen: Option<i64>,
    pub to: i64,
}

impl AvailableCopies {
    /// The count's key.
    fn key(&self) -> KeyOf<BookAvailability> {
        BookAvailability::key_of(&self.isbn, &self.branch_id)
    }
}

/// A write that makes a finding hold no more.
#[derive(Debug, Clone)]
pub enum Repair {
    /// `lock-orphan`: delete the lock, if it still names its holder and that holder's owner is
    /// still as it was (absent, or holding another value).
    ReleaseLock {
        lock: TableEntity,
        /// Where the lock was read: under an earlier rule's key (`PLATE#ka 19 xtr`) it is not
        /// where its value's key is now.
        at: Key,
        kind: LockKind,
        holder_owner: Holder,
    },
    /// `lock-missing`: put the owner's lock, where the key is free, while the owner still holds
    /// the value. A lock held by an orphan (`over`: its holder) is released first, by that
    /// orphan's own `lock-orphan` repair.
    ClaimLock { claim: Claim, over: Option<String> },
    /// `lock-orphan`, for an owner lock: delete it, if it still names its account and that
    /// account is still as it was (absent, or another subject's, or no subject's one account).
    ReleaseOwnerLock {
        lock: OwnerLock,
        account: Option<AccountRow>,
    },
    /// `lock-missing`, for an owner lock: put the account's, where the key is free, while the
    /// account is still its owner's one account. A lock held by an orphan (`over`: the account it
    /// names) is released first, by that orphan's own `lock-orphan` repair.
    ClaimOwnerLock {
        lock: OwnerLock,
        account: AccountRow,
        over: Option<Id>,
    },
    /// `active-loans`: set the counter to the open loans, if it is still `seen`.
    SetActiveLoans { patron: Key, seen: u32, open: u32 },
    /// `copy-status`: set the status (and its availability index keys) the loans say, if the
    /// status is still the one read, and, for `checked_out`, while the loan still exists.
    SetCopyStatus {
        copy: Copy,
        to: CopyStatus,
        loan: Option<KeyOf<Checkout>>,
    },
    /// `copy-status`, for a branch's count of a book's available copies: set it to `to`, the
    /// copies' count, if it is still `seen` (`None`: if there is still no count).
    SetAvailableCopies(AvailableCopies),
    /// `loan-index`: write the index keys the loan's state makes and remove any other, if the
    /// loan is still as read.
    RewriteLoanIndex {
        key: Key,
        loan: Checkout,
        set: Vec<(Index, IndexKey)>,
        remove: Vec<Index>,
        /// Every index's keys as the finding read them (partition, sort): the rewrite applies
        /// only over those, so a second run racing this one writes nothing.
        seen: Vec<(Index, Option<String>, Option<String>)>,
    },
    /// `expiry`: give an item that must expire its `expiresAt`, a day from now.
    SetExpiry { key: Key, entity: &'static str },
    /// `expiry`: take `expiresAt` off a lock or a lock's owner, if it is still `seen`.
    RemoveExpiry {
        key: Key,
        entity: &'static str,
        seen: u64,
    },
}

/// Why a repair wrote nothing and was not simply outdated.
#[derive(Debug)]
pub enum Refused {
    /// The table throttled it (a hot key): back-pressure, to be tried again.
    Throttled,
    /// Anything else: the run stops.
    Cannot(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Throttled => f.write_str("the table throttled a repair past its retries"),
            Refused::Cannot(reason) => f.write_str(reason),
        }
    }
}

/// The parts of a repair's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Lock,
    Owner,
    Copy,
    Loan,
}

/// Whether `--repair` can set `expiresAt` on an item of type `entity` that lacks it: a type whose
/// end counts from now ([`Repair::SetExpiry`]). A returned loan's counts from its return and the
/// deployment's `LoanHistoryDays`, which `migrate returned-loans-expire` is given and `fsck` is
/// not: that finding is report only.
pub fn set_expiry_repairable(entity: &str) -> bool {
    ["idempotency-record", "outbox"].contains(&entity)
}

/// The entity types whose `expiresAt` a repair can remove (every type the `expiry` rule names
/// that the registry has); [`set_expiry_repairable`] says which it can set it on.
pub fn expiry_repairable(entity: &str) -> bool {
    [
        "vehicle",
        "account",
        "patron",
        "plate-lock",
        "chassis-lock",
        "email-lock",
        "username-lock",
        "card-lock",
        "id-lock",
        "idempotency-record",
        "loan",
        "owner-lock",
        "outbox",
    ]
    .contains(&entity)
}

impl Repair {
    /// Releases come before claims: a lock taken over from an orphan is then simply free.
    pub fn order(&self) -> u8 {
        match self {
            Repair::ReleaseLock { .. } | Repair::ReleaseOwnerLock { .. } => 0,
            Repair::ClaimLock { .. } | Repair::ClaimOwnerLock { .. } => 1,
            _ => 2,
        }
    }

    /// What the repair writes, in words, for `--dry-run`.
    pub fn describe(&self) -> String {
        let at = |key: &Key| format!("{} / {}", key.pk, key.sk);
        match self {
            Repair::ReleaseLock { at: key, kind, .. } => format!(
                "delete {} if it still names the same {}",
                at(key),
                kind.holder
            ),
            Repair::ClaimLock { claim, over } => {
                let over = match over {
                    None => "if the key is free".to_owned(),
                    Some(holder) => format!(
                        "once the orphan naming {} {holder} is deleted",
                        claim.kind.holder
                    ),
                };
                format!(
                    "put {} naming {} {}, {over}, while the owner still holds its {}",
                    at(&claim.lock_key),
                    claim.kind.holder,
                    claim.holder,
                    claim.kind.value
                )
            }
            Repair::ReleaseOwnerLock { lock, .. } => format!(
                "delete {} if it still names the same {}",
                at(&lock.key()),
                OwnerLock::HOLDER.name()
            ),
            Repair::ClaimOwnerLock { lock, over, .. } => {
                let over = match over {
                    None => "if the key is free".to_owned(),
                    Some(account) => format!(
                        "once the orphan naming {} {account} is deleted",
                        OwnerLock::HOLDER.name()
                    ),
                };
                format!(
                    "put {} naming {} {}, {over}, while the account is still its owner's one",
                    at(&lock.key()),
                    OwnerLock::HOLDER.name(),
                    lock.account_id
                )
            }
            Repair::SetActiveLoans { patron, seen, open } => {
                format!("set activeLoans of {} from {seen} to {open}", at(patron))
            }
            Repair::SetAvailableCopies(count) => {
                let (key, to) = (count.key(), count.to);
                match count.seen {
                    Some(seen) => format!(
                        "set {} of {} from {seen} to {to}",
                        BookAvailability::AVAILABLE_COPIES.name(),
                        at(&key)
                    ),
                    None => format!("put {} with {to}, if there is still none", at(&key)),
                }
            }
            Repair::SetCopyStatus { copy, to, .. } => format!(
                "set status of {} from {} to {} (and its availability index keys)",
                at(&copy.key()),
                copy.status.as_str(),
                to.as_str()
            ),
            Repair::RewriteLoanIndex {
                key, set, remove, ..
            } => {
                let mut parts: Vec<String> = set
                    .iter()
                    .map(|(index, _)| format!("set {} keys", index.name))
                    .collect();
                parts.extend(
                    remove
                        .iter()
                        .map(|index| format!("remove {} keys", index.name)),
                );
                format!("{} on {}", parts.join(", "), at(key))
            }
            Repair::SetExpiry { key, .. } => {
                format!("set expiresAt on {} to a day from now", at(key))
            }
            Repair::RemoveExpiry { key, .. } => format!("remove expiresAt from {}", at(key)),
        }
    }

    /// The partition keys the repair writes, of the table and of each index, with the units
    /// each takes (a transaction's table writes and checks count twice): what `--max-key-wcu`
    /// paces. A condition check is billed as a write on the item it checks.
    pub fn keys_written(&self) -> Vec<(KeyRef, f64)> {
        let table = |key: &Key| KeyRef::table(key.pk.clone());
        let holder = |holder: &Holder| match holder {
            Holder::Unknown => None,
            Holder::Absent(owner) | Holder::Holds { owner, .. } => Some(table(owner)),
        };
        let (keys, transactional): (Vec<KeyRef>, bool) = match self {
            Repair::ReleaseLock {
                at, holder_owner, ..
            } => (
                std::iter::once(table(at))
                    .chain(holder(holder_owner))
                    .collect(),
                true,
            ),
            Repair::ClaimLock { claim, .. } => {
                (vec![table(&claim.lock_key), table(&claim.owner)], true)
            }
            Repair::ReleaseOwnerLock { lock, .. } => (
                vec![table(&lock.key()), table(&keys::account(&lock.account_id))],
                true,
            ),
            Repair::ClaimOwnerLock { lock, account, .. } => {
                (vec![table(&lock.key()), table(&account.key())], true)
            }
            Repair::SetActiveLoans { patron, .. } => (vec![table(patron)], false),
            Repair::SetAvailableCopies(count) => (vec![table(&count.key())], false),
            Repair::SetCopyStatus { copy, to, loan } => {
                let moved = Copy {
                    status: *to,
                    ..copy.clone()
                };
                let mut keys = vec![table(&copy.key())];
                keys.extend(
                    copy.index_keys()
                        .into_iter()
                        .chain(moved.index_keys())
                        .map(|(index, key)| KeyRef::index(index.name, key.pk)),
                );
                keys.extend(loan.iter().map(|loan| table(loan)));
                (keys, true)
            }
            Repair::RewriteLoanIndex { key, set, seen, .. } => {
                let mut keys = vec![table(key)];
                keys.extend(
                    set.iter()
                        .map(|(index, key)| KeyRef::index(index.name, key.pk.clone())),
                );
                keys.extend(seen.iter().filter_map(|(index, pk, _)| {
                    pk.as_ref().map(|pk| KeyRef::index(index.name, pk.clone()))
                }));
                (keys, false)
            }
            Repair::SetExpiry { key, .. } | Repair::RemoveExpiry { key, .. } => {
                (vec![table(key)], false)
            }
        };
        // An index entry rewritten under the same key is one write to it, not two.
        let mut unique: Vec<KeyRef> = Vec::with_capacity(keys.len());
        for key in keys {
            if !unique.contains(&key) {
                unique.push(key);
            }
        }
        units_per_key(unique, transactional)
    }

    /// Writes the repair: `Ok(true)` when it wrote, `Ok(false)` when its condition no longer held
    /// (the table changed since the finding was confirmed, and nothing was written).
    pub async fn apply(&self, ctx: &Ctx) -> Result<bool, Refused> {
        let written = match self {
            Repair::ReleaseLock {
                lock,
                at,
                kind,
                holder_owner,
            } => {
                let Some(release) = lock::release_declared_at(lock, at.clone()) else {
                    return Err(Refused::Cannot(format!(
                        "{} is not a lock",
                        lock.entity_type().name
                    )));
                };
                let release = Transaction::new().delete(Part::Lock, release);
                let transaction = match holder_owner {
                    Holder::Unknown => release,
                    Holder::Absent(owner) => check_owner(release, *kind, owner, None),
                    Holder::Holds { owner, value, .. } => {
                        check_owner(release, *kind, owner, Some(value))
                    }
                };
                transaction.commit(ctx).await.map(done)
            }
            Repair::ClaimLock { claim, .. } => {
                let put = lock::claim_any(&claim.lock);
                let transaction = Transaction::new().put(Part::Lock, put);
                check_owner(transaction, claim.kind, &claim.owner, Some(&claim.value))
                    .commit(ctx)
                    .await
                    .map(done)
            }
            Repair::ReleaseOwnerLock { lock, account } => {
                let account_key = AccountRow::key_of(&lock.account_id);
                let as_it_was = match account {
                    None => Condition::absent(),
                    Some(row) => {
                        let owner = Condition::equals(AccountRow::OWNER, &row.owner);
                        if row.owners_one {
                            owner.and_equals(AccountRow::OWNERS_ONE, true)
                        } else {
                            owner.and_missing(AccountRow::OWNERS_ONE)
                        }
                    }
                };
                release(lock)
                    .check(Part::Owner, Check::<AccountRow>::at(account_key, as_it_was))
                    .commit(ctx)
                    .await
                    .map(done)
            }
            Repair::ClaimOwnerLock { lock, account, .. } => Transaction::new()
                .put(Part::Lock, lock::claim(lock))
                .check(
                    Part::Owner,
                    Check::<AccountRow>::at(
                        account.key(),
                        Condition::equals(AccountRow::OWNER, &account.owner)
                            .and_equals(AccountRow::OWNERS_ONE, true),
                    ),
                )
                .commit(ctx)
                .await
                .map(done),
            Repair::SetAvailableCopies(count) => {
                let unchanged = match count.seen {
                    Some(seen) => Condition::equals(BookAvailability::AVAILABLE_COPIES, seen),
                    None => Condition::absent(),
                };
                ctx.update_item(
                    Update::<BookAvailability>::at(count.key())
                        .set(BookAvailability::BRANCH_ID, &count.branch_id)
                        .set(BookAvailability::AVAILABLE_COPIES, count.to)
                        .when(unchanged),
                )
                .await
                .map(|written| written.is_some())
            }
            Repair::SetActiveLoans { patron, seen, open } => ctx
                .update_item(
                    Update::<Patron>::at(typed(patron)?)
                        .set(Patron::ACTIVE_LOANS, open)
                        .when(Condition::equals(Patron::ACTIVE_LOANS, seen)),
                )
                .await
                .map(|written| written.is_some()),
            Repair::SetCopyStatus { copy, to, loan } => {
                let moved = Copy {
                    status: *to,
                    ..copy.clone()
                };
                let mut update = Update::<Copy>::at(copy.key())
                    .set(Copy::STATUS, to.as_str())
                    .when(Condition::equals(Copy::STATUS, copy.status.as_str()));
                for (index, key) in moved.index_keys() {
                    update = update.set_index(index, key);
                }
                let mut transaction = Transaction::new().update(Part::Copy, update);
                if let Some(loan) = loan {
                    transaction =
                        transaction.check(Part::Loan, Check::at(loan.clone(), Condition::exists()));
                }
                transaction.commit(ctx).await.map(done)
            }
            Repair::RewriteLoanIndex {
                key,
                loan,
                set,
                remove,
                seen,
            } => {
                let as_read = seen.iter().fold(
                    Condition::equals(Checkout::STATUS, loan.status)
                        .and_equals(Checkout::DUE_DATE, &loan.due_date)
                        .and_equals(Checkout::RENEWAL_COUNT, loan.renewal_count),
                    |condition, (index, pk, sk)| {
                        condition.and_index_as(*index, pk.as_deref(), sk.as_deref())
                    },
                );
                let mut update = Update::<Checkout>::at(typed(key)?).when(as_read);
                for (index, index_key) in set {
                    update = update.set_index(*index, index_key.clone());
                }
                for index in remove {
                    update = update.remove_index(*index);
                }
                ctx.update_item(update)
                    .await
                    .map(|written| written.is_some())
            }
            Repair::SetExpiry { key, entity } => match *entity {
                "idempotency-record" => {
                    set_expiry::<IdempotencyRecord>(ctx, typed(key)?, idempotency::KEEP_SECONDS)
                        .await
                }
                "outbox" => {
                    set_expiry::<OutboxItem>(ctx, typed(key)?, outbox::KEEP_SECONDS.unsigned_abs())
                        .await
                }
                other => {
                    return Err(Refused::Cannot(format!(
                        "cannot set the expiry of a {other}"
                    )));
                }
            },
            Repair::RemoveExpiry { key, entity, seen } => {
                let (key, seen) = (key.clone(), *seen);
                match *entity {
                    "vehicle" => remove_expiry::<Vehicle>(ctx, typed(&key)?, seen).await,
                    "account" => remove_expiry::<AccountRow>(ctx, typed(&key)?, seen).await,
                    "patron" => remove_expiry::<Patron>(ctx, typed(&key)?, seen).await,
                    "plate-lock" => remove_expiry::<PlateLock>(ctx, typed(&key)?, seen).await,
                    "chassis-lock" => remove_expiry::<ChassisLock>(ctx, typed(&key)?, seen).await,
                    "email-lock" => remove_expiry::<EmailLock>(ctx, typed(&key)?, seen).await,
                    "username-lock" => remove_expiry::<UsernameLock>(ctx, typed(&key)?, seen).await,
                    "card-lock" => remove_expiry::<PatronCard>(ctx, typed(&key)?, seen).await,
                    "id-lock" => remove_expiry::<IdLock>(ctx, typed(&key)?, seen).await,
                    "loan" => remove_expiry::<Checkout>(ctx, typed(&key)?, seen).await,
                    "owner-lock" => remove_expiry::<OwnerLock>(ctx, typed(&key)?, seen).await,
                    other => {
                        return Err(Refused::Cannot(format!(
                            "cannot remove the expiry of a {other}"
                        )));
                    }
                }
            }
        };
        written.map_err(|e| match e {
            ApiError::Throttled => Refused::Throttled,
            other => Refused::Cannot(format!("the engine refused a repair: {other:?}")),
        })
    }
}

fn done(commit: Commit<Part>) -> bool {
    matches!(commit, Commit::Done)
}

/// The lock's delete, if it still names its holder: the API's own `lock::release`.
fn release<L: Held>(lock: &L) -> Transaction<Part> {
    Transaction::new().delete(Part::Lock, lock::release(lock))
}

/// Adds a check that the owner of a `kind` lock at `owner` is as the confirmation saw it:
/// holding `value` in the locked field, or (`None`) absent. The field is the one the model
/// declares the lock is of (`plate`, `email`, `cardNumber`, ...).
fn check_owner(
    transaction: Transaction<Part>,
    kind: LockKind,
    owner: &Key,
    value: Option<&String>,
) -> Transaction<Part> {
    let condition = match value {
        Some(value) => Condition::equals(Field::new(kind.value), value),
        None => Condition::absent(),
    };
    transaction.check(Part::Owner, Check::any(owner.clone(), condition))
}

/// `key` as a key of `E`, or the repair refused: a finding's key is text read from the table,
/// and a repair writes an `E` only where an `E` lives.
fn typed<E: Entity>(key: &Key) -> Result<KeyOf<E>, Refused> {
    KeyOf::checked(key.clone()).ok_or_else(|| {
        Refused::Cannot(format!(
            "{} {} is no key of a {}",
            key.pk,
            key.sk,
            E::TYPE.name
        ))
    })
}

/// The table's TTL attribute as a field of `E`: the store's conditions and updates take fields.
fn expires_at<E>() -> Field<E> {
    Field::new(TTL_ATTRIBUTE)
}

/// Sets the `expiresAt` an item of type `E` must have, `keep` seconds from now: the time the API
/// gives one it writes now.
async fn set_expiry<E: Entity>(
    ctx: &Ctx,
    key: KeyOf<E>,
    keep: u64,
) -> Result<bool, singlet_functions::ApiError> {
    let at = now_seconds() + keep;
    ctx.update_item(
        Update::<E>::at(key)
            .set(expires_at(), at)
            .when(Condition::exists().and_missing(expires_at())),
    )
    .await
    .map(|written| written.is_some())
}

async fn remove_expiry<E: Entity>(
    ctx: &Ctx,
    key: KeyOf<E>,
    seen: u64,
) -> Result<bool, singlet_functions::ApiError> {
    ctx.update_item(
        Update::<E>::at(key)
            .remove(expires_at())
            .when(Condition::equals(expires_at(), seen)),
    )
    .await
    .map(|written| written.is_some())
}

/// Every index a loan may have keys in, but not in `keep`.
pub fn other_indexes(keep: &[(Index, IndexKey)]) -> Vec<Index> {
    INDEXES
        .into_iter()
        .filter(|index| !keep.iter().any(|(kept, _)| kept.name == index.name))
        .collect()
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
