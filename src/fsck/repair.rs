//! Repairs: each a conditional write on the items exactly as the confirmation read them, so that
//! a repair never undoes a write that came after, a second `--repair` finds nothing to write, and
//! a lock is never taken from an owner that holds its value.
//!
//! A repair that depends on a second item says so with a `ConditionCheck` on it in the same
//! transaction: a lock is claimed only while its owner still holds the value, and an orphan is
//! released (or taken over) only while the owner it names still does not.

use super::entity::{Claim, LockKind};
use aws_sdk_dynamodb::types::builders::PutBuilder;
use singlet_functions::Ctx;
use singlet_functions::idempotency::KEEP_SECONDS;
use singlet_functions::library::Copy;
use singlet_functions::loans::Checkout;
use singlet_functions::model::Decoded;
use singlet_functions::store::{ABSENT, Commit, Transaction, lock, n, s};
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI2, TTL_ATTRIBUTE};
use singlet_shared::{Id, Key};
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

/// A write that makes a finding hold no more.
#[derive(Debug, Clone)]
pub enum Repair {
    /// `lock-orphan`: delete the lock, if it still names `holder` and that holder's owner is
    /// still as it was (absent, or holding another value).
    ReleaseLock {
        lock: Key,
        kind: LockKind,
        holder: String,
        holder_owner: Holder,
    },
    /// `lock-missing`: put the owner's lock, while the owner still holds the value, where the key
    /// is free or held by an orphan (`held_by`: its holder, whose owner must still not hold it).
    ClaimLock {
        claim: Claim,
        held_by: Option<(String, Holder)>,
    },
    /// `active-loans`: set the counter to the open loans, if it is still `seen`.
    SetActiveLoans { patron: Key, seen: u32, open: u32 },
    /// `copy-status`: set the status (and its availability index keys) the loans say, if the
    /// status is still the one read, and, for `checked_out`, while the loan still exists.
    SetCopyStatus {
        copy: Copy,
        to: CopyStatus,
        loan: Option<Key>,
    },
    /// `loan-index`: rewrite the index keys the loan's state makes, if the loan is still as read.
    RewriteLoanIndex {
        key: Key,
        loan: Checkout,
        set: Vec<(&'static str, String)>,
        remove: Vec<&'static str>,
    },
    /// `expiry`: give an item that must expire its `expiresAt`, a day from now.
    SetExpiry { key: Key },
    /// `expiry`: take `expiresAt` off a lock or a lock's owner, if it is still `seen`.
    RemoveExpiry { key: Key, seen: String },
}

/// The parts of a repair's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Lock,
    Owner,
    OtherOwner,
    Copy,
    Loan,
}

impl Repair {
    /// Releases come before claims: a lock taken over from an orphan is then simply free.
    pub fn order(&self) -> u8 {
        match self {
            Repair::ReleaseLock { .. } => 0,
            Repair::ClaimLock { .. } => 1,
            _ => 2,
        }
    }

    /// What the repair writes, in words, for `--dry-run`.
    pub fn describe(&self) -> String {
        let at = |key: &Key| format!("{} / {}", key.pk, key.sk);
        match self {
            Repair::ReleaseLock {
                lock, kind, holder, ..
            } => format!(
                "delete {} if it still names {} {holder}",
                at(lock),
                kind.holder_field()
            ),
            Repair::ClaimLock { claim, held_by } => {
                let over = match held_by {
                    None => "if the key is free".to_owned(),
                    Some((holder, _)) => {
                        format!(
                            "over the lock naming {} {holder}",
                            claim.kind.holder_field()
                        )
                    }
                };
                format!(
                    "put {} naming {} {}, {over}, while the owner still holds its {}",
                    at(&claim.lock_key),
                    claim.kind.holder_field(),
                    claim.holder,
                    claim.kind.owner_field()
                )
            }
            Repair::SetActiveLoans { patron, seen, open } => {
                format!("set activeLoans of {} from {seen} to {open}", at(patron))
            }
            Repair::SetCopyStatus { copy, to, .. } => format!(
                "set status of {} from {} to {} (and its availability index keys)",
                at(&keys::copy(&copy.branch_id, &copy.copy_id)),
                copy.status.as_str(),
                to.as_str()
            ),
            Repair::RewriteLoanIndex {
                key, set, remove, ..
            } => {
                let mut parts: Vec<String> =
                    set.iter().map(|(name, _)| format!("set {name}")).collect();
                parts.extend(remove.iter().map(|name| format!("remove {name}")));
                format!("{} on {}", parts.join(", "), at(key))
            }
            Repair::SetExpiry { key } => format!("set expiresAt on {} to a day from now", at(key)),
            Repair::RemoveExpiry { key, .. } => format!("remove expiresAt from {}", at(key)),
        }
    }

