//! The rules that span items, each a pure function of the items involved.
//!
//! The same functions judge the whole table after the scan and, to confirm a finding, the few
//! items re-read for it: a finding is only reported when the fresh items break the rule too.

use super::entity::{
    LockItem, LockKind, claims, decode, key_of, lock, must_expire, owner_key_by_id,
    why_never_expires,
};
use super::repair::{
    AvailableCopies, Holder, Repair, expiry_repairable, other_indexes, set_expiry_repairable,
};
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use serde::Serialize;
use singlet_functions::accounts::{AccountRow, OwnerLock, owner_lock_under};
use singlet_functions::ids::IdKey;
use singlet_functions::library::{BookAvailability, Copy};
use singlet_functions::loans::{Checkout, LoanStatus};
use singlet_functions::migrations::returned_loans_expire;
use singlet_functions::model::{self, Entity, Item, TableEntity};
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI2, INDEXES, TTL_ATTRIBUTE};
use singlet_shared::{Id, Isbn13, Key};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

/// A finding's `about` when it is about an account's owner lock (its email and username are
/// `email` and `username`).
pub const OWNER: &str = "owner";

/// A finding's `about` when it is about a branch's count of a book's available copies.
pub const AVAILABLE_COPIES: &str = "availableCopies";

/// The contract's rules (`docs/API.md`, "Consistency check: `fsck`"), each named once, by
/// [`Rule::name`]: the report, `--json` (its serialisation) and the guide's table (a test) all
/// read that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    LockOrphan,
    LockMissing,
    ActiveLoans,
    CopyStatus,
    LoanIndex,
    AuditHistory,
    Expiry,
    Undecodable,
}

impl Rule {
    /// Every rule, in the contract's order.
    pub const ALL: [Rule; 8] = [
        Rule::LockOrphan,
        Rule::LockMissing,
        Rule::ActiveLoans,
        Rule::CopyStatus,
        Rule::LoanIndex,
        Rule::AuditHistory,
        Rule::Expiry,
        Rule::Undecodable,
    ];

    /// The rule's name, as the report and `--json` write it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::LockOrphan => "lock-orphan",
            Rule::LockMissing => "lock-missing",
            Rule::ActiveLoans => "active-loans",
            Rule::CopyStatus => "copy-status",
            Rule::LoanIndex => "loan-index",
            Rule::AuditHistory => "audit-history",
            Rule::Expiry => "expiry",
            Rule::Undecodable => "undecodable",
        }
    }
}

/// As its [`Rule::name`].
impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(self.name())
    }
}

/// By its [`Rule::name`].
impl<'de> serde::Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(from: D) -> Result<Self, D::Error> {
        let name = String::deserialize(from)?;
        Rule::ALL
            .into_iter()
            .find(|rule| rule.name() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("no fsck rule is named {name}")))
    }
}

/// One broken rule, at the item it is reported on. `repair` is `None` when only a person can
/// decide (two real claimants, a gap in a history, an item nothing decodes).
#[derive(Debug, Clone)]
pub struct Finding {
    pub rule: Rule,
    pub key: Key,
    /// Which of the item's values the finding is about, where it has several (a vehicle's plate
    /// and chassis): `""` otherwise.
    pub about: &'static str,
    pub detail: String,
    pub repair: Option<Repair>,
}

/// A key as a map key.
pub type At = (String, String);

pub fn at(key: &Key) -> At {
    (key.pk.clone(), key.sk.clone())
}

pub fn key(at: &At) -> Key {
    Key {
        pk: at.0.clone(),
        sk: at.1.clone(),
    }
}

