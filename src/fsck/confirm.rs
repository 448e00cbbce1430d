//! A finding from the scan is a suspicion: the scan reads each item at a different moment, so a
//! transaction committed while it ran can show one half changed and the other not. Before it is
//! reported, every item the finding involves is read again, strongly consistently (the lock and
//! its owner, or the owner and its locks, in one `TransactGetItems`, a snapshot no transaction
//! can split), and the same rule judges the fresh items; this is done twice, and only a finding
//! both reads reproduce is confirmed.
//!
//! A copy `checked_out` with no open loan in the scan is the one finding whose other half can be
//! anywhere (loans live under their patron): its loans are looked for again by a second scan
//! that starts after the first one ended, so a loan committed during the first scan is found.

use super::entity::{LockKind, claims, key_of, lock};
use super::repair::Repair;
use super::rules::{At, Finding, Rule, Stored, Table, at, availability, check, owner_key};
use super::scan::{self, Counter};
use singlet_functions::Ctx;
use singlet_functions::loans::LoanStatus;
use singlet_functions::model::{Decoded, Entity};
use singlet_functions::store::{Item, Query};
use singlet_shared::keys::{self, CHECKOUT_PREFIX, COPY_PREFIX};
use singlet_shared::schema::GSI1;
use singlet_shared::{Id, Isbn13, Key};
use std::collections::{BTreeSet, HashMap};

/// How many findings are confirmed at once.
const AT_ONCE: usize = 16;

/// The findings among `candidates` that fresh reads confirm, with their repairs as of those reads.
pub async fn confirm(
    ctx: &Ctx,
    table: &Table,
    candidates: Vec<Finding>,
    segments: u32,
) -> Result<Vec<Finding>, String> {
    let loans = loans_of_unlent_copies(ctx, table, &candidates, segments).await?;
    let mut confirmed = Vec::new();
    for batch in candidates.chunks(AT_ONCE) {
        let results = futures::future::join_all(
            batch
                .iter()
                .map(|finding| confirm_one(ctx, table, &loans, finding)),
        )
        .await;
        for result in results {
            confirmed.extend(result?);
        }
    }
    Ok(confirmed)
}

async fn confirm_one(
    ctx: &Ctx,
    table: &Table,
    loans: &HashMap<(String, String), Vec<Key>>,
    finding: &Finding,
) -> Result<Option<Finding>, String> {
    let mut last = None;
    for _ in 0..2 {
        let fresh = reread(ctx, table, loans, finding).await?;
        let again = match counted(finding) {
            // A count no transaction wrote has no item to judge: its book's copies are.
            Some((isbn, branch_id)) => availability(&fresh, isbn, branch_id),
            None => check(&fresh, &at(&finding.key))
                .into_iter()
                .find(|f| f.rule == finding.rule && f.about == finding.about),
        };
        match again {
            Some(again) => last = Some(again),
            None => return Ok(None),
        }
    }
    Ok(last)
}

/// The book and branch whose count of available copies `finding` is about, if it is.
fn counted(finding: &Finding) -> Option<(&Isbn13, &Id)> {
    match &finding.repair {
        Some(Repair::SetAvailableCopies {
            isbn, branch_id, ..
        }) => Some((isbn, branch_id)),
        _ => None,
    }
}

