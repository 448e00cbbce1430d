//! A unique value's lock: an item keyed by the value (`PLATE#<plate>`, `UNIQ#EMAIL#<email>`,
//! `CARD#<cardNumber>`) that names its holder ([`Held`]). Uniqueness is a key collision:
//! - [`claim`] puts the lock only if no item has its key, and asks for the item as it stood if
//!   one does, so [`holder`] can tell "taken by another" from "already mine";
//! - [`release`] deletes it only if it still names the holder, so a write that read stale data
//!   can never free a value that someone else holds now;
//! - [`swap`] moves an owner from one value to another in one transaction: claim the new lock,
//!   release the old one, update the owner only if it still holds the old value, and put the
//!   change's domain event (its outbox item);
//! - [`respell`] rewrites the spelling a lock holds when its holder changes to a look-alike of
//!   its own value (one key, so nothing is claimed or released), and [`swap_spelling`] moves
//!   an owner to such a spelling as [`swap`] moves it to another value;
//! - [`free_at`] checks, in the same transaction as a claim, that no lock is at a key an earlier
//!   rule made of the value (a plate lock before `plates-compact`), which the claim cannot meet.
//!
//! The fleet (plates, chassis numbers), accounts (emails, usernames) and library cards all use
//! these.

use super::item::{Item, text};
use super::transaction::{Cancelled, Commit, Transaction};
use super::write::{AnyEntity, Check, Condition, Delete, Put, Update};
use crate::context::Ctx;
use crate::error::{ApiError, Code, FieldError};
use crate::model::{Entity, EntityType, Field, Held, KeyOf, TableEntity};
use singlet_shared::{Id, Key};

/// Puts `lock` unless its key is taken.
pub fn claim<L: Held>(lock: &L) -> Put {
    Put::new_only(lock).old_on_failure()
}

/// The part of a transaction that claims a lock of type `lock` (an [`EntityType`] whose
/// [`lock_of`](EntityType::lock_of) says which value it keeps unique).
pub type LockPart = &'static EntityType;

impl<P: Copy + PartialEq + std::fmt::Debug> Transaction<P> {
    /// Claims every lock `owner` declares ([`Entity::locks`]), each as the part `part(its type)`:
    /// its put unless its key is taken ([`claim`]), and, where an earlier rule keyed it
    /// elsewhere ([`Entity::earlier_key`]), the check that no lock is there ([`free_at`]), whose
    /// failure is the claim's. What the creating routes and `import` write with an owner.
    pub fn claim_locks_of<E: Entity>(self, owner: &E, part: impl Fn(LockPart) -> P) -> Self {
        owner.locks().iter().fold(self, |transaction, lock| {
            let part = part(lock.entity_type());
            transaction
                .put(part, claim_any(lock))
                .check_if_some(part, lock.earlier_key().map(free_any_at))
        })
    }
}

/// [`claim`], of a lock an owner declares.
pub fn claim_any(lock: &TableEntity) -> Put {
    Put::new_only_any(lock).old_on_failure()
}

/// The fields of `owner`'s values whose claims ([`Transaction::claim_locks_of`]) `cancelled`
/// found taken, each `taken`, named as the owner's attribute holding it (`plate`, `email`,
/// `cardNumber`): what a `409` lists.
pub fn taken<P: PartialEq, E: Entity>(
    cancelled: &Cancelled<P>,
    owner: &E,
    part: impl Fn(LockPart) -> P,
) -> Vec<FieldError> {
    owner
        .locks()
        .iter()
        .map(TableEntity::entity_type)
        .filter(|lock| cancelled.failed(part(lock)))
        .filter_map(|lock| Some(FieldError::new(lock.lock_of()?.value, Code::Taken)))
        .collect()
}

/// [`release`], of a lock of a unique value of whichever type, read at `at`: deleted only if it
/// still names the holder it names now, in the attribute its type declares
/// ([`EntityType::lock_of`]). `at` is where the lock was read, not the key its value makes under
/// the current rule: a lock an earlier rule keyed (`PLATE#ka 19 xtr`) is released where it is.
/// `None` for an entity that is no such lock.
pub fn release_declared_at(lock: &TableEntity, at: Key) -> Option<Delete<AnyEntity>> {
    let of = lock.entity_type().lock_of()?;
    let item = lock.to_item();
    let holder = text(&item, of.holder).to_owned();
    Some(Delete::any(at).when(Condition::equals(Field::new(of.holder), holder)))
}

/// Puts `lock`, a new spelling of the value its holder holds already (a look-alike of its own
/// email, a plate with other separators: one key), only if the lock at its key names that
/// holder or is missing (a lock lost to a bug or a torn restore is put back): the lock keeps
/// naming the value as its holder now spells it. Held by another, it fails with that lock
/// ([`held_by_other`]): the value is taken.
pub fn respell<L: Held>(lock: &L) -> Put {
    Put::new_if(lock, Condition::absent_or_equals(L::HOLDER, lock.holder())).old_on_failure()
}

/// Deletes `lock` only if it still names its holder.
pub fn release<L: Held>(lock: &L) -> Delete<L> {
    release_at(lock.key(), lock.holder())
}

/// Deletes the lock at `key` only if it names `holder`: a lock written under an earlier rule
/// for its key (a plate lock before `plates-compact`).
pub fn release_at<L: Held>(key: KeyOf<L>, holder: &Id) -> Delete<L> {
    Delete::at(key).when(Condition::equals(L::HOLDER, holder))
}

