//! The migrations: how items written under an earlier design become items of the current one,
//! registered here next to the entities they change, and run by `cargo run -- migrate <name>`
//! (the runner's `migrate` module: parallel scan, checkpoints, throttle).
//!
//! Each migration is a pure function from one item, as it is stored, to a [`Plan`]: nothing to do,
//! the conditioned writes that take it to the next version, or a conflict for an operator. Every
//! write is conditioned (on `_v`, on the attributes it adds being absent, on a lock's holder), so
//! a rerun, a second runner and a concurrent API write are all harmless: whoever writes first
//! wins and the other's condition fails, writing nothing.
//!
//! A migration that makes values unique under a new rule cannot see a collision in one item: it
//! names what each item claims ([`Migration::claims`]), the runner reads them all first (a
//! [`Survey`]), and the plan of an item that shares a claim with another is a conflict.

pub mod plates_compact;
pub mod returned_loans_expire;
pub mod stamp_entity_types;
pub mod vehicles_by_depot;

use crate::store::Item;
use crate::store::migration::Change;
use std::collections::HashMap;

/// What one item needs.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Not this migration's item, or already migrated.
    Skip,
    /// These writes, applied together.
    Change(Change),
    /// The item cannot be migrated without an operator's choice: reported, left as it is.
    Conflict(String),
}

pub struct Migration {
    /// The name `migrate <name>` takes.
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    /// The migration that must be complete first: this one takes items from the version that
    /// one writes.
    pub after: Option<&'static str>,
    /// The unique values an item claims under the new rule, if the migration has one.
    pub claims: Option<fn(&Item) -> Vec<String>>,
    pub plan: fn(&Item, &Survey, &Settings) -> Plan,
}

/// What the runner was started with that a plan may need: the deployment's settings, as the
/// API's own writes read them.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `LoanHistoryDays` (`--loan-history-days`): how long a returned loan is kept.
    pub loan_history_days: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            loan_history_days: crate::context::DEFAULT_LOAN_HISTORY_DAYS,
        }
    }
}

/// The claims of the whole table that more than one item makes, each with the keys (`PK`) of
/// the items making it.
#[derive(Debug, Clone, Default)]
pub struct Survey {
    shared: HashMap<String, Vec<String>>,
}

impl Survey {
    /// From every item's key and claims.
    pub fn new(claims: impl IntoIterator<Item = (String, Vec<String>)>) -> Self {
        let mut by_claim: HashMap<String, Vec<String>> = HashMap::new();
        for (pk, claims) in claims {
            for claim in claims {
                let holders = by_claim.entry(claim).or_default();
                if !holders.contains(&pk) {
                    holders.push(pk.clone());
                }
            }
        }
        by_claim.retain(|_, holders| holders.len() > 1);
        for holders in by_claim.values_mut() {
            holders.sort();
        }
        Self { shared: by_claim }
    }

    /// The other items that make `claim`, besides the item `pk`.
    pub fn others(&self, claim: &str, pk: &str) -> Vec<&str> {
        self.shared
            .get(claim)
            .into_iter()
            .flatten()
            .filter(|holder| *holder != pk)
            .map(String::as_str)
            .collect()
    }

    /// How many claims are made more than once.
    pub fn collisions(&self) -> usize {
        self.shared.len()
    }
}

/// Every migration, in the order they were written.
pub static MIGRATIONS: &[Migration] = &[
    vehicles_by_depot::MIGRATION,
    plates_compact::MIGRATION,
    stamp_entity_types::MIGRATION,
    returned_loans_expire::MIGRATION,
];

pub fn by_name(name: &str) -> Option<&'static Migration> {
    MIGRATIONS.iter().find(|migration| migration.name == name)
}
