//! What the limiter needs of a table: its key attributes, and each global secondary index's
//! keys and projection, read from the engine's own metadata (so an index added by
//! `add_missing_indexes` is seen once the cache is dropped on `UpdateTable`).

use dynoxide::Database;
use dynoxide::types::{GlobalSecondaryIndex, KeySchemaElement, KeyType, ProjectionType};
use serde_json::{Map, Value};

#[derive(Debug, Clone)]
pub struct Keys {
    pub hash: String,
    pub range: Option<String>,
}

impl Keys {
    fn from(schema: &[KeySchemaElement]) -> Option<Keys> {
        let named = |kind: KeyType| {
            schema
                .iter()
                .find(|k| k.key_type == kind)
                .map(|k| k.attribute_name.clone())
        };
        Some(Keys {
            hash: named(KeyType::HASH)?,
            range: named(KeyType::RANGE),
        })
    }

    /// Whether `item` has every one of these key attributes (an index holds only such items).
    pub fn all_in(&self, item: &Map<String, Value>) -> bool {
        item.contains_key(&self.hash) && self.range.as_ref().is_none_or(|r| item.contains_key(r))
    }
}

#[derive(Debug, Clone)]
pub enum Projected {
    All,
    KeysOnly,
    Include(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct Index {
    pub name: String,
    pub keys: Keys,
    pub projected: Projected,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub keys: Keys,
    pub indexes: Vec<Index>,
}

impl Table {
    /// `name`'s schema in `db`, or `None` when there is no such table (the engine answers it).
    pub fn read(db: &Database, name: &str) -> Option<Table> {
        let meta = db.get_table_metadata(name).ok()??;
        let key_schema: Vec<KeySchemaElement> = serde_json::from_str(&meta.key_schema).ok()?;
        let gsis: Vec<GlobalSecondaryIndex> = meta
            .gsi_definitions
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let indexes = gsis
            .into_iter()
            .filter_map(|gsi| {
                Some(Index {
                    keys: Keys::from(&gsi.key_schema)?,
                    projected: match gsi.projection.projection_type.unwrap_or_default() {
                        ProjectionType::ALL => Projected::All,
                        ProjectionType::KEYS_ONLY => Projected::KeysOnly,
                        ProjectionType::INCLUDE => Projected::Include(
                            gsi.projection.non_key_attributes.unwrap_or_default(),
                        ),
                    },
                    name: gsi.index_name,
                })
            })
            .collect();
        Some(Table {
            keys: Keys::from(&key_schema)?,
            indexes,
        })
    }

    pub fn index(&self, name: &str) -> Option<&Index> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// The size of `item`'s entry in `index`: its projected attributes, the table's and the
    /// index's keys always among them.
    pub fn entry_size(&self, index: &Index, item: &Map<String, Value>) -> u64 {
        let kept = |name: &str| match &index.projected {
            Projected::All => true,
            projected => {
                let key = |keys: &Keys| keys.hash == name || keys.range.as_deref() == Some(name);
                key(&self.keys)
                    || key(&index.keys)
                    || matches!(projected, Projected::Include(names) if names.iter().any(|n| n == name))
            }
        };
        item.iter()
            .filter(|(name, _)| kept(name))
            .map(|(name, value)| name.len() as u64 + super::units::value_size(value))
            .sum()
    }
}

/// A partition key value as text: a string as it is, a number as written, a binary as its base64.
pub fn key_text(value: &Value) -> Option<String> {
    let (_, inner) = value.as_object()?.iter().next()?;
    inner.as_str().map(str::to_owned)
}

/// The family of a partition key value: its leading upper-case segments, each with its `#`
/// (`PLATE#`, `UNIQ#EMAIL#`), or the whole value when it has none (`OVERDUE`).
pub fn family(pk: &str) -> &str {
    let mut end = 0;
    let mut rest = pk;
    while let Some(at) = rest.find('#') {
        let segment = &rest[..at];
        if segment.is_empty() || !segment.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
            break;
        }
        end += at + 1;
        rest = &rest[at + 1..];
    }
    if end == 0 { pk } else { &pk[..end] }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_family_is_the_keys_leading_upper_case_segments() {
        for (pk, family) in [
            ("PLATE#ka19xtr", "PLATE#"),
            ("UNIQ#EMAIL#ada@example.com", "UNIQ#EMAIL#"),
            ("OVERDUE", "OVERDUE"),
            ("OPEN#03", "OPEN#"),
            ("BRANCH#b1", "BRANCH#"),
        ] {
            assert_eq!(super::family(pk), family, "{pk}");
        }
    }
}