/// Every item `finding` involves, read again.
async fn reread(
    ctx: &Ctx,
    table: &Table,
    loans: &HashMap<(String, String), Vec<Key>>,
    finding: &Finding,
) -> Result<Table, String> {
    let mut fresh = Table::new(table.ids.clone());
    let key = &finding.key;
    if let Some((isbn, branch_id)) = counted(finding) {
        fill(&mut fresh, count_and_copies(ctx, isbn, branch_id).await?);
        return Ok(fresh);
    }
    match finding.rule {
        Rule::LockOrphan => {
            let read = snapshot(ctx, std::slice::from_ref(key)).await?;
            if let Some(Ok(Decoded::OwnerLock(lock))) = read.first().map(|s| &s.entity) {
                let keys = [key.clone(), keys::account(&lock.account_id)];
                fill(&mut fresh, snapshot(ctx, &keys).await?);
                return Ok(fresh);
            }
            let Some(lock) = read
                .first()
                .and_then(|s| s.entity.as_ref().ok())
                .and_then(lock)
            else {
                return Ok(fresh);
            };
            let owner = locate(ctx, table, lock.kind, &lock.holder).await?;
            let mut keys = vec![key.clone()];
            if let Some(owner) = &owner {
                fresh.patrons.insert(lock.holder.clone(), owner.clone());
                keys.push(owner.clone());
            }
            fill(&mut fresh, snapshot(ctx, &keys).await?);
        }
        Rule::LockMissing => {
            // The owner as it is now, then its locks, then the owners those locks name, all
            // three in the last snapshot.
            let owner = snapshot(ctx, std::slice::from_ref(key)).await?;
            let Some(Ok(entity)) = owner.first().map(|s| s.entity.clone()) else {
                return Ok(fresh);
            };
            let mut keys = vec![key.clone()];
            keys.extend(
                claims(&entity)
                    .into_iter()
                    .flat_map(|claim| std::iter::once(claim.lock_key).chain(claim.earlier_key)),
            );
            if let Decoded::Account(row) = &entity
                && let Some(owner_lock) = table.owner_lock_of(row)
            {
                keys.push(owner_lock.key());
            }
            let mut holders = Vec::new();
            for stored in snapshot(ctx, &keys).await? {
                if let Ok(Decoded::OwnerLock(held)) = &stored.entity {
                    let other = keys::account(&held.account_id);
                    if other != *key {
                        holders.push(other);
                    }
                } else if let Some(lock) = stored.entity.as_ref().ok().and_then(lock)
                    && let Some(owner) = locate(ctx, table, lock.kind, &lock.holder).await?
                    && owner != *key
                    // One vehicle can hold two of these locks (a plate and a chassis number
                    // registered again in other spellings before `plates-compact`): a
                    // `TransactGetItems` takes each key once.
                    && !holders.contains(&owner)
                {
                    fresh.patrons.insert(lock.holder.clone(), owner.clone());
                    holders.push(owner);
                }
            }
            keys.extend(holders);
            fill(&mut fresh, snapshot(ctx, &keys).await?);
        }
        Rule::ActiveLoans => {
            let patron = snapshot(ctx, std::slice::from_ref(key)).await?;
            let Some(Ok(Decoded::Patron(p))) = patron.first().map(|s| s.entity.clone()) else {
                return Ok(fresh);
            };
            fill(&mut fresh, patron);
            let partition = keys::patron_loans_partition(&p.patron_id);
            fill(
                &mut fresh,
                partition_items(ctx, &partition, CHECKOUT_PREFIX).await?,
            );
        }
        Rule::CopyStatus => {
            let mut keys = vec![key.clone()];
            if let Some(Ok(Decoded::Copy(copy))) = table.entity(key) {
                let (branch, copy) = (copy.branch_id.to_string(), copy.copy_id.to_string());
                keys.extend(
                    table
                        .open_loans_of_copy(&branch, &copy)
                        .into_iter()
                        .map(|loan| loan.active_key()),
                );
                keys.extend(loans.get(&(branch, copy)).into_iter().flatten().cloned());
            }
            let unique: BTreeSet<At> = keys.iter().map(at).collect();
            let keys: Vec<Key> = unique.iter().map(super::rules::key).collect();
            fill(&mut fresh, snapshot(ctx, &keys).await?);
        }
        Rule::AuditHistory => {
            fill(&mut fresh, partition_items(ctx, &key.pk, "").await?);
        }
        Rule::LoanIndex | Rule::Expiry | Rule::Undecodable => {
            fill(&mut fresh, snapshot(ctx, std::slice::from_ref(key)).await?);
        }
    }
    Ok(fresh)
}

