//! A finding from the scan is a suspicion: the scan reads each item at a different moment, so a
//! transaction committed while it ran can show one half changed and the other not. Before it is
//! reported, every item the finding involves is read again, strongly consistently, in one
//! `TransactGetItems` (a snapshot no transaction can split), and the same rule judges the fresh
//! items; this is done twice, and a finding is confirmed only when both snapshots give the very
//! verdict the scan gave (the same detail: a copy the scan saw `available` under a loan that is
//! `checked_out` under no known loan by now is not the same finding, only a busy copy).
//!
//! A snapshot proves what it holds. It proves an absence (no open loan lends a copy, no patron
//! holds a card, no lock names an owner) only if every item that could be present is among the
//! keys read, and those keys were found by other reads, which a write can slip between. Each
//! such finding is therefore confirmed with the reads that found its keys around the snapshot,
//! and only when they found the same keys before and after (see [`Discovered`], [`reread`]).
//! No index is read: a global index cannot be read consistently, so what it does not show yet
//! proves nothing.

use super::entity::{LockKind, claims, decode, key_of, lock, owner_key_by_id};
use super::repair::Repair;
use super::rules::{At, Finding, Rule, Stored, Table, at, availability, check, owner_key};
use super::scan::{self, Counter, Read};
use futures::future::BoxFuture;
use singlet_functions::Ctx;
use singlet_functions::model::{Entity, TableEntity};
use singlet_functions::store::{Item, Query};
use singlet_shared::keys::{
    self, BRANCH_PREFIX, CHECKOUT_PREFIX, COPY_PREFIX, CopyStatus, PATRON_PREFIX, RETURNED_PREFIX,
};
use singlet_shared::{Id, Isbn13, Key};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// How many findings are confirmed at once.
const AT_ONCE: usize = 16;

/// A copy, as `(branchId, copyId)`.
type CopyId = (String, String);

/// The findings among `candidates` that fresh reads confirm, with their repairs as of those reads.
/// `between` runs after the first discovery scan and before any snapshot: nothing in a run, and
/// in a test the writes that race the confirmation.
pub async fn confirm(
    ctx: &Ctx,
    table: &Table,
    candidates: Vec<Finding>,
    segments: u32,
    between: BoxFuture<'_, ()>,
) -> Result<Vec<Finding>, String> {
    let wanted = Arc::new(Wanted::of(table, &candidates));
    let before = Discovered::scan(ctx, &wanted, segments).await?;
    between.await;
    let mut confirmed = Vec::new();
    for batch in candidates.chunks(AT_ONCE) {
        let results = futures::future::join_all(
            batch
                .iter()
                .map(|finding| confirm_one(ctx, table, &wanted, &before, finding)),
        )
        .await;
        for result in results {
            confirmed.extend(result?);
        }
    }
    // A copy `checked_out` with no open loan: its loans can be under any patron, so the snapshot
    // holds those the first discovery scan found, and the second, which starts after every
    // snapshot, must find the same ones. Every checkout and every return of the copy changes
    // that set: a checkout adds `CHECKOUT#<id>`, a return moves it to `RETURNED#<id>` in the same
    // partition (a scan reads a partition in sort-key order, so a loan returned while the scan
    // passes is read at one key or the other), and a returned loan outlives the check (its TTL
    // is `LoanHistoryDays`). So if a loan was open at a snapshot that showed none, either the
    // first scan found it (then the snapshot read it open) or it was written after the first scan
    // passed it, and the second finds it where the first found nothing: the finding is dropped.
    if confirmed.iter().any(|f| wanted.copy_of(table, f).is_some()) {
        let after = Discovered::scan(ctx, &wanted, segments).await?;
        confirmed.retain(|f| match wanted.copy_of(table, f) {
            Some(copy) => before.loans.get(copy) == after.loans.get(copy),
            None => true,
        });
    }
    Ok(confirmed)
}

async fn confirm_one(
    ctx: &Ctx,
    table: &Table,
    wanted: &Wanted,
    found: &Discovered,
    finding: &Finding,
) -> Result<Option<Finding>, String> {
    let mut last = None;
    for _ in 0..2 {
        let Some(fresh) = reread(ctx, table, wanted, found, finding).await? else {
            return Ok(None);
        };
        let again = match counted(finding) {
            // A count no transaction wrote has no item to judge: its book's copies are.
            Some((isbn, branch_id)) => availability(&fresh, isbn, branch_id),
            None => check(&fresh, &finding.key)
                .into_iter()
                .find(|f| f.rule == finding.rule && f.about == finding.about),
        };
        match again {
            Some(again) if again.detail == finding.detail => last = Some(again),
            _ => return Ok(None),
        }
    }
    Ok(last)
}