/// Checks that no item is at `key`, and hands back the one that is when the check fails, so
/// [`holder`] names who holds it. For a value whose lock an earlier rule keyed elsewhere (a plate
/// lock before `plates-compact`, `PLATE#ka19 xtr`): a claim of its current key
/// (`PLATE#ka19xtr`) cannot meet that lock, so the transaction checks its key too. Of no entity
/// type: the condition is that none is there.
pub fn free_at<L: Held>(key: KeyOf<L>) -> Check<AnyEntity> {
    free_any_at(key.into_key())
}

/// [`free_at`], at the key of a lock of whichever type (an owner's declared locks).
pub fn free_any_at(key: Key) -> Check<AnyEntity> {
    Check::any(key, Condition::absent()).old_on_failure()
}

/// Who holds a lock of type `L` whose claim failed, from the item the cancellation returned.
pub fn holder<L: Held>(old: Option<&Item>) -> Option<&str> {
    old.map(|item| text(item, L::HOLDER.name()))
        .filter(|holder| !holder.is_empty())
}

/// Whether a lock of type `L` whose condition failed (`old`, the item the cancellation returned)
/// is held by someone other than `holder`: the value is taken.
pub fn held_by_other<L: Held>(old: Option<&Item>, holder: &str) -> bool {
    self::holder::<L>(old).is_some_and(|held| held != holder)
}

/// How one [`swap`] ended.
#[derive(Debug)]
pub enum Swapped {
    Done,
    /// Another owner holds the new value.
    Taken,
    /// The owner's update failed its condition: it changed or went since it was read. The row
    /// as it stood when the update asked for it (`old_on_failure`), `None` when it is gone.
    OwnerChanged(Option<Item>),
    /// Only a lock's condition failed: the old lock names another holder, or the new one is
    /// already this owner's.
    LockDisagrees,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    NewLock,
    /// The new value's key under an earlier rule, checked free.
    NewLockBefore,
    OldLock,
    Owner,
    Event,
}

/// One transaction that moves an owner from the value of `old` to the value of `new` (both
/// naming the owner): claim `new`, release `old` if it still names the owner, and apply
/// `owner`, whose condition should be that the owner still holds the old value, and put `event`
/// (the change's outbox item). Nothing changes unless all four do. The caller reads the owner again and retries on anything but
/// [`Swapped::Done`] and [`Swapped::Taken`], at most [`super::RACE_ATTEMPTS`] times.
pub async fn swap<L: Held, O: Entity>(
    ctx: &Ctx,
    new: &L,
    old: &L,
    owner: Update<O>,
    event: Put,
) -> Result<Swapped, ApiError> {
    swap_from(ctx, new, None, release(old), owner, event).await
}

/// [`swap`] under a rule that keyed locks elsewhere before: `new_free_before` checks that no
/// lock holds the new value at the key the earlier rule made of it ([`free_at`]; `None` when
/// that is the new lock's own key), and `release_old` releases the old lock where it is.
pub async fn swap_from<L: Held, O: Entity>(
    ctx: &Ctx,
    new: &L,
    new_free_before: Option<Check<AnyEntity>>,
    release_old: Delete<L>,
    owner: Update<O>,
    event: Put,
) -> Result<Swapped, ApiError> {
    move_owner(
        ctx,
        new,
        claim(new),
        new_free_before,
        Some(release_old),
        owner,
        event,
    )
    .await
}

/// [`swap`] to another spelling of the value the owner holds already (a look-alike of its own
/// value: one key): the lock takes the new spelling ([`respell`]) while it names the owner, and
/// nothing is claimed or released; `new_free_before` as for [`swap_from`]. Ends as a swap does:
/// [`Swapped::Taken`] when the lock or the earlier rule's key is another owner's.
pub async fn swap_spelling<L: Held, O: Entity>(
    ctx: &Ctx,
    new: &L,
    new_free_before: Option<Check<AnyEntity>>,
    owner: Update<O>,
    event: Put,
) -> Result<Swapped, ApiError> {
    move_owner(ctx, new, respell(new), new_free_before, None, owner, event).await
}

/// The one transaction of [`swap_from`] and [`swap_spelling`]: `new_lock` (the put of `new`),
/// the check of the earlier rule's key, the release of the old lock if there is one to release,
/// the owner's update and the event.
async fn move_owner<L: Held, O: Entity>(
    ctx: &Ctx,
    new: &L,
    new_lock: Put,
    new_free_before: Option<Check<AnyEntity>>,
    release_old: Option<Delete<L>>,
    owner: Update<O>,
    event: Put,
) -> Result<Swapped, ApiError> {
    let mut transaction = Transaction::new()
        .put(Part::NewLock, new_lock)
        .check_if_some(Part::NewLockBefore, new_free_before);
    if let Some(release_old) = release_old {
        transaction = transaction.delete(Part::OldLock, release_old);
    }
    let commit = transaction
        .update(Part::Owner, owner)
        .put(Part::Event, event)
        .commit(ctx)
        .await?;
    Ok(match commit {
        Commit::Done => Swapped::Done,
        Commit::Cancelled(cancelled) => {
            let held_by_another =
                |part| held_by_other::<L>(cancelled.old(part), new.holder().as_str());
            if held_by_another(Part::NewLock) || held_by_another(Part::NewLockBefore) {
                Swapped::Taken
            } else if cancelled.failed(Part::Owner) {
                Swapped::OwnerChanged(cancelled.old(Part::Owner).cloned())
            } else {
                Swapped::LockDisagrees
            }
        }
    })
}
