//! The rules that span items, each a pure function of the items involved.
//!
//! The same functions judge the whole table after the scan and, to confirm a finding, the few
//! items re-read for it: a finding is only reported when the fresh items break the rule too.

use super::entity::{Entity, Lock, LockKind, decode, key_of};
use super::repair::{Holder, Repair};
use serde::Serialize;
use singlet_functions::library::Copy;
use singlet_functions::loans::{Checkout, LoanStatus};
use singlet_functions::store::Item;
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI2, INDEXES, TTL_ATTRIBUTE};
use singlet_shared::{Id, Key};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The contract's rules (`shared/API.md`, "Consistency check: `fsck`").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
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
/// entity's fields (its TTL and its index keys).
#[derive(Debug, Clone)]
pub struct Stored {
    pub key: Key,
    pub entity: Result<Entity, String>,
    pub expires_at: Option<String>,
    pub index_keys: BTreeMap<&'static str, String>,
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
            entity: decode(item),
            expires_at,
            index_keys,
        }
    }

    fn index_key(&self, name: &str) -> Option<&String> {
        self.index_keys.get(name)
    }
}

/// Items by key, with the lookups the rules need: a patron's and a copy's open loans, a
/// resource's partition.
#[derive(Default)]
pub struct Table {
    pub items: HashMap<At, Stored>,
    /// Patron ids and the keys of their rows: a card lock names its holder by id alone.
    pub patrons: HashMap<String, Key>,
    open_loans_by_patron: HashMap<String, BTreeSet<At>>,
    open_loans_by_copy: HashMap<(String, String), BTreeSet<At>>,
    resources: HashMap<String, BTreeSet<String>>,
}

impl Table {
    pub fn insert(&mut self, stored: Stored) {
        let key = stored.key.clone();
        let at = at(&key);
        match &stored.entity {
            Ok(Entity::ActiveLoan(loan)) => {
                self.open_loans_by_patron
                    .entry(loan.patron_id.to_string())
                    .or_default()
                    .insert(at.clone());
                self.open_loans_by_copy
                    .entry((loan.branch_id.to_string(), loan.copy_id.to_string()))
                    .or_default()
                    .insert(at.clone());
            }
            Ok(Entity::Patron(patron)) => {
                self.patrons
                    .insert(patron.patron_id.to_string(), patron.key());
            }
            _ if key.pk.starts_with("RESOURCE#") => {
                self.resources
                    .entry(key.pk.clone())
                    .or_default()
                    .insert(key.sk.clone());
            }
            _ => {}
        }
        self.items.insert(at, stored);
    }

    pub fn get(&self, key: &Key) -> Option<&Stored> {
        self.items.get(&at(key))
    }

