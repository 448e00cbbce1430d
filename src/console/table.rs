//! The table as the console shows it: every item (a Scan: the local table is small), named by
//! the entity the model's registry reads it as, grouped by partition, and compared by `(PK, SK)` with the table
//! before a request, so that what the request added, changed or removed stands out.

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use serde_json::{Map, Value, json};
use singlet_functions::Ctx;
use singlet_functions::events::EventType;
use singlet_functions::model::{TableEntity, decode};
use singlet_functions::routes::{Route, by_function};
use singlet_shared::schema::{INDEXES, PK, SK};
use std::collections::{BTreeMap, BTreeSet};

pub use singlet_functions::model::Item;

/// The table at one moment, by `(PK, SK)`.
pub type Snapshot = BTreeMap<(String, String), Item>;

/// Every item, read with a paged, strongly consistent Scan.
pub async fn scan(ctx: &Ctx) -> Result<Snapshot, String> {
    let mut snapshot = Snapshot::new();
    let mut start = None;
    loop {
        let (items, next) =
            singlet_functions::store::bulk::scan_page(&ctx.db, &ctx.table, 0, 1, start).await?;
        for item in items {
            snapshot.insert((string(&item, PK), string(&item, SK)), item);
        }
        start = next;
        if start.is_none() {
            return Ok(snapshot);
        }
    }
}

pub fn string(item: &Item, name: &str) -> String {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default()
}

/// The four single-table designs, as the console's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Domain {
    Fleet,
    Accounts,
    Library,
    Audit,
}

impl Domain {
    pub const ALL: [Domain; 4] = [
        Domain::Fleet,
        Domain::Accounts,
        Domain::Library,
        Domain::Audit,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Domain::Fleet => "Fleet registry",
            Domain::Accounts => "Accounts",
            Domain::Library => "Library",
            Domain::Audit => "Change log",
        }
    }

    /// The page's name for the domain: `fleet`, as its scopes begin (`fleet:read`).
    pub fn id(self) -> &'static str {
        match self {
            Domain::Fleet => "fleet",
            Domain::Accounts => "accounts",
            Domain::Library => "library",
            Domain::Audit => "audit",
        }
    }

    /// The domain of a route: the one its scopes belong to.
    pub fn of_route(route: &Route) -> Option<Domain> {
        let area = route.scopes.first()?.split(':').next()?;
        Domain::ALL.into_iter().find(|domain| domain.id() == area)
    }

    /// The domain of an event's `source` (`singlet.fleet`): loans' events are the library's.
    fn of_source(source: &str) -> Domain {
        [
            (EventType::VehicleRegistered, Domain::Fleet),
            (EventType::AccountCreated, Domain::Accounts),
            (EventType::ResourceCreated, Domain::Audit),
        ]
        .into_iter()
        .find(|(event, _)| event.source() == source)
        .map_or(Domain::Library, |(_, domain)| domain)
    }

    /// The domain of a route, by its function's name.
    fn of_function(function: &str) -> Option<Domain> {
        by_function(function).and_then(Domain::of_route)
    }

    /// The domain an entity belongs to, as its type declares it (`EntityType::domain`); for an
    /// item its writer's domain is, the domain of the route or event it names; `None` for the
    /// runner's own bookkeeping (a migration's checkpoint).
    pub fn of(entity: &TableEntity) -> Option<Domain> {
        use singlet_functions::model::Domain as Declared;
        match entity.entity_type().domain {
            Declared::Fleet => Some(Domain::Fleet),
            Declared::Accounts => Some(Domain::Accounts),
            Declared::Library => Some(Domain::Library),
            Declared::Audit => Some(Domain::Audit),
            Declared::Runner => None,
            Declared::OfWriter => match entity {
                TableEntity::IdempotencyRecord(record) => {
                    record.route().and_then(Domain::of_function)
                }
                TableEntity::IdLock(lock) => Domain::of_function(&lock.route),
                TableEntity::Outbox(event) => Some(Domain::of_source(&event.source)),
                // A type declared so names its writer: it is listed above.
                _ => None,
            },
        }
    }
}