    /// Writes the repair: `Ok(true)` when it wrote, `Ok(false)` when its condition no longer held
    /// (the table changed since the finding was confirmed, and nothing was written).
    pub async fn apply(&self, ctx: &Ctx) -> Result<bool, String> {
        let done = |commit: Commit<Part>| matches!(commit, Commit::Done);
        let failed = |e| format!("the engine refused a repair: {e:?}");
        match self {
            Repair::ReleaseLock {
                lock,
                kind,
                holder,
                holder_owner,
            } => {
                let holder = Id::parse(holder).map_err(|_| "a lock's holder is no id")?;
                let release = lock::release(ctx, lock, kind.holder_field(), &holder);
                let mut transaction = Transaction::new().delete(Part::Lock, release);
                if let Some(check) = unchanged(ctx, holder_owner) {
                    transaction = transaction.check(Part::Owner, check);
                }
                transaction.commit(ctx).await.map(done).map_err(failed)
            }
            Repair::ClaimLock { claim, held_by } => {
                let put = match held_by {
                    None => put_lock(ctx, &claim.lock).condition_expression(ABSENT),
                    Some((holder, _)) => put_lock(ctx, &claim.lock)
                        .condition_expression(format!("{ABSENT} OR #holder = :holder"))
                        .expression_attribute_names("#holder", claim.kind.holder_field())
                        .expression_attribute_values(":holder", s(holder)),
                };
                let owner = ctx
                    .check(&claim.owner)
                    .condition_expression("#field = :value")
                    .expression_attribute_names("#field", claim.kind.owner_field())
                    .expression_attribute_values(":value", s(&claim.value));
                let mut transaction = Transaction::new()
                    .put(Part::Lock, put)
                    .check(Part::Owner, owner);
                if let Some(check) = held_by.as_ref().and_then(|(_, h)| unchanged(ctx, h)) {
                    transaction = transaction.check(Part::OtherOwner, check);
                }
                transaction.commit(ctx).await.map(done).map_err(failed)
            }
            Repair::SetActiveLoans { patron, seen, open } => ctx
                .update_item(
                    ctx.update(patron)
                        .update_expression("SET activeLoans = :open")
                        .condition_expression("activeLoans = :seen")
                        .expression_attribute_values(":open", n(open))
                        .expression_attribute_values(":seen", n(seen)),
                )
                .await
                .map(|written| written.is_some())
                .map_err(failed),
            Repair::SetCopyStatus { copy, to, loan } => {
                let index = keys::copy_by_book(&copy.isbn, *to, &copy.branch_id, &copy.copy_id);
                let update = ctx
                    .update(&keys::copy(&copy.branch_id, &copy.copy_id))
                    .update_expression("SET #status = :to, #gsi2pk = :pk, #gsi2sk = :sk")
                    .condition_expression("#status = :from")
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_names("#gsi2pk", GSI2.pk)
                    .expression_attribute_names("#gsi2sk", GSI2.sk)
                    .expression_attribute_values(":to", s(to.as_str()))
                    .expression_attribute_values(":from", s(copy.status.as_str()))
                    .expression_attribute_values(":pk", s(index.pk))
                    .expression_attribute_values(":sk", s(index.sk));
                let mut transaction = Transaction::new().update(Part::Copy, update);
                if let Some(loan) = loan {
                    let check = ctx.check(loan).condition_expression("attribute_exists(PK)");
                    transaction = transaction.check(Part::Loan, check);
                }
                transaction.commit(ctx).await.map(done).map_err(failed)
            }
            Repair::RewriteLoanIndex {
                key,
                loan,
                set,
                remove,
            } => {
                let mut expression = Vec::new();
                let mut update = ctx
                    .update(key)
                    .condition_expression(
                        "#status = :status AND dueDate = :due AND renewalCount = :renewals",
                    )
                    .expression_attribute_names("#status", "status")
                    .expression_attribute_values(
                        ":status",
                        singlet_functions::store::value(loan.status),
                    )
                    .expression_attribute_values(":due", s(&loan.due_date))
                    .expression_attribute_values(":renewals", n(loan.renewal_count));
                if !set.is_empty() {
                    let sets: Vec<String> =
                        (0..set.len()).map(|i| format!("#s{i} = :s{i}")).collect();
                    expression.push(format!("SET {}", sets.join(", ")));
                }
                if !remove.is_empty() {
                    let removes: Vec<String> =
                        (0..remove.len()).map(|i| format!("#r{i}")).collect();
                    expression.push(format!("REMOVE {}", removes.join(", ")));
                }
                for (i, (name, value)) in set.iter().enumerate() {
                    update = update
                        .expression_attribute_names(format!("#s{i}"), *name)
                        .expression_attribute_values(format!(":s{i}"), s(value));
                }
                for (i, name) in remove.iter().enumerate() {
                    update = update.expression_attribute_names(format!("#r{i}"), *name);
                }
                ctx.update_item(update.update_expression(expression.join(" ")))
                    .await
                    .map(|written| written.is_some())
                    .map_err(failed)
            }
            Repair::SetExpiry { key } => ctx
                .update_item(
                    ctx.update(key)
                        .update_expression("SET #expires = :at")
                        .condition_expression(
                            "attribute_exists(PK) AND attribute_not_exists(#expires)",
                        )
                        .expression_attribute_names("#expires", TTL_ATTRIBUTE)
                        .expression_attribute_values(":at", n(now_seconds() + KEEP_SECONDS)),
                )
                .await
                .map(|written| written.is_some())
                .map_err(failed),
            Repair::RemoveExpiry { key, seen } => ctx
                .update_item(
                    ctx.update(key)
                        .update_expression("REMOVE #expires")
                        .condition_expression("#expires = :seen")
                        .expression_attribute_names("#expires", TTL_ATTRIBUTE)
                        .expression_attribute_values(
                            ":seen",
                            aws_sdk_dynamodb::types::AttributeValue::N(seen.clone()),
                        ),
                )
                .await
                .map(|written| written.is_some())
                .map_err(failed),
        }
    }
}