/// The book and branch whose count of available copies `finding` is about, if it is.
fn counted(finding: &Finding) -> Option<(&Isbn13, &Id)> {
    match &finding.repair {
        Some(Repair::SetAvailableCopies(count)) => Some((&count.isbn, &count.branch_id)),
        _ => None,
    }
}

/// What the candidates need found by a scan: the loans of each copy the scan saw `checked_out`
/// with no open loan, and the rows of the patrons that card locks name but the scan did not
/// read (patrons live under their branch, which a card lock does not name).
#[derive(Debug, Default)]
struct Wanted {
    copies: BTreeSet<CopyId>,
    patrons: BTreeSet<String>,
}

impl Wanted {
    fn of(table: &Table, candidates: &[Finding]) -> Self {
        let mut wanted = Self::default();
        for finding in candidates {
            let Some(Ok(entity)) = table.entity(&finding.key) else {
                continue;
            };
            match finding.rule {
                Rule::CopyStatus => {
                    if let TableEntity::Copy(copy) = entity
                        && copy.status == CopyStatus::CheckedOut
                    {
                        let id = (copy.branch_id.to_string(), copy.copy_id.to_string());
                        if table.open_loans_of_copy(&id.0, &id.1).is_empty() {
                            wanted.copies.insert(id);
                        }
                    }
                }
                Rule::LockOrphan | Rule::LockMissing => {
                    let mut locks: Vec<_> = lock(entity).into_iter().collect();
                    locks.extend(claims(entity).iter().filter_map(|claim| {
                        let held = table.entity(&claim.lock_key)?.as_ref().ok()?;
                        lock(held)
                    }));
                    wanted.patrons.extend(
                        locks
                            .into_iter()
                            // An owner its id alone locates is read where its id says.
                            .filter(|l| owner_key_by_id(l.kind, &l.holder).is_none())
                            .filter(|l| !table.patrons.contains_key(&l.holder))
                            .map(|l| l.holder),
                    );
                }
                _ => {}
            }
        }
        wanted
    }

    /// The copy `finding` is about, if its loans were looked for by scans.
    fn copy_of<'a>(&'a self, table: &Table, finding: &Finding) -> Option<&'a CopyId> {
        if finding.rule != Rule::CopyStatus || counted(finding).is_some() {
            return None;
        }
        let Some(Ok(TableEntity::Copy(copy))) = table.entity(&finding.key) else {
            return None;
        };
        self.copies
            .get(&(copy.branch_id.to_string(), copy.copy_id.to_string()))
    }

    fn is_empty(&self) -> bool {
        self.copies.is_empty() && self.patrons.is_empty()
    }
}

/// What a strongly consistent scan of the whole table found of what is [`Wanted`].
#[derive(Debug, Default)]
struct Discovered {
    /// Every loan of each wanted copy, open or returned, by key.
    loans: HashMap<CopyId, BTreeSet<At>>,
    /// The keys of the wanted patrons' rows, by patron id.
    patrons: HashMap<String, Key>,
}

/// One item a discovery scan keeps.
enum Hit {
    Loan(CopyId, At),
    Patron(String, Key),
}

impl Discovered {
    /// Scans the table for what is wanted; reads nothing when nothing is.
    async fn scan(ctx: &Ctx, wanted: &Arc<Wanted>, segments: u32) -> Result<Self, String> {
        let mut found = Self::default();
        if wanted.is_empty() {
            return Ok(found);
        }
        // The store takes no filter expression: every item is read, the few wanted are kept.
        let keep = wanted.clone();
        let hits = scan::scan(
            ctx,
            segments,
            Read::Strongly,
            &Counter::default(),
            move |item| hit(&keep, item),
        )
        .await?;
        for hit in hits.into_iter().flatten() {
            match hit {
                Hit::Loan(copy, loan) => {
                    found.loans.entry(copy).or_default().insert(loan);
                }
                Hit::Patron(id, key) => {
                    found.patrons.insert(id, key);
                }
            }
        }
        Ok(found)
    }