/// The entity an item is, as the model's registry reads it, and the domain it belongs to. An
/// item the registry cannot read is `Unknown`.
pub fn entity(item: &Item) -> (&'static str, Option<Domain>) {
    match decode(item) {
        Ok(decoded) => (decoded.display_name(), Domain::of(&decoded)),
        Err(_) => ("Unknown", None),
    }
}

/// An attribute value as plain JSON: numbers as numbers, sets and lists as arrays.
pub fn plain(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => s.clone().into(),
        AttributeValue::N(n) => number(n),
        AttributeValue::Bool(b) => (*b).into(),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::M(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), plain(v)))
            .collect::<Map<_, _>>()
            .into(),
        AttributeValue::L(l) => l.iter().map(plain).collect(),
        AttributeValue::Ss(s) => s.clone().into(),
        AttributeValue::Ns(ns) => ns.iter().map(|n| number(n)).collect(),
        AttributeValue::B(b) => format!("<{} bytes>", b.as_ref().len()).into(),
        AttributeValue::Bs(bs) => format!("<{} binaries>", bs.len()).into(),
        _ => Value::Null,
    }
}

/// A value of DynamoDB's wire JSON (`{"S": "x"}`, `{"N": "1"}`, ...) as plain JSON.
pub fn plain_wire(value: &Value) -> Value {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return value.clone();
    };
    match (kind.as_str(), inner) {
        ("S", v) => v.clone(),
        ("N", Value::String(n)) => number(n),
        ("BOOL", v) => v.clone(),
        ("NULL", _) => Value::Null,
        ("M", Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), plain_wire(v)))
            .collect::<Map<_, _>>()
            .into(),
        ("L", Value::Array(l)) => l.iter().map(plain_wire).collect(),
        ("SS", v) => v.clone(),
        ("NS", Value::Array(ns)) => ns
            .iter()
            .map(|n| number(n.as_str().unwrap_or_default()))
            .collect(),
        _ => value.clone(),
    }
}

fn number(raw: &str) -> Value {
    raw.parse::<i64>()
        .map(Value::from)
        .or_else(|_| raw.parse::<f64>().map(Value::from))
        .unwrap_or_else(|_| raw.into())
}