/// A put of a lock as the API puts it (`Entity::to_item`: its key, `_et` and `_v`).
fn put_lock(ctx: &Ctx, lock: &Decoded) -> PutBuilder {
    match lock {
        Decoded::PlateLock(lock) => ctx.put(lock),
        Decoded::ChassisLock(lock) => ctx.put(lock),
        Decoded::EmailLock(lock) => ctx.put(lock),
        Decoded::UsernameLock(lock) => ctx.put(lock),
        Decoded::CardLock(lock) => ctx.put(lock),
        other => unreachable!(
            "a claim's lock is a lock, not a {}",
            other.entity_type().name
        ),
    }
}

/// A condition that the owner a lock names is as the confirmation saw it: still absent, or
/// still holding its other value. `None` when no owner could be located.
fn unchanged(
    ctx: &Ctx,
    holder: &Holder,
) -> Option<aws_sdk_dynamodb::types::builders::ConditionCheckBuilder> {
    match holder {
        Holder::Unknown => None,
        Holder::Absent(owner) => Some(ctx.check(owner).condition_expression(ABSENT)),
        Holder::Holds {
            owner,
            field,
            value,
        } => Some(
            ctx.check(owner)
                .condition_expression("#field = :value")
                .expression_attribute_names("#field", *field)
                .expression_attribute_values(":value", s(value)),
        ),
    }
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}