/// A branch's count of a book's available copies and the book's copies there, in one snapshot.
/// The copies are found by a query of the branch first: if the query finds others after the
/// snapshot (a copy added meanwhile), nothing is returned, and the finding is not confirmed.
async fn count_and_copies(ctx: &Ctx, isbn: &Isbn13, branch_id: &Id) -> Result<Vec<Stored>, String> {
    let copies = || async {
        let partition = keys::branch(branch_id).pk;
        let copies = partition_items(ctx, &partition, COPY_PREFIX).await?;
        Ok::<_, String>(
            copies
                .into_iter()
                .filter(|s| matches!(&s.entity, Ok(Decoded::Copy(copy)) if copy.isbn == *isbn))
                .map(|s| at(&s.key))
                .collect::<BTreeSet<At>>(),
        )
    };
    let before = copies().await?;
    let mut keys = vec![keys::book_availability(isbn, branch_id)];
    keys.extend(before.iter().map(super::rules::key));
    let read = snapshot(ctx, &keys).await?;
    if copies().await? != before {
        return Ok(Vec::new());
    }
    Ok(read)
}

fn fill(table: &mut Table, items: Vec<Stored>) {
    for stored in items {
        table.insert(stored);
    }
}

/// Where the owner a lock names lives: for a card, the patron the scan saw, else the one the
/// patron-by-id index knows now (a patron registered after the scan read its branch).
async fn locate(
    ctx: &Ctx,
    table: &Table,
    kind: LockKind,
    holder: &str,
) -> Result<Option<Key>, String> {
    if let Some(owner) = owner_key(kind, holder, &table.patrons) {
        return Ok(Some(owner));
    }
    let Ok(patron_id) = singlet_shared::Id::parse(holder) else {
        return Ok(None);
    };
    if kind != LockKind::Card {
        return Ok(None);
    }
    let index = keys::patron_by_id(&patron_id);
    let page = ctx
        .query(Query::index(GSI1, index.pk).sort_equals(index.sk))
        .await
        .map_err(|e| format!("cannot look a patron up: {e:?}"))?;
    Ok(page.items.first().map(key_of))
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

/// The open loans of each copy that the scan saw `checked_out` with none: found by a second
/// scan of the table for its loans, run only when there is such a copy.
async fn loans_of_unlent_copies(
    ctx: &Ctx,
    table: &Table,
    candidates: &[Finding],
    segments: u32,
) -> Result<HashMap<(String, String), Vec<Key>>, String> {
    let wanted: BTreeSet<(String, String)> = candidates
        .iter()
        .filter(|f| f.rule == Rule::CopyStatus)
        .filter_map(|f| match table.entity(&f.key) {
            Some(Ok(Decoded::Copy(copy))) => {
                Some((copy.branch_id.to_string(), copy.copy_id.to_string()))
            }
            _ => None,
        })
        .filter(|(branch, copy)| table.open_loans_of_copy(branch, copy).is_empty())
        .collect();
    let mut found: HashMap<(String, String), Vec<Key>> = HashMap::new();
    if wanted.is_empty() {
        return Ok(found);
    }
    // Only loans are kept; the scan reads every item (the store takes no filter expression).
    let loans = scan::scan(ctx, segments, &Counter::default(), |item| {
        let loan = key_of(&item).sk.starts_with(CHECKOUT_PREFIX);
        loan.then(|| Stored::new(item))
    })
    .await?;
    for stored in loans.into_iter().flatten() {
        if let Ok(Decoded::Loan(loan)) = &stored.entity
            && loan.status != LoanStatus::Returned
        {
            let copy = (loan.branch_id.to_string(), loan.copy_id.to_string());
            if wanted.contains(&copy) {
                found.entry(copy).or_default().push(loan.active_key());
            }
        }
    }
    Ok(found)
}