    /// The keys of the open loans of `copy` found.
    fn open_loans(&self, copy: &CopyId) -> impl Iterator<Item = Key> + '_ {
        self.loans
            .get(copy)
            .into_iter()
            .flatten()
            .filter(|(_, sk)| sk.starts_with(CHECKOUT_PREFIX))
            .map(super::rules::key)
    }
}

fn hit(wanted: &Wanted, item: Item) -> Option<Hit> {
    let key = key_of(&item);
    let loan = key.sk.starts_with(CHECKOUT_PREFIX) || key.sk.starts_with(RETURNED_PREFIX);
    let patron = key.pk.starts_with(BRANCH_PREFIX) && key.sk.starts_with(PATRON_PREFIX);
    if !wanted.copies.is_empty() && loan {
        if let Ok(TableEntity::Loan(loan)) = decode(&item) {
            let copy = (loan.branch_id.to_string(), loan.copy_id.to_string());
            return wanted
                .copies
                .contains(&copy)
                .then(|| Hit::Loan(copy, at(&key)));
        }
    } else if !wanted.patrons.is_empty()
        && patron
        && let Ok(TableEntity::Patron(row)) = decode(&item)
        && wanted.patrons.contains(row.patron_id.as_str())
    {
        return Some(Hit::Patron(row.patron_id.to_string(), key));
    }
    None
}

/// Where the owner a lock names is now.
enum Located {
    At(Key),
    Nowhere,
    /// A card's holder that neither the scan nor a discovery scan looked for: the lock changed
    /// hands since the scan, and this run cannot tell.
    Unknown,
}

/// Where the owner a lock names lives: for a card, the patron the scan saw, or the one the
/// discovery scan found. A card lock is written with its patron in one transaction and the scan
/// read the lock, so its patron, if it still exists, was written before the discovery scan began
/// and that scan reads it.
fn locate(
    table: &Table,
    found: &Discovered,
    wanted: &Wanted,
    kind: LockKind,
    holder: &str,
) -> Located {
    if let Some(owner) = owner_key(kind, holder, &table.patrons) {
        return Located::At(owner);
    }
    // An owner keyed by its id alone is where its id says, or nowhere; one keyed by more (a
    // patron, by its branch too) may be one the discovery scan found.
    let by_more_than_id = Id::parse(holder).is_ok_and(|id| kind.owner.key_from_id(&id).is_none());
    if !by_more_than_id {
        return Located::Nowhere;
    }
    match found.patrons.get(holder) {
        Some(owner) => Located::At(owner.clone()),
        None if wanted.patrons.contains(holder) => Located::Nowhere,
        None => Located::Unknown,
    }
}