/// What a request did to one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Added,
    Changed,
    Removed,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntry {
    pub index: &'static str,
    pub pk: String,
    pub sk: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemView {
    pub pk: String,
    pub sk: String,
    pub entity: &'static str,
    /// The index entries the item has, only those present (the indexes are sparse).
    pub indexes: Vec<IndexEntry>,
    /// Every other attribute, as plain JSON.
    pub attributes: Map<String, Value>,
    pub change: Option<Change>,
    /// For a changed item: the attributes whose value changed, appeared or went.
    pub changed: Vec<String>,
    /// For a changed item: the index entries it left.
    pub left_indexes: Vec<IndexEntry>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Partition {
    pub pk: String,
    pub domain: Option<Domain>,
    /// Whether any item of it was added, changed or removed.
    pub touched: bool,
    pub items: Vec<ItemView>,
}

fn index_entries(item: &Item) -> Vec<IndexEntry> {
    INDEXES
        .iter()
        .filter_map(|index| {
            let pk = item.get(index.pk)?.as_s().ok()?.clone();
            Some(IndexEntry {
                index: index.name,
                pk,
                sk: string(item, index.sk),
            })
        })
        .collect()
}

fn is_key_attribute(name: &str) -> bool {
    name == PK || name == SK || INDEXES.iter().any(|i| i.pk == name || i.sk == name)
}

/// One item as the console shows it, marked with no change.
pub fn item_view(item: &Item) -> ItemView {
    view(&string(item, PK), &string(item, SK), item, None)
}

/// The domain events (outbox items) `after` holds and `before` did not: what an action emitted,
/// each as `PutEvents` will publish it.
pub fn emitted(after: &Snapshot, before: &Snapshot) -> Vec<Value> {
    after
        .iter()
        .filter(|(key, _)| !before.contains_key(*key))
        .filter_map(|(key, item)| match decode(item) {
            Ok(TableEntity::Outbox(event)) => Some(json!({
                "pk": key.0,
                "sk": key.1,
                "source": event.source,
                "detailType": event.detail_type,
                "detail": serde_json::from_str::<Value>(&event.detail).unwrap_or(Value::String(event.detail)),
            })),
            _ => None,
        })
        .collect()
}

fn view(pk: &str, sk: &str, item: &Item, change: Option<Change>) -> ItemView {
    let mut attributes: Vec<(&String, &AttributeValue)> = item
        .iter()
        .filter(|(name, _)| !is_key_attribute(name))
        .collect();
    attributes.sort_by(|a, b| a.0.cmp(b.0));
    ItemView {
        pk: pk.to_owned(),
        sk: sk.to_owned(),
        entity: entity(item).0,
        indexes: index_entries(item),
        attributes: attributes
            .into_iter()
            .map(|(k, v)| (k.clone(), plain(v)))
            .collect(),
        change,
        changed: Vec::new(),
        left_indexes: Vec::new(),
    }
}

/// The table after a request, grouped by partition, each item marked with what the request did
/// to it (`before` is the table before it; `None` marks nothing). Removed items stay in the view,
/// marked removed. Touched partitions come first.
pub fn partitions(after: &Snapshot, before: Option<&Snapshot>) -> Vec<Partition> {
    let mut groups: BTreeMap<String, Vec<ItemView>> = BTreeMap::new();
    for ((pk, sk), item) in after {
        let mut shown = view(pk, sk, item, None);
        if let Some(before) = before {
            match before.get(&(pk.clone(), sk.clone())) {
                None => shown.change = Some(Change::Added),
                Some(old) if old != item => {
                    shown.change = Some(Change::Changed);
                    let names: BTreeSet<&String> = old.keys().chain(item.keys()).collect();
                    shown.changed = names
                        .into_iter()
                        .filter(|n| old.get(*n) != item.get(*n))
                        .cloned()
                        .collect();
                    let now: BTreeSet<&str> = shown.indexes.iter().map(|e| e.index).collect();
                    shown.left_indexes = index_entries(old)
                        .into_iter()
                        .filter(|e| !now.contains(e.index))
                        .collect();
                }
                Some(_) => {}
            }
        }
        groups.entry(pk.clone()).or_default().push(shown);
    }
    if let Some(before) = before {
        for ((pk, sk), item) in before {
            if !after.contains_key(&(pk.clone(), sk.clone())) {
                let items = groups.entry(pk.clone()).or_default();
                items.push(view(pk, sk, item, Some(Change::Removed)));
                items.sort_by(|a, b| a.sk.cmp(&b.sk));
            }
        }
    }
    let mut partitions: Vec<Partition> = groups
        .into_iter()
        .map(|(pk, items)| {
            let first = &items[0];
            let domain = match (before, after.get(&(pk.clone(), first.sk.clone()))) {
                (_, Some(item)) => entity(item).1,
                (Some(before), None) => before
                    .get(&(pk.clone(), first.sk.clone()))
                    .and_then(|item| entity(item).1),
                (None, None) => None,
            };
            Partition {
                touched: items.iter().any(|i| i.change.is_some()),
                domain,
                pk,
                items,
            }
        })
        .collect();
    // Stable: touched partitions first, each group in key order.
    partitions.sort_by_key(|p| !p.touched);
    partitions
}

/// Counts of what changed, for a one-line summary.
pub fn summary(partitions: &[Partition]) -> Value {
    let count = |change| {
        partitions
            .iter()
            .flat_map(|p| &p.items)
            .filter(|i| i.change == Some(change))
            .count()
    };
    json!({
        "items": partitions.iter().flat_map(|p| &p.items).filter(|i| i.change != Some(Change::Removed)).count(),
        "added": count(Change::Added),
        "changed": count(Change::Changed),
        "removed": count(Change::Removed),
    })
}
