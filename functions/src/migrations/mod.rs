//! The migrations: how items written under an earlier design become items of the current one,
//! registered here next to the entities they change, and run by `cargo run -- migrate <name>`
//! (the runner's `migrate` module: parallel scan, checkpoints, throttle).
//!
//! Each migration is a pure function from one item, as it is stored, to a [`Plan`]: nothing to do,
//! the conditioned writes that take it to the next version, or a conflict for an operator. Every
//! write is conditioned (on `_v`, on the attributes it adds being absent, on a lock's holder), so
//! a rerun, a second runner and a concurrent API write are all harmless: whoever writes first
//! wins and the other's condition fails, writing nothing.

pub mod vehicles_by_depot;

use crate::store::Item;
use crate::store::migration::Write;

/// What one item needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Not this migration's item, or already migrated.
    Skip,
    /// These writes, applied together.
    Change(Vec<Write>),
    /// The item cannot be migrated without an operator's choice: reported, left as it is.
    Conflict(String),
}

pub struct Migration {
    /// The name `migrate <name>` takes.
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
    pub plan: fn(&Item) -> Plan,
}

/// Every migration, in the order they were written.
pub static MIGRATIONS: &[Migration] = &[vehicles_by_depot::MIGRATION];

pub fn by_name(name: &str) -> Option<&'static Migration> {
    MIGRATIONS.iter().find(|migration| migration.name == name)
}