/// Every item `finding` involves, read again; `None` when the reads that found which items
/// those are were overtaken by a write (the finding is then not confirmed in this run).
async fn reread(
    ctx: &Ctx,
    table: &Table,
    wanted: &Wanted,
    found: &Discovered,
    finding: &Finding,
) -> Result<Option<Table>, String> {
    let mut fresh = Table::new(table.ids.clone());
    let key = &finding.key;
    if let Some((isbn, branch_id)) = counted(finding) {
        let Some(read) = count_and_copies(ctx, isbn, branch_id).await? else {
            return Ok(None);
        };
        fill(&mut fresh, read);
        return Ok(Some(fresh));
    }
    match finding.rule {
        Rule::LockOrphan => {
            let read = snapshot(ctx, std::slice::from_ref(key)).await?;
            if let Some(Ok(TableEntity::OwnerLock(lock))) = read.first().map(|s| &s.entity) {
                let account = keys::account(&lock.account_id);
                let mut keys = vec![key.clone(), account.clone()];
                // And where this run's key puts the account's lock: whether the account holds
                // it there too decides whether this one is surplus.
                if let Some(Ok(TableEntity::Account(row))) = table.entity(&account)
                    && let Some(held) = table.owner_lock_of(row)
                    && *held.key() != *key
                {
                    keys.push(held.key().into_key());
                }
                fill(&mut fresh, snapshot(ctx, &keys).await?);
                return Ok(Some(fresh));
            }
            let Some(held) = read
                .first()
                .and_then(|s| s.entity.as_ref().ok())
                .and_then(lock)
            else {
                return Ok(Some(fresh));
            };
            let mut keys = vec![key.clone()];
            match locate(table, found, wanted, held.kind, &held.holder) {
                Located::At(owner) => {
                    fresh.patrons.insert(held.holder.clone(), owner.clone());
                    keys.push(owner);
                }
                Located::Nowhere => {}
                Located::Unknown => return Ok(None),
            }
            let read = snapshot(ctx, &keys).await?;
            // The lock must name the holder whose owner was read with it.
            let same = read.iter().any(|s| {
                s.key == *key
                    && s.entity.as_ref().ok().and_then(lock).map(|l| l.holder)
                        == Some(held.holder.clone())
            });
            if !same {
                return Ok(None);
            }
            fill(&mut fresh, read);
        }
        Rule::LockMissing => {
            // The owner as it is now, then its locks, then the owners those locks name, all
            // three in the last snapshot.
            let owner = snapshot(ctx, std::slice::from_ref(key)).await?;
            let Some(Ok(entity)) = owner.first().map(|s| s.entity.clone()) else {
                return Ok(Some(fresh));
            };
            let mut keys = vec![key.clone()];
            keys.extend(locks_of(table, &entity));
            let mut holders = Vec::new();
            for stored in snapshot(ctx, &keys).await? {
                if let Ok(TableEntity::OwnerLock(held)) = &stored.entity {
                    let other = keys::account(&held.account_id);
                    if other != *key {
                        holders.push(other);
                    }
                } else if let Some(held) = stored.entity.as_ref().ok().and_then(lock) {
                    match locate(table, found, wanted, held.kind, &held.holder) {
                        // One vehicle can hold two of these locks (a plate and a chassis number
                        // registered again in other spellings before `plates-compact`): a
                        // `TransactGetItems` takes each key once.
                        Located::At(owner) if owner != *key && !holders.contains(&owner) => {
                            fresh.patrons.insert(held.holder.clone(), owner.clone());
                            holders.push(owner);
                        }
                        Located::At(_) | Located::Nowhere => {}
                        Located::Unknown => return Ok(None),
                    }
                }
            }
            keys.extend(holders);
            let read = snapshot(ctx, &keys).await?;
            // The owner's values must be those whose locks were read: a value changed between
            // the snapshots has its lock elsewhere.
            let now = read.iter().find(|s| s.key == *key).map(|s| &s.entity);
            if let Some(Ok(entity)) = now
                && !locks_of(table, entity)
                    .iter()
                    .all(|lock| keys.contains(lock))
            {
                return Ok(None);
            }
            fill(&mut fresh, read);
        }
        Rule::ActiveLoans => {
            // The patron and its open loans in one snapshot, the loans found by a query of the
            // patron's partition before it and again after it. A checkout adds a `CHECKOUT#`
            // key there, a return moves it to `RETURNED#`: a loan opened or closed in between
            // changes the keys the second query finds, and the finding waits for another run.
            let Some(Ok(TableEntity::Patron(patron))) = table.entity(key) else {
                return Ok(Some(fresh));
            };
            let partition = keys::patron_loans_partition(&patron.patron_id);
            let before = partition_keys(ctx, &partition).await?;
            let mut keys = vec![key.clone()];
            keys.extend(
                before
                    .iter()
                    .filter(|(_, sk)| sk.starts_with(CHECKOUT_PREFIX))
                    .map(super::rules::key),
            );
            let read = snapshot(ctx, &keys).await?;
            if partition_keys(ctx, &partition).await? != before {
                return Ok(None);
            }
            fill(&mut fresh, read);
        }
        Rule::CopyStatus => {
            let mut keys = vec![key.clone()];
            if let Some(Ok(TableEntity::Copy(copy))) = table.entity(key) {
                let id = (copy.branch_id.to_string(), copy.copy_id.to_string());
                keys.extend(
                    table
                        .open_loans_of_copy(&id.0, &id.1)
                        .into_iter()
                        .map(|loan| loan.active_key().into_key()),
                );
                keys.extend(found.open_loans(&id));
            }
            let unique: BTreeSet<At> = keys.iter().map(at).collect();
            let keys: Vec<Key> = unique.iter().map(super::rules::key).collect();
            fill(&mut fresh, snapshot(ctx, &keys).await?);
        }
        Rule::AuditHistory => {
            // A `Query` is not isolated from a transaction (it can read the `CURRENT` a change
            // wrote and not the event it wrote with it), so the partition's items are read in a
            // snapshot, between two queries of its keys: every change adds an event, and a
            // change in between shows as a key the second query finds.
            let before = partition_keys(ctx, &key.pk).await?;
            let keys: Vec<Key> = before.iter().map(super::rules::key).collect();
            let read = snapshot(ctx, &keys).await?;
            if partition_keys(ctx, &key.pk).await? != before {
                return Ok(None);
            }
            fill(&mut fresh, read);
        }
        Rule::LoanIndex | Rule::Expiry | Rule::Undecodable => {
            fill(&mut fresh, snapshot(ctx, std::slice::from_ref(key)).await?);
        }
    }
    Ok(Some(fresh))
}