/// An item as read: its key, what it decodes to, and the attributes the rules read besides the
/// entity's fields (its schema version, its TTL and its index keys).
#[derive(Debug, Clone)]
pub struct Stored {
    pub key: Key,
    pub entity: Result<TableEntity, String>,
    /// Its `_v` (1 when it has none; an item whose `_v` is no number does not decode).
    pub version: u32,
    pub expires_at: Option<String>,
    /// A slice, not a map: a `BTreeMap` holding any key allocates a node of eleven.
    pub index_keys: Box<[(&'static str, String)]>,
}

impl Stored {
    pub fn new(item: Item) -> Self {
        let key = key_of(&item);
        let expires_at = item.get(TTL_ATTRIBUTE).and_then(|v| v.as_n().ok()).cloned();
        let index_keys = INDEXES
            .iter()
            .flat_map(|index| [index.pk, index.sk])
            .filter_map(|name| Some((name, item.get(name)?.as_s().ok()?.clone())))
            .collect();
        Self {
            key,
            entity: decode(&item),
            version: model::stored_version(&item).unwrap_or(1),
            expires_at,
            index_keys,
        }
    }

    fn index_key(&self, name: &str) -> Option<&String> {
        self.index_keys
            .iter()
            .find_map(|(held, value)| (*held == name).then_some(value))
    }
}

/// Items by key, with the lookups the rules need: a patron's and a copy's open loans, a book's
/// copies at a branch, a resource's partition; and the key an account's owner lock is keyed under
/// (`Ctx::owners`).
pub struct Table {
    /// Each item boxed, found by the key it holds: the table's buckets (a power of two of them,
    /// up to half empty after it grows) hold a pointer, not the 368-byte `Stored` itself nor a
    /// second copy of its key.
    items: HashTable<Box<Stored>>,
    hasher: DefaultHashBuilder,
    pub ids: Arc<IdKey>,
    /// Patron ids and the keys of their rows: a card lock names its holder by id alone.
    pub patrons: HashMap<String, Key>,
    open_loans_by_patron: HashMap<String, BTreeSet<At>>,
    open_loans_by_copy: HashMap<(String, String), BTreeSet<At>>,
    /// Copies by book and branch: `(isbn, branchId)`.
    copies_by_book: HashMap<(String, String), BTreeSet<At>>,
    resources: HashMap<String, BTreeSet<String>>,
    /// The owner locks naming each account, by account id, wherever they are keyed.
    owner_locks_by_account: HashMap<String, BTreeSet<At>>,
    /// How many items were judged as they came and not kept ([`Table::take`]), and what they
    /// broke.
    judged_alone: u64,
    findings_alone: Vec<Finding>,
}

impl Table {
    pub fn new(ids: Arc<IdKey>) -> Self {
        Self {
            items: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            ids,
            patrons: HashMap::new(),
            open_loans_by_patron: HashMap::new(),
            open_loans_by_copy: HashMap::new(),
            copies_by_book: HashMap::new(),
            resources: HashMap::new(),
            owner_locks_by_account: HashMap::new(),
            judged_alone: 0,
            findings_alone: Vec::new(),
        }
    }

    /// The table of a scan's `items`, keyed for `ctx`'s owner locks, each item taken as it comes
    /// ([`Table::take`]): a judge reading millions holds each once, and returned loans not at
    /// all (docs/guide/tools-on-step-functions.md, "At ten million items").
    pub fn of(ctx: &singlet_functions::Ctx, items: impl IntoIterator<Item = Stored>) -> Self {
        let mut table = Self::new(ctx.owners.clone());
        for stored in items {
            table.take(stored);
        }
        table
    }

    /// Puts a scanned item in the table, or, if no rule reads it beside another item, judges it
    /// now and keeps only what it broke. A returned loan is such an item: the rules that join
    /// loans to their patron and their copy count open loans only, it holds no lock and no lock
    /// names it, so its findings (`loan-index`, `expiry`) are its own item's, and their
    /// confirmation reads it again from the table. In the capacity plan's table they are
    /// 7.9 million of 16.3 million items. (A table built to confirm a finding takes every item:
    /// [`Table::insert`].)
    pub fn take(&mut self, stored: Stored) {
        if !matches!(&stored.entity, Ok(TableEntity::Loan(loan)) if loan.status == LoanStatus::Returned)
        {
            return self.insert(stored);
        }
        let key = stored.key.clone();
        let mut alone = Table::new(self.ids.clone());
        alone.insert(stored);
        self.findings_alone.extend(check(&alone, &key));
        self.judged_alone += 1;
    }

    /// How many items the table was given: those it holds and those judged as they came.
    pub fn scanned(&self) -> u64 {
        self.items.len() as u64 + self.judged_alone
    }

    /// The items it holds, in no order.
    pub fn items(&self) -> impl Iterator<Item = &Stored> {
        self.items.iter().map(Box::as_ref)
    }

    /// The item at `pk` and `sk`, if it holds one.
    fn find(&self, pk: &str, sk: &str) -> Option<&Stored> {
        self.items
            .find(hash_of(&self.hasher, pk, sk), |held| {
                held.key.pk == pk && held.key.sk == sk
            })
            .map(Box::as_ref)
    }

    /// What the items judged as they came broke ([`Table::take`]).
    pub fn findings_alone(&self) -> &[Finding] {
        &self.findings_alone
    }

    pub fn insert(&mut self, stored: Stored) {
        let key = stored.key.clone();
        let at = at(&key);
        match &stored.entity {
            Ok(TableEntity::Loan(loan)) if loan.status != LoanStatus::Returned => {
                self.open_loans_by_patron
                    .entry(loan.patron_id.to_string())
                    .or_default()
                    .insert(at.clone());
                self.open_loans_by_copy
                    .entry((loan.branch_id.to_string(), loan.copy_id.to_string()))
                    .or_default()
                    .insert(at.clone());
            }
            Ok(TableEntity::Patron(patron)) => {
                self.patrons
                    .insert(patron.patron_id.to_string(), patron.key().into_key());
            }
            Ok(TableEntity::Copy(copy)) => {
                self.copies_by_book
                    .entry((copy.isbn.to_string(), copy.branch_id.to_string()))
                    .or_default()
                    .insert(at.clone());
            }
            Ok(TableEntity::OwnerLock(lock)) => {
                self.owner_locks_by_account
                    .entry(lock.account_id.to_string())
                    .or_default()
                    .insert(at.clone());
            }
            _ if key.pk.starts_with("RESOURCE#") => {
                self.resources
                    .entry(key.pk.clone())
                    .or_default()
                    .insert(key.sk.clone());
            }
            _ => {}
        }
        let hasher = &self.hasher;
        let hash = hash_of(hasher, &stored.key.pk, &stored.key.sk);
        match self.items.entry(
            hash,
            |held| held.key == stored.key,
            |held| hash_of(hasher, &held.key.pk, &held.key.sk),
        ) {
            Entry::Occupied(mut held) => **held.get_mut() = stored,
            Entry::Vacant(place) => {
                place.insert(Box::new(stored));
            }
        }
    }

    pub fn get(&self, key: &Key) -> Option<&Stored> {
        self.find(&key.pk, &key.sk)
    }

    fn get_at(&self, at: &At) -> Option<&Stored> {
        self.find(&at.0, &at.1)
    }

    pub fn entity(&self, key: &Key) -> Option<&Result<TableEntity, String>> {
        self.get(key).map(|stored| &stored.entity)
    }

    pub fn open_loans_of_copy(&self, branch_id: &str, copy_id: &str) -> Vec<&Checkout> {
        let loans = self
            .open_loans_by_copy
            .get(&(branch_id.to_owned(), copy_id.to_owned()));
        self.loans(loans)
    }

    fn open_loans_of_patron(&self, patron_id: &str) -> Vec<&Checkout> {
        self.loans(self.open_loans_by_patron.get(patron_id))
    }

    /// The copies of the book `isbn` at `branch_id`, in key order.
    pub fn copies_of_book(&self, isbn: &Isbn13, branch_id: &Id) -> Vec<&Copy> {
        self.copies_by_book
            .get(&(isbn.to_string(), branch_id.to_string()))
            .into_iter()
            .flatten()
            .filter_map(|at| match self.get_at(at).map(|s| &s.entity) {
                Some(Ok(TableEntity::Copy(copy))) => Some(copy),
                _ => None,
            })
            .collect()
    }

    /// Whether the copy at `key` is the first, in key order, of its book's copies at its branch.
    fn is_first_copy_of_book(&self, copy: &Copy, key: &Key) -> bool {
        self.copies_by_book
            .get(&(copy.isbn.to_string(), copy.branch_id.to_string()))
            .and_then(|copies| copies.first())
            .is_some_and(|first| first.0 == key.pk && first.1 == key.sk)
    }

    /// The owner lock `row` must hold, if it is its owner's one account.
    pub fn owner_lock_of(&self, row: &AccountRow) -> Option<OwnerLock> {
        (row.owners_one && !row.owner.is_empty())
            .then(|| owner_lock_under(&self.ids, &row.owner, &row.account.account_id))
    }

    /// The keys of the owner locks that name the account `account_id`, wherever they are.
    pub fn owner_locks_naming(&self, account_id: &str) -> Vec<Key> {
        self.owner_locks_by_account
            .get(account_id)
            .into_iter()
            .flatten()
            .map(key)
            .collect()
    }

    /// Whether an owner lock naming `row`'s account is where this run's key puts it.
    fn owner_lock_in_place(&self, row: &AccountRow) -> bool {
        self.owner_lock_of(row).is_some_and(|held| {
            matches!(
                self.entity(&held.key()),
                Some(Ok(TableEntity::OwnerLock(lock))) if lock.account_id == row.account.account_id
            )
        })
    }

    fn loans(&self, keys: Option<&BTreeSet<At>>) -> Vec<&Checkout> {
        keys.into_iter()
            .flatten()
            .filter_map(|at| match self.get_at(at).map(|s| &s.entity) {
                Some(Ok(TableEntity::Loan(loan))) => Some(loan),
                _ => None,
            })
            .collect()
    }
}

/// Where the owner a lock names lives: where its id says, for an owner keyed by its id alone (the
/// model's `EntityType::key_from_id`); a patron, keyed by its branch too, is found in `patrons`
/// (the table's; the confirmation looks a newer one up by id).
pub fn owner_key(kind: LockKind, holder: &str, patrons: &HashMap<String, Key>) -> Option<Key> {
    owner_key_by_id(kind, holder).or_else(|| patrons.get(holder).cloned())
}

/// Every finding whose subject is the item at `key`.
pub fn check(table: &Table, key: &Key) -> Vec<Finding> {
    let Some(stored) = table.get(key) else {
        return Vec::new();
    };
    let key = key.clone();
    let entity = match &stored.entity {
        Ok(entity) => entity,
        Err(why) => {
            return vec![Finding {
                rule: Rule::Undecodable,
                about: "",
                key,
                detail: why.clone(),
                repair: None,
            }];
        }
    };
    let mut found = Vec::new();
    expiry(&key, stored, entity, &mut found);
    if let Some(lock) = lock(entity) {
        lock_orphan(table, &key, entity, &lock, &mut found);
    }
    lock_missing(table, entity, &mut found);
    match entity {
        TableEntity::Patron(patron) => {
            let open = table.open_loans_of_patron(patron.patron_id.as_str()).len() as u32;
            if open != patron.active_loans {
                found.push(Finding {
                    rule: Rule::ActiveLoans,
                    about: "",
                    key: key.clone(),
                    detail: format!(
                        "activeLoans is {}, but the patron has {open} open loans",
                        patron.active_loans
                    ),
                    repair: Some(Repair::SetActiveLoans {
                        patron: key,
                        seen: patron.active_loans,
                        open,
                    }),
                });
            }
        }
        TableEntity::Copy(copy) => {
            copy_status(table, &key, stored, copy, &mut found);
            // A count no transaction wrote is reported once, from its book's first copy.
            let count = keys::book_availability(&copy.isbn, &copy.branch_id);
            if table.get(&count).is_none() && table.is_first_copy_of_book(copy, &key) {
                availability_settled(table, &copy.isbn, &copy.branch_id, &mut found);
            }
        }
        TableEntity::BookAvailability(count) => {
            if let Some(isbn) = &count.isbn {
                availability_settled(table, isbn, &count.branch_id, &mut found);
            }
        }
        TableEntity::OwnerLock(lock) => owner_lock_orphan(table, &key, lock, &mut found),
        TableEntity::Account(row) => owner_lock_missing(table, row, &mut found),
        TableEntity::Loan(loan) => loan_index(&key, stored, loan, &mut found),
        TableEntity::Resource(_) => audit_history(table, &key, &mut found),
        TableEntity::ResourceEvent(_) => {
            // A history without its `CURRENT` is reported once, on its first event.
            let partition = table.resources.get(&key.pk);
            let first = partition.and_then(|sks| sks.first());
            let has_current = partition.is_some_and(|sks| sks.contains(keys::CURRENT));
            if !has_current && first == Some(&key.sk) {
                audit_history(table, &key, &mut found);
            }
        }
        _ => {}
    }
    found
}

fn expiry(key: &Key, stored: &Stored, entity: &TableEntity, found: &mut Vec<Finding>) {
    match &stored.expires_at {
        Some(seen) if why_never_expires(entity).is_some() => found.push(Finding {
            rule: Rule::Expiry,
            about: "",
            key: key.clone(),
            detail: why_never_expires(entity).unwrap_or_default().into(),
            repair: seen
                .parse()
                .ok()
                .filter(|_| expiry_repairable(entity.entity_type().name))
                .map(|seen| Repair::RemoveExpiry {
                    key: key.clone(),
                    entity: entity.entity_type().name,
                    seen,
                }),
        }),
        None if must_expire(entity, stored.version) => found.push(Finding {
            rule: Rule::Expiry,
            about: "",
            key: key.clone(),
            detail: match entity {
                // Its end is its return date and the deployment's `LoanHistoryDays`, which the
                // migration is given and `fsck` is not: report only.
                TableEntity::Loan(_) => format!(
                    "a returned loan at version {} has no expiresAt: its patron's history would \
                     keep it for ever (`migrate {}` run again sets it)",
                    stored.version,
                    returned_loans_expire::MIGRATION.name
                ),
                _ => "an item that must expire has no expiresAt".into(),
            },
            repair: set_expiry_repairable(entity.entity_type().name).then(|| Repair::SetExpiry {
                key: key.clone(),
                entity: entity.entity_type().name,
            }),
        }),
        _ => {}
    }
}

/// What the table says about the owner a lock names.
fn holder_state(table: &Table, owner: Option<Key>, kind: LockKind) -> Option<(Holder, bool)> {
    let Some(owner) = owner else {
        return Some((Holder::Unknown, false));
    };
    match table.entity(&owner) {
        None => Some((Holder::Absent(owner), false)),
        // An owner that does not decode is reported as such; its locks wait for a person.
        Some(Err(_)) => None,
        Some(Ok(entity)) => {
            let value = claims(entity)
                .into_iter()
                .find(|claim| claim.kind == kind)
                .map(|claim| claim.value)?;
            Some((
                Holder::Holds {
                    owner,
                    field: kind.value,
                    value,
                },
                true,
            ))
        }
    }
}

/// Whether the entity at `owner` holds the lock at `lock`.
fn holds(table: &Table, owner: Option<&Key>, lock: &Key, holder: &str) -> bool {
    let entity = owner.and_then(|owner| table.entity(owner));
    matches!(entity, Some(Ok(entity)) if claims(entity)
        .iter()
        .any(|claim| claim.keyed_at(lock) && claim.holder == holder))
}

fn lock_orphan(
    table: &Table,
    key: &Key,
    entity: &TableEntity,
    lock: &LockItem,
    found: &mut Vec<Finding>,
) {
    let owner = owner_key(lock.kind, &lock.holder, &table.patrons);
    if holds(table, owner.as_ref(), key, &lock.holder) {
        return;
    }
    let Some((holder, exists)) = holder_state(table, owner, lock.kind) else {
        return;
    };
    let field = lock.kind.holder;
    let detail = if exists {
        format!(
            "names {field} {}, which holds another {}",
            lock.holder, lock.kind.value
        )
    } else {
        format!("names {field} {}, which does not exist", lock.holder)
    };
    found.push(Finding {
        rule: Rule::LockOrphan,
        about: "",
        key: key.clone(),
        detail,
        repair: Some(Repair::ReleaseLock {
            lock: entity.clone(),
            at: key.clone(),
            kind: lock.kind,
            holder_owner: holder,
        }),
    });
}

fn lock_missing(table: &Table, owner: &TableEntity, found: &mut Vec<Finding>) {
    for claim in claims(owner) {
        let field = claim.kind.value;
        let finding = |detail: String, repair: Option<Repair>| Finding {
            rule: Rule::LockMissing,
            key: claim.owner.clone(),
            about: field,
            detail,
            repair,
        };
        let held = match table.entity(&claim.lock_key) {
            None => None,
            Some(Ok(entity)) => match lock(entity) {
                Some(lock) => Some(lock),
                // Something else at the lock's key: reported as undecodable.
                None => continue,
            },
            // Nothing decodable at the lock's key: reported as undecodable.
            Some(Err(_)) => continue,
        };
        let held_earlier = claim.earlier_key.as_ref().is_some_and(|earlier| {
            matches!(table.entity(earlier), Some(Ok(entity))
                if lock(entity).is_some_and(|lock| lock.holder == claim.holder))
        });
        if held.is_none() && held_earlier {
            // Locked under the previous version's key, until its migration re-keys it.
            continue;
        }
        match held {
            None => found.push(finding(
                format!("its {field} has no lock"),
                Some(Repair::ClaimLock {
                    claim: claim.clone(),
                    over: None,
                }),
            )),
            Some(lock) if lock.holder == claim.holder => {}
            Some(lock) => {
                let other = owner_key(lock.kind, &lock.holder, &table.patrons);
                let holder_field = lock.kind.holder;
                if holds(table, other.as_ref(), &claim.lock_key, &lock.holder) {
                    found.push(finding(
                        format!(
                            "its {field} is locked by {holder_field} {}, which holds the same \
                             value: a person must choose between them",
                            lock.holder
                        ),
                        None,
                    ));
                } else if holder_state(table, other, lock.kind).is_some() {
                    found.push(finding(
                        format!(
                            "its {field}'s lock names {holder_field} {}, which does not hold it",
                            lock.holder
                        ),
                        Some(Repair::ClaimLock {
                            claim: claim.clone(),
                            over: Some(lock.holder.clone()),
                        }),
                    ));
                }
            }
        }
    }
}

/// Whether the table's owner locks are keyed under another server secret than this run's: some
/// owner lock names its subject's one account, and not one of them is where this run's key puts
/// it. Every owner lock would then look orphaned, and every such account without its lock.
pub fn owner_locks_under_another_key(table: &Table) -> bool {
    let (mut named, mut placed) = (0, 0);
    for stored in table.items() {
        if let Ok(TableEntity::OwnerLock(lock)) = &stored.entity
            && let Some(Ok(TableEntity::Account(row))) =
                table.entity(&keys::account(&lock.account_id))
            && let Some(held) = table.owner_lock_of(row)
        {
            named += 1;
            placed += usize::from(*held.key() == stored.key);
        }
    }
    named > 0 && placed == 0
}

/// Where the table files the item at `pk` and `sk`: where [`Table::find`] looks for it.
fn hash_of(hasher: &DefaultHashBuilder, pk: &str, sk: &str) -> u64 {
    hasher.hash_one((pk, sk))
}

/// `lock-orphan`, for an owner lock: the account it names does not exist, or is not the one
/// account of the subject whose keyed hash is the lock's key.
fn owner_lock_orphan(table: &Table, key: &Key, lock: &OwnerLock, found: &mut Vec<Finding>) {
    let account = keys::account(&lock.account_id);
    let row = match table.entity(&account) {
        None => None,
        Some(Ok(TableEntity::Account(row))) => Some(row),
        // Something else at the account's key: reported as undecodable.
        Some(_) => return,
    };
    let detail = match row {
        None => format!("names accountId {}, which does not exist", lock.account_id),
        Some(row) => match table.owner_lock_of(row) {
            Some(held) if *held.key() == *key => return,
            // The account is its subject's one, and this lock names it from another key than
            // this run's key gives the subject. Either the lock was keyed under another server
            // secret than this run's (the API's own, when this run has the wrong one), or it is
            // misplaced; the key is a keyed hash, so which cannot be told. Only where the account
            // holds its lock at this run's key too is this one surely surplus. Otherwise it is
            // left as it is, whatever the other locks of the table: released under a wrong key,
            // it would free its subject to open a second account.
            Some(_) if !table.owner_lock_in_place(row) => {
                found.push(Finding {
                    rule: Rule::LockOrphan,
                    about: "",
                    key: key.clone(),
                    detail: format!(
                        "names accountId {}, its subject's one account, but is not where this \
                         run's server secret puts that subject's lock: keyed under another \
                         secret (run fsck with the API's CURSOR_KEY, and its OWNER_KEY if it \
                         has one) or misplaced; a person must decide",
                        lock.account_id
                    ),
                    repair: None,
                });
                return;
            }
            Some(_) => format!(
                "names accountId {}, which another subject owns",
                lock.account_id
            ),
            None => format!(
                "names accountId {}, which is no subject's one account",
                lock.account_id
            ),
        },
    };
    found.push(Finding {
        rule: Rule::LockOrphan,
        about: "",
        key: key.clone(),
        detail,
        repair: Some(Repair::ReleaseOwnerLock {
            lock: lock.clone(),
            account: row.cloned(),
        }),
    });
}

/// `lock-missing`, for an account that is its owner's one account: no owner lock names it.
fn owner_lock_missing(table: &Table, row: &AccountRow, found: &mut Vec<Finding>) {
    let Some(claim) = table.owner_lock_of(row) else {
        return;
    };
    let finding = |detail: String, repair: Option<Repair>| Finding {
        rule: Rule::LockMissing,
        key: row.key().into_key(),
        about: OWNER,
        detail,
        repair,
    };
    let claim_it = |over: Option<Id>| Repair::ClaimOwnerLock {
        lock: claim.clone(),
        account: row.clone(),
        over,
    };
    match table.entity(&claim.key()) {
        // An owner lock names the account from elsewhere: keyed under another server secret
        // than this run's, or misplaced (see `owner_lock_orphan`). A lock claimed here would sit
        // where only this run's key looks, if it is not the API's.
        None => match table
            .owner_locks_naming(row.account.account_id.as_str())
            .first()
        {
            Some(elsewhere) => found.push(finding(
                format!(
                    "its owner has no owner lock where this run's server secret puts it, and \
                     the one at {} names it: keyed under another secret (run fsck with the \
                     API's CURSOR_KEY, and its OWNER_KEY if it has one) or misplaced; a person \
                     must decide",
                    elsewhere.pk
                ),
                None,
            )),
            None => found.push(finding(
                "its owner has no owner lock".into(),
                Some(claim_it(None)),
            )),
        },
        Some(Ok(TableEntity::OwnerLock(held))) if held.account_id == row.account.account_id => {}
        Some(Ok(TableEntity::OwnerLock(held))) => {
            let other = match table.entity(&keys::account(&held.account_id)) {
                Some(Ok(TableEntity::Account(other))) => table.owner_lock_of(other),
                _ => None,
            };
            if other.is_some_and(|other| other.key() == claim.key()) {
                found.push(finding(
                    format!(
                        "its owner's lock names accountId {}, which the same subject owns: a \
                         person must choose between them",
                        held.account_id
                    ),
                    None,
                ));
            } else {
                found.push(finding(
                    format!(
                        "its owner's lock names accountId {}, which does not hold it",
                        held.account_id
                    ),
                    Some(claim_it(Some(held.account_id.clone()))),
                ));
            }
        }
        // Something else at the lock's key: reported as undecodable.
        Some(_) => {}
    }
}

/// `copy-status`, for a branch's count of a book's available copies, judged only where every
/// copy's status agrees with its loans: a copy whose status is wrong is repaired alone, as the
/// loans say, and the count is then judged against the statuses it leaves.
fn availability_settled(table: &Table, isbn: &Isbn13, branch_id: &Id, found: &mut Vec<Finding>) {
    let unsettled = table
        .copies_of_book(isbn, branch_id)
        .into_iter()
        .any(|copy| {
            let key = copy.key();
            let Some(stored) = table.get(&key) else {
                return false;
            };
            let mut doubts = Vec::new();
            copy_status(table, &key, stored, copy, &mut doubts);
            doubts.iter().any(|f| {
            !matches!(&f.repair, Some(Repair::SetCopyStatus { to, .. }) if *to == copy.status)
        })
        });
    if !unsettled {
        found.extend(availability(table, isbn, branch_id));
    }
}

/// `copy-status`, for the count `BOOK#<isbn>`/`AVAILABLE#<branchId>`: it must be the number of
/// the book's copies at the branch whose status is `available`, and it must exist once the
/// branch has a copy of the book (the transaction that adds the first one writes it).
pub fn availability(table: &Table, isbn: &Isbn13, branch_id: &Id) -> Option<Finding> {
    let key = keys::book_availability(isbn, branch_id);
    let copies = table.copies_of_book(isbn, branch_id);
    let shelved = copies
        .iter()
        .filter(|copy| copy.status == CopyStatus::Available)
        .count() as i64;
    let seen = match table.entity(&key) {
        None => None,
        Some(Ok(TableEntity::BookAvailability(count))) => Some(count.available_copies),
        // Something else at the count's key: reported as undecodable.
        Some(_) => return None,
    };
    let held = match copies.len() {
        1 => "1 copy".to_owned(),
        n => format!("{n} copies"),
    };
    let detail = match seen {
        Some(seen) if seen == shelved => return None,
        None if copies.is_empty() => return None,
        Some(seen) => format!(
            "{} is {seen}, but the branch has {held} of the book, {shelved} available",
            BookAvailability::AVAILABLE_COPIES.name(),
        ),
        None => format!("no count, but the branch has {held} of the book, {shelved} available"),
    };
    Some(Finding {
        rule: Rule::CopyStatus,
        about: AVAILABLE_COPIES,
        key,
        detail,
        repair: Some(Repair::SetAvailableCopies(AvailableCopies {
            isbn: isbn.clone(),
            branch_id: branch_id.clone(),
            seen,
            to: shelved,
        })),
    })
}

fn copy_status(table: &Table, key: &Key, stored: &Stored, copy: &Copy, found: &mut Vec<Finding>) {
    let loans = table.open_loans_of_copy(copy.branch_id.as_str(), copy.copy_id.as_str());
    let status = copy.status.as_str();
    let (detail, to) = match (copy.status, loans.as_slice()) {
        (CopyStatus::CheckedOut, []) => (
            "checked_out, but no open loan lends it".to_owned(),
            Some((CopyStatus::Available, None)),
        ),
        (CopyStatus::Available, [loan]) => (
            format!("available, but loan {} lends it", loan.checkout_id),
            Some((CopyStatus::CheckedOut, Some(loan.active_key()))),
        ),
        (CopyStatus::CheckedOut, [_]) | (CopyStatus::Available, []) => {
            // The status is right; its availability index key must say the same.
            let expected = copy
                .index_keys()
                .into_iter()
                .find(|(index, _)| index.name == GSI2.name)
                .map(|(_, key)| key);
            if expected.is_some_and(|expected| {
                stored.index_key(GSI2.pk) == Some(&expected.pk)
                    && stored.index_key(GSI2.sk) == Some(&expected.sk)
            }) {
                return;
            }
            (
                format!("{status}, but its availability index keys say otherwise"),
                Some((copy.status, None)),
            )
        }
        (_, many) => (
            format!(
                "{status}, with {} open loans of it ({}): a person must choose",
                many.len(),
                many.iter()
                    .map(|l| l.checkout_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
    };
    found.push(Finding {
        rule: Rule::CopyStatus,
        about: "",
        key: key.clone(),
        detail,
        repair: to.map(|(to, loan)| Repair::SetCopyStatus {
            copy: copy.clone(),
            to,
            loan,
        }),
    });
}

/// The index keys a loan carries in its state: the model's own (`Checkout::index_keys`, what
/// every handler writes), as attribute names and values.
fn loan_index_keys(loan: &Checkout) -> Result<BTreeMap<&'static str, String>, String> {
    if loan.status == LoanStatus::Returned && loan.returned_date.is_none() {
        return Err("a returned loan without a returnedDate".into());
    }
    Ok(loan
        .index_keys()
        .into_iter()
        .flat_map(|(index, key)| [(index.pk, key.pk), (index.sk, key.sk)])
        .collect())
}

fn loan_index(key: &Key, stored: &Stored, loan: &Checkout, found: &mut Vec<Finding>) {
    let expected = match loan_index_keys(loan) {
        Ok(expected) => expected,
        Err(why) => {
            found.push(Finding {
                rule: Rule::LoanIndex,
                about: "",
                key: key.clone(),
                detail: why,
                repair: None,
            });
            return;
        }
    };
    let mut wrong = Vec::new();
    for name in INDEXES.iter().flat_map(|index| [index.pk, index.sk]) {
        match (expected.get(name), stored.index_key(name)) {
            (Some(want), Some(got)) if want == got => {}
            (None, None) => {}
            _ => wrong.push(name),
        }
    }
    if wrong.is_empty() {
        return;
    }
    let state = match loan.status {
        LoanStatus::Open => "open",
        LoanStatus::Overdue => "overdue",
        LoanStatus::Returned => "returned",
    };
    found.push(Finding {
        rule: Rule::LoanIndex,
        about: "",
        key: key.clone(),
        detail: format!(
            "its index keys do not match its state ({state}): {}",
            wrong.join(", ")
        ),
        repair: Some(Repair::RewriteLoanIndex {
            loan: loan.clone(),
            key: key.clone(),
            remove: other_indexes(&loan.index_keys())
                .into_iter()
                .filter(|index| {
                    stored.index_key(index.pk).is_some() || stored.index_key(index.sk).is_some()
                })
                .collect(),
            set: loan.index_keys(),
            seen: INDEXES
                .iter()
                .map(|index| {
                    (
                        *index,
                        stored.index_key(index.pk).cloned(),
                        stored.index_key(index.sk).cloned(),
                    )
                })
                .collect(),
        }),
    });
}

fn audit_history(table: &Table, anchor: &Key, found: &mut Vec<Finding>) {
    let mut current = None;
    let mut events = BTreeMap::new();
    for sk in table.resources.get(&anchor.pk).into_iter().flatten() {
        let key = Key {
            pk: anchor.pk.clone(),
            sk: sk.clone(),
        };
        match table.entity(&key) {
            Some(Ok(TableEntity::Resource(resource))) => current = Some(resource),
            Some(Ok(TableEntity::ResourceEvent(stored))) => {
                events.insert(stored.event.sequence, &stored.event);
            }
            _ => {}
        }
    }
    let mut problems = Vec::new();
    let last = events.keys().next_back().copied().unwrap_or(0);
    let version = match current {
        Some(resource) => resource.version,
        None => {
            problems.push("events without a CURRENT".to_owned());
            last
        }
    };
    let missing: Vec<u64> = (1..=version.max(last))
        .filter(|sequence| !events.contains_key(sequence))
        .collect();
    match missing.as_slice() {
        [] => {}
        [one] => problems.push(format!("sequence {one} is missing")),
        [first, ..] => problems.push(format!(
            "{} sequences are missing, the first {first}",
            missing.len()
        )),
    }
    if let Some(resource) = current {
        if last > resource.version {
            problems.push(format!(
                "version is {}, but events go on to {last}",
                resource.version
            ));
        }
        if let Some(event) = events.get(&resource.version)
            && event.to_status != resource.status
        {
            problems.push("its status is not its last event's".to_owned());
        }
    }
    if !problems.is_empty() {
        found.push(Finding {
            rule: Rule::AuditHistory,
            about: "",
            key: anchor.clone(),
            detail: problems.join("; "),
            repair: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::Rule;
    use std::path::{Path, PathBuf};

    /// The repository's root: the nearest folder above this crate's with `docs/API.md`.
    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|dir| dir.join("docs/API.md").is_file())
            .expect("docs/API.md above the crate")
            .to_owned()
    }

    /// The rule names of each Markdown table headed `| rule | what is wrong | repair |` in
    /// `text`, in their order.
    fn rule_tables(text: &str) -> Vec<Vec<String>> {
        let mut tables = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !line.starts_with("| rule | what is wrong | repair |") {
                continue;
            }
            let names = lines
                .by_ref()
                .skip(1)
                .take_while(|row| row.starts_with('|'))
                .filter_map(|row| row.split('|').nth(1))
                .map(|name| name.trim().trim_matches('`').to_owned())
                .collect();
            tables.push(names);
        }
        tables
    }

    fn names() -> Vec<String> {
        Rule::ALL.map(|rule| rule.name().to_owned()).to_vec()
    }

    /// The contract's table (docs/API.md, which is a copy of the shared contract and edited there
    /// only) names the checker's rules, all of them, in its order: a rule added, renamed or
    /// dropped fails here. The guide's fsck page links that table rather than repeating it.
    #[test]
    fn the_contract_lists_every_rule() {
        let contract = std::fs::read_to_string(root().join("docs/API.md")).unwrap();
        assert_eq!(rule_tables(&contract), [names()]);
    }

    /// Every rule in `ALL` once, each under a name of its own, which is what `--json` writes.
    #[test]
    fn every_rule_has_a_name_of_its_own() {
        let mut names = names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Rule::ALL.len());
        for rule in Rule::ALL {
            assert_eq!(serde_json::to_value(rule).unwrap(), rule.name());
        }
    }
}
