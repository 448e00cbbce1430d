//! What each function may touch: the actions it calls on the table, the entities whose items
//! those actions reach, the indexes it queries, the events it records and anything beyond the
//! table. Each function of the route table ([`crate::routes`]) declares one [`Access`];
//! `cargo run -- render` turns it into the function's least-privilege policy in `template.yaml`
//! (`src/render.rs`), so a policy is never written by hand and a new route gets its own.
//!
//! A table statement is bounded by `dynamodb:LeadingKeys`: the partition-key prefixes of the
//! entities declared ([`crate::model::EntityType::keys`]), the function's own idempotency records
//! when its route takes an `Idempotency-Key`, and the outbox partitions of the events it records.

use crate::events::EventType;
use crate::model::Entity;
use crate::model::EntityType;
use crate::model::idempotency::IdempotencyRecord;
use crate::model::outbox::OutboxItem;
use singlet_shared::keys::{IDEMPOTENCY_PREFIX, OUTBOX_PREFIX};
use singlet_shared::schema::Index;

/// A DynamoDB action on the table's items. There is no `Scan`: it carries no key for
/// `LeadingKeys` to bound, so no function is allowed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    GetItem,
    PutItem,
    UpdateItem,
    DeleteItem,
    /// A condition on another item of a transaction (`TransactWriteItems`).
    ConditionCheckItem,
    /// A Query on one of the table's own partitions (an index query is declared by its index).
    Query,
}

impl Action {
    /// The IAM action: `dynamodb:GetItem`.
    pub fn iam(self) -> &'static str {
        match self {
            Action::GetItem => "dynamodb:GetItem",
            Action::PutItem => "dynamodb:PutItem",
            Action::UpdateItem => "dynamodb:UpdateItem",
            Action::DeleteItem => "dynamodb:DeleteItem",
            Action::ConditionCheckItem => "dynamodb:ConditionCheckItem",
            Action::Query => "dynamodb:Query",
        }
    }
}

/// A statement beyond the table: its IAM actions on one resource, as the template writes the
/// resource (`!Sub "arn:…"`, `!GetAtt Bucket.Arn`). The template's own resources and
/// parameters are named there, so the resource is the template's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Why the function needs it, written above the statement.
    pub why: &'static str,
    pub actions: &'static [&'static str],
    pub resource: &'static str,
}

/// What one function touches.
#[derive(Debug, Clone, Copy)]
pub struct Access {
    /// The actions it calls on the table's items.
    pub actions: &'static [Action],
    /// The entities whose items those actions reach (their partition-key prefixes bound them).
    pub entities: &'static [&'static EntityType],
    /// The indexes it queries (one partition of each, `dynamodb:Query` only).
    pub indexes: &'static [Index],
    /// The events its changes record, each in its subject's outbox partition.
    pub events: &'static [EventType],
    /// The route whose idempotency records it makes tombstones when it deletes what that route
    /// created (`PutItem` on them, nothing else).
    pub tombstones: Option<&'static str>,
    /// Statements beyond the table.
    pub grants: &'static [Grant],
}

impl Access {
    /// Nothing at all: the start of every declaration.
    pub const NONE: Access = Access {
        actions: &[],
        entities: &[],
        indexes: &[],
        events: &[],
        tombstones: None,
        grants: &[],
    };

    /// The partition-key prefixes its table actions may reach, each once, in the order
    /// declared: the entities', then `IDEMPOTENCY#<function>#` if `idempotent`, then the
    /// outboxes of its events.
    pub fn leading_keys(&self, function: &str, idempotent: bool) -> Vec<String> {
        let mut prefixes: Vec<String> = Vec::new();
        let mut add = |prefix: String| {
            if !prefixes.contains(&prefix) {
                prefixes.push(prefix);
            }
        };
        for entity in self.entities {
            for shape in entity.keys {
                add(shape.partition.to_owned());
            }
        }
        if idempotent {
            add(idempotency_records(function));
        }
        for event in self.events {
            add(format!("{OUTBOX_PREFIX}{}#", event.subject_type()));
        }
        prefixes
    }

    /// Every IAM action it is allowed, each once: the table's, `Query` for its indexes, the
    /// grants'.
    pub fn iam_actions(&self) -> Vec<&'static str> {
        let mut actions: Vec<&'static str> = self.actions.iter().map(|a| a.iam()).collect();
        if !self.indexes.is_empty() {
            actions.push(Action::Query.iam());
        }
        if self.tombstones.is_some() {
            actions.push(Action::PutItem.iam());
        }
        actions.extend(self.grants.iter().flat_map(|g| g.actions.iter().copied()));
        actions.sort_unstable();
        actions.dedup();
        actions
    }
}

/// The partition-key prefix of `function`'s idempotency records: `IDEMPOTENCY#<function>#`.
pub fn idempotency_records(function: &str) -> String {
    format!("{IDEMPOTENCY_PREFIX}{function}#")
}

/// The entities a declaration never names: their partitions are narrowed by what it declares
/// otherwise (idempotency records by its route, outbox items by its events).
pub const NARROWED: [&EntityType; 2] = [IdempotencyRecord::TYPE, OutboxItem::TYPE];
