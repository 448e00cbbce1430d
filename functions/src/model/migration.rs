//! A migration run's bookkeeping: where each segment of its parallel `Scan` stopped
//! (`MIGRATION#<name>` / `SEGMENT#<segment>`), so a killed run resumes there. Written only by the
//! `migrate` runner, read back by it and by the registry like every other item.

use super::{
    Domain, Entity, EntityType, Expiry, Item, KeyOf, KeyShape, SortShape, from_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Key, keys};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MigrationCheckpoint {
    pub migration: String,
    pub segment: u32,
    /// How many segments the run that wrote it scans in.
    pub segments: u32,
    /// The segment has been read to its end.
    pub done: bool,
    /// The segment's `LastEvaluatedKey` after the last page whose writes all went through, in
    /// DynamoDB JSON; none before the first page and after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_key: Option<String>,
    /// Items of the segment the run left as they were (conflicts), up to its last page: a
    /// migration whose every segment is done is complete only without them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub conflicts: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl MigrationCheckpoint {
    pub fn key_of(migration: &str, segment: u32) -> KeyOf<Self> {
        KeyOf::new(Key {
            pk: Self::partition(migration),
            sk: format!("{}{segment:04}", keys::SEGMENT_PREFIX),
        })
    }

    /// The partition of one migration's checkpoints.
    pub fn partition(migration: &str) -> String {
        format!("{}{migration}", keys::MIGRATION_PREFIX)
    }
}

impl Entity for MigrationCheckpoint {
    const TYPE: &'static EntityType = &EntityType {
        name: "migration-checkpoint",
        version: 1,
        keys: &[KeyShape::new(
            keys::MIGRATION_PREFIX,
            SortShape::Prefix(keys::SEGMENT_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Runner,
        display: "MigrationCheckpoint",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.migration, self.segment)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}