/// The keys of every lock `entity` must hold: each value's, under the current key and the
/// previous version's, and an account's owner lock.
fn locks_of(table: &Table, entity: &TableEntity) -> Vec<Key> {
    let mut keys: Vec<Key> = claims(entity)
        .into_iter()
        .flat_map(|claim| std::iter::once(claim.lock_key).chain(claim.earlier_key))
        .collect();
    if let TableEntity::Account(row) = entity {
        if let Some(owner_lock) = table.owner_lock_of(row) {
            keys.push(owner_lock.key().into_key());
        }
        // And the owner locks naming it from elsewhere, as the scan found them: one there
        // leaves the account's missing lock to a person.
        for elsewhere in table.owner_locks_naming(row.account.account_id.as_str()) {
            if !keys.contains(&elsewhere) {
                keys.push(elsewhere);
            }
        }
    }
    keys
}

/// A branch's count of a book's available copies and the book's copies there, in one snapshot.
/// The copies are found by a query of the branch first: if the query finds others after the
/// snapshot (a copy added meanwhile: copies are never deleted), the read is overtaken (`None`).
/// A snapshot is one `TransactGetItems` of at most 100 items: the count and more than 99 copies
/// of one book at one branch are read in parts, which a checkout can fall between, and such a
/// count is only as sure as two reads giving the same verdict.
async fn count_and_copies(
    ctx: &Ctx,
    isbn: &Isbn13,
    branch_id: &Id,
) -> Result<Option<Vec<Stored>>, String> {
    let copies = || async {
        let partition = keys::branch(branch_id).pk;
        let copies = partition_items(ctx, &partition, COPY_PREFIX).await?;
        Ok::<_, String>(
            copies
                .into_iter()
                .filter(|s| matches!(&s.entity, Ok(TableEntity::Copy(copy)) if copy.isbn == *isbn))
                .map(|s| at(&s.key))
                .collect::<BTreeSet<At>>(),
        )
    };
    let before = copies().await?;
    let mut keys = vec![keys::book_availability(isbn, branch_id)];
    keys.extend(before.iter().map(super::rules::key));
    let read = snapshot(ctx, &keys).await?;
    if copies().await? != before {
        return Ok(None);
    }
    Ok(Some(read))
}

fn fill(table: &mut Table, items: Vec<Stored>) {
    for stored in items {
        table.insert(stored);
    }
}

/// The items at `keys` (those that exist) read together: a snapshot that no transaction's writes
/// can be half in.
async fn snapshot(ctx: &Ctx, keys: &[Key]) -> Result<Vec<Stored>, String> {
    let items = ctx
        .snapshot(keys)
        .await
        .map_err(|e| format!("cannot read items again: {e:?}"))?;
    Ok(items.into_iter().map(Stored::new).collect())
}

/// Every item of partition `pk` whose sort key starts with `prefix`, strongly consistent.
async fn partition_items(ctx: &Ctx, pk: &str, prefix: &str) -> Result<Vec<Stored>, String> {
    let mut items = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let page = ctx
            .query(Query::table(pk).sort_begins_with(prefix).start_after(start))
            .await
            .map_err(|e| format!("cannot read a partition again: {e:?}"))?;
        items.extend(page.items.into_iter().map(Stored::new));
        start = page.last_key;
        if start.is_none() {
            return Ok(items);
        }
    }
}

/// The keys of every item of partition `pk`, strongly consistent.
async fn partition_keys(ctx: &Ctx, pk: &str) -> Result<BTreeSet<At>, String> {
    Ok(partition_items(ctx, pk, "")
        .await?
        .iter()
        .map(|stored| at(&stored.key))
        .collect())
}
