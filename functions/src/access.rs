//! What each function may touch: the actions it calls on the table, each with the entities whose
//! items it calls them on, the indexes it queries, the events it records and anything beyond the
//! table. Each function of the route table ([`crate::routes`]) declares one [`Access`];
//! `cargo run -- render` turns it into the function's least-privilege policy in `template.yaml`
//! (`src/render.rs`), so a policy is never written by hand and a new route gets its own.
//!
//! A table statement is bounded by `dynamodb:LeadingKeys`: each action only on the partition-key
//! prefixes of the entities it is declared on ([`crate::model::EntityType::keys`]), `GetItem` and
//! `PutItem` on the function's own idempotency records when its route takes an
//! `Idempotency-Key`, `PutItem` on the outbox partitions of the events it records and on the
//! records it makes tombstones, and, for a route that deletes an entity, `Query` and `DeleteItem`
//! on that entity's outbox partition ([`Access::table_statements`]). The local runner applies the same
//! statements to every call a function makes (`src/serve/iam.rs`).

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

/// Some table actions and the entities whose items they reach: `table [GetItem, UpdateItem] on
/// [Vehicle]` in the route table.
#[derive(Debug, Clone, Copy)]
pub struct Reach {
    /// The actions it calls on them.
    pub actions: &'static [Action],
    /// The entities whose items it calls them on (their partition-key prefixes bound them).
    pub entities: &'static [&'static EntityType],
}

/// What one function touches.
#[derive(Debug, Clone, Copy)]
pub struct Access {
    /// The actions it calls on the table's items, each with the entities it calls them on.
    pub table: &'static [Reach],
    /// The indexes it queries (one partition of each, `dynamodb:Query` only).
    pub indexes: &'static [Index],
    /// The events its changes record, each in its subject's outbox partition.
    pub events: &'static [EventType],
    /// The route whose idempotency records it makes tombstones when it deletes what that route
    /// created (`PutItem` on them, nothing else); the deleted entity's outbox items go with it
    /// (`Query` and `DeleteItem` on its events' outbox partitions).
    pub tombstones: Option<&'static str>,
    /// Statements beyond the table.
    pub grants: &'static [Grant],
}

/// One table statement of a function's policy: the actions it may call on items under some
/// partition-key prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStatement {
    pub actions: Vec<Action>,
    /// The partition-key prefixes (`VEHICLE#`), in the order first declared.
    pub prefixes: Vec<String>,
    /// What lives under them, as a reader of the policy would name it (`vehicle`, `its
    /// idempotency records`).
    pub holds: Vec<String>,
}

impl Access {
    /// Nothing at all: the start of every declaration.
    pub const NONE: Access = Access {
        table: &[],
        indexes: &[],
        events: &[],
        tombstones: None,
        grants: &[],
    };

    /// Every entity it declares, each once, in the order declared.
    pub fn entities(&self) -> Vec<&'static EntityType> {
        let mut entities: Vec<&'static EntityType> = Vec::new();
        for entity in self.table.iter().flat_map(|reach| reach.entities) {
            if !entities.iter().any(|e| std::ptr::eq(*e, *entity)) {
                entities.push(entity);
            }
        }
        entities
    }

    /// Its table statements: each partition-key prefix it reaches with the actions it calls
    /// there (its entities', `GetItem` and `PutItem` on its own idempotency records when
    /// `idempotent`, `PutItem` on its events' outboxes and on the records it makes tombstones,
    /// with `Query` and `DeleteItem` on the outboxes for the entity it deletes),
    /// and the prefixes that share one set of actions gathered into one statement. IAM bounds a
    /// table statement by partition key alone (`dynamodb:LeadingKeys`), so two entities that
    /// share a partition (a branch and its patrons) share what is allowed there.
    pub fn table_statements(&self, function: &str, idempotent: bool) -> Vec<TableStatement> {
        // Each prefix with its actions and what lives there, in the order first declared.
        let mut prefixes: Vec<(String, Vec<Action>, Vec<String>)> = Vec::new();
        let mut add = |prefix: String, actions: &[Action], what: String| {
            let at = match prefixes.iter().position(|(p, _, _)| *p == prefix) {
                Some(at) => at,
                None => {
                    prefixes.push((prefix, Vec::new(), Vec::new()));
                    prefixes.len() - 1
                }
            };
            let (_, known, names) = &mut prefixes[at];
            known.extend_from_slice(actions);
            known.sort_unstable();
            known.dedup();
            if !names.contains(&what) {
                names.push(what);
            }
        };
        for reach in self.table {
            for entity in reach.entities {
                for shape in entity.keys {
                    add(
                        shape.partition.to_owned(),
                        reach.actions,
                        entity.name.to_owned(),
                    );
                }
            }
        }
        if idempotent {
            add(
                idempotency_records(function),
                &[Action::GetItem, Action::PutItem],
                "its idempotency records".to_owned(),
            );
        }
        for event in self.events {
            add(
                format!("{OUTBOX_PREFIX}{}#", event.subject_type()),
                &[Action::PutItem],
                "its events' outbox".to_owned(),
            );
        }
        if let Some(creator) = self.tombstones {
            add(
                idempotency_records(creator),
                &[Action::PutItem],
                format!(
                    "{creator}'s idempotency records, made tombstones with the entity's delete"
                ),
            );
            // The deleted entity's outbox items, read and deleted with it
            // (`recording::forgetting`).
            for event in self.events {
                add(
                    format!("{OUTBOX_PREFIX}{}#", event.subject_type()),
                    &[Action::Query, Action::DeleteItem],
                    "its events' outbox".to_owned(),
                );
            }
        }
        let mut statements: Vec<TableStatement> = Vec::new();
        for (prefix, actions, what) in prefixes {
            match statements.iter_mut().find(|s| s.actions == actions) {
                Some(statement) => {
                    statement.prefixes.push(prefix);
                    for name in what {
                        if !statement.holds.contains(&name) {
                            statement.holds.push(name);
                        }
                    }
                }
                None => statements.push(TableStatement {
                    actions,
                    prefixes: vec![prefix],
                    holds: what,
                }),
            }
        }
        statements
    }

    /// Every IAM action its declaration names, each once: the table's, `PutItem` for its events
    /// and tombstones, `Query` and `DeleteItem` for a deleted entity's outbox, `Query` for its
    /// indexes, the grants'. (An idempotent route's `GetItem` on
    /// its own records is the route's, not the declaration's: [`Access::table_statements`] adds
    /// it.)
    pub fn iam_actions(&self) -> Vec<&'static str> {
        let mut actions: Vec<&'static str> = self
            .table
            .iter()
            .flat_map(|reach| reach.actions)
            .map(|a| a.iam())
            .collect();
        if !self.indexes.is_empty() {
            actions.push(Action::Query.iam());
        }
        if self.tombstones.is_some() || !self.events.is_empty() {
            actions.push(Action::PutItem.iam());
        }
        if self.tombstones.is_some() && !self.events.is_empty() {
            actions.extend([Action::Query.iam(), Action::DeleteItem.iam()]);
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