    pub fn entity(&self, key: &Key) -> Option<&Result<Entity, String>> {
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

    fn loans(&self, keys: Option<&BTreeSet<At>>) -> Vec<&Checkout> {
        keys.into_iter()
            .flatten()
            .filter_map(|at| match self.items.get(at).map(|s| &s.entity) {
                Some(Ok(Entity::ActiveLoan(loan))) => Some(loan),
                _ => None,
            })
            .collect()
    }
}

/// Where the owner a lock names lives. Patrons are keyed by their branch, so a card lock's holder
/// is found in `patrons` (the table's; the confirmation looks a newer one up by id).
pub fn owner_key(kind: LockKind, holder: &str, patrons: &HashMap<String, Key>) -> Option<Key> {
    let id = Id::parse(holder).ok()?;
    match kind {
        LockKind::Plate | LockKind::Chassis => Some(keys::vehicle(&id)),
        LockKind::Email | LockKind::Username => Some(keys::account(&id)),
        LockKind::Card => patrons.get(holder).cloned(),
    }
}

/// Every finding whose subject is the item at `at`.
pub fn check(table: &Table, at: &At) -> Vec<Finding> {
    let Some(stored) = table.items.get(at) else {
        return Vec::new();
    };
    let key = key(at);
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
    match entity {
        Entity::Lock(lock) => lock_orphan(table, &key, lock, &mut found),
        Entity::Vehicle(_) | Entity::Account(_) => {
            lock_missing(table, entity, &mut found);
        }
        Entity::Patron(patron) => {
            lock_missing(table, entity, &mut found);
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
        Entity::Copy(copy) => copy_status(table, &key, stored, copy, &mut found),
        Entity::ActiveLoan(loan) | Entity::ReturnedLoan(loan) => {
            loan_index(&key, stored, loan, &mut found);
        }
        Entity::Resource(_) => audit_history(table, &key, &mut found),
        Entity::ResourceEvent(_) => {
            // A history without its `CURRENT` is reported once, on its first event.
            let partition = table.resources.get(&key.pk);
            let first = partition.and_then(|sks| sks.first());
            let has_current = partition.is_some_and(|sks| sks.contains("CURRENT"));
            if !has_current && first == Some(&key.sk) {
                audit_history(table, &key, &mut found);
            }
        }
        _ => {}
    }
    found
}

fn expiry(key: &Key, stored: &Stored, entity: &Entity, found: &mut Vec<Finding>) {
    match &stored.expires_at {
        Some(seen) if entity.must_not_expire() => found.push(Finding {
            rule: Rule::Expiry,
            about: "",
            key: key.clone(),
            detail: "a lock or a lock's owner carries expiresAt: TTL would free its value".into(),
            repair: Some(Repair::RemoveExpiry {
                key: key.clone(),
                seen: seen.clone(),
            }),
        }),
        None if entity.must_expire() => found.push(Finding {
            rule: Rule::Expiry,
            about: "",
            key: key.clone(),
            detail: "an item that must expire has no expiresAt".into(),
            repair: Some(Repair::SetExpiry { key: key.clone() }),
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
            let value = entity
                .claims()
                .into_iter()
                .find(|claim| claim.kind == kind)
                .map(|claim| claim.value)?;
            Some((
                Holder::Holds {
                    owner,
                    field: kind.owner_field(),
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
    matches!(entity, Some(Ok(entity)) if entity
        .claims()
        .iter()
        .any(|claim| claim.lock == *lock && claim.holder == holder))
}

fn lock_orphan(table: &Table, key: &Key, lock: &Lock, found: &mut Vec<Finding>) {
    let owner = owner_key(lock.kind, &lock.holder, &table.patrons);
    if holds(table, owner.as_ref(), key, &lock.holder) {
        return;
    }
    let Some((holder, exists)) = holder_state(table, owner, lock.kind) else {
        return;
    };
    let field = lock.kind.holder_field();
    let detail = if exists {
        format!(
            "names {field} {}, which holds another {}",
            lock.holder,
            lock.kind.owner_field()
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
            lock: key.clone(),
            kind: lock.kind,
            holder: lock.holder.clone(),
            holder_owner: holder,
        }),
    });
}

fn lock_missing(table: &Table, owner: &Entity, found: &mut Vec<Finding>) {
    for claim in owner.claims() {
        let field = claim.kind.owner_field();
        let finding = |detail: String, repair: Option<Repair>| Finding {
            rule: Rule::LockMissing,
            key: claim.owner.clone(),
            about: field,
            detail,
            repair,
        };
        match table.entity(&claim.lock) {
            None => found.push(finding(
                format!("its {field} has no lock"),
                Some(Repair::ClaimLock {
                    claim: claim.clone(),
                    held_by: None,
                }),
            )),
            Some(Ok(Entity::Lock(lock))) if lock.holder == claim.holder => {}
            Some(Ok(Entity::Lock(lock))) => {
                let other = owner_key(lock.kind, &lock.holder, &table.patrons);
                let holder_field = lock.kind.holder_field();
                if holds(table, other.as_ref(), &claim.lock, &lock.holder) {
                    found.push(finding(
                        format!(
                            "its {field} is locked by {holder_field} {}, which holds the same \
                             value: a person must choose between them",
                            lock.holder
                        ),
                        None,
                    ));
                } else if let Some((state, _)) = holder_state(table, other, lock.kind) {
                    found.push(finding(
                        format!(
                            "its {field}'s lock names {holder_field} {}, which does not hold it",
                            lock.holder
                        ),
                        Some(Repair::ClaimLock {
                            claim: claim.clone(),
                            held_by: Some((lock.holder.clone(), state)),
                        }),
                    ));
                }
            }
            // Something else, or nothing decodable, at the lock's key: reported as undecodable.
            Some(_) => {}
        }
    }
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
            let expected =
                keys::copy_by_book(&copy.isbn, copy.status, &copy.branch_id, &copy.copy_id);
            if stored.index_key(GSI2.pk) == Some(&expected.pk)
                && stored.index_key(GSI2.sk) == Some(&expected.sk)
            {
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

/// The index keys a loan carries in each state: the API's own key functions, by state.
fn loan_index_keys(key: &Key, loan: &Checkout) -> Result<BTreeMap<&'static str, String>, String> {
    let returned = key.sk.starts_with(keys::RETURNED_PREFIX);
    let mut expected = BTreeMap::new();
    let mut put = |index: singlet_shared::schema::Index, keys: singlet_shared::IndexKey| {
        expected.insert(index.pk, keys.pk);
        expected.insert(index.sk, keys.sk);
    };
    use singlet_shared::schema::{GSI1, GSI3, GSI4};
    match (returned, loan.status) {
        (false, LoanStatus::Open) => put(GSI1, keys::open_loan(&loan.checkout_id, &loan.due_date)),
        (false, LoanStatus::Overdue) => {
            put(
                GSI3,
                keys::overdue_loan(&loan.branch_id, &loan.checkout_id, &loan.due_date),
            );
            put(
                GSI4,
                keys::overdue_anywhere(&loan.checkout_id, &loan.due_date),
            );
        }
        (true, LoanStatus::Returned) => {
            let date = loan
                .returned_date
                .as_deref()
                .ok_or("a returned loan without a returnedDate")?;
            put(
                GSI1,
                keys::returned_loan(&loan.patron_id, &loan.checkout_id, date),
            );
        }
        (false, LoanStatus::Returned) => return Err("a returned loan among active loans".into()),
        (true, _) => return Err("a loan among returned loans that is not returned".into()),
    }
    Ok(expected)
}

fn loan_index(key: &Key, stored: &Stored, loan: &Checkout, found: &mut Vec<Finding>) {
    let expected = match loan_index_keys(key, loan) {
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
    let mut remove = Vec::new();
    for name in INDEXES.iter().flat_map(|index| [index.pk, index.sk]) {
        match (expected.get(name), stored.index_key(name)) {
            (Some(want), Some(got)) if want == got => {}
            (Some(_), _) => wrong.push(name),
            (None, Some(_)) => {
                wrong.push(name);
                remove.push(name);
            }
            (None, None) => {}
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
            set: expected
                .into_iter()
                .filter(|(name, _)| wrong.contains(name))
                .collect(),
            remove,
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
            Some(Ok(Entity::Resource(resource))) => current = Some(resource),
            Some(Ok(Entity::ResourceEvent(event))) => {
                events.insert(event.sequence, event);
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
