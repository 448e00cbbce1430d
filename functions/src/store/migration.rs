//! What a migration reads and writes. Its writes are the store's typed writes ([`Put`],
//! [`Update`], [`Delete`], as [`crate::store::write`] spells them); this module only adds how one
//! item's change is sent and measured, and the reads a run needs.
//!
//! A migration ([`crate::migrations`]) is a pure function from one item to its [`Change`], each
//! write conditioned so that it applies once: on the item's schema version (`_v`), on the
//! attributes it adds being absent, on a lock still naming its holder. [`Ctx::apply_change`]
//! sends one write alone as one `UpdateItem`/`DeleteItem` (one write unit per KB) and several
//! as one transaction (two per KB); a failed condition means another writer (a rerun, a second
//! runner, the API) got there first, and nothing is written. [`Ctx::scan_page`] reads one page
//! of one segment of a parallel `Scan`, and the checkpoint functions keep a run's place per
//! segment in the table, so a killed run resumes where it stopped.

use super::Scan;
use super::capacity::metered;
use super::item::{Item, key_item, s};
use super::transaction::{Commit, Transaction};
use super::write::{Delete, Put, Update, Write};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::model::Entity;
use aws_sdk_dynamodb::types::ReturnConsumedCapacity;
use singlet_shared::Key;
use singlet_shared::schema::{PK, SK};

/// One item's change: its conditioned writes, applied together or not at all.
#[derive(Debug, Clone)]
pub struct Change {
    writes: Vec<Write>,
}

impl Change {
    pub fn update<E>(update: Update<E>) -> Self {
        Self {
            writes: vec![update.into()],
        }
    }

    /// And `put`, in the same transaction.
    pub fn and_put(mut self, put: Put) -> Self {
        self.writes.push(put.into());
        self
    }

    /// And `delete`, in the same transaction.
    pub fn and_delete<E>(mut self, delete: Delete<E>) -> Self {
        self.writes.push(delete.into());
        self
    }

    /// How many writes it makes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// The keys its writes put units on, with the units expected on each (every item under
    /// 1 KB; a change of several writes is a transaction): what `migrate` paces per key.
    pub fn keys_written(&self) -> Vec<(super::pace::KeyRef, f64)> {
        let keys = self.writes.iter().flat_map(Write::keys_written).collect();
        super::pace::units_per_key(keys, self.writes.len() > 1)
    }

    /// Each write as text, placeholders replaced (`update VEHICLE#v1 SET … IF …`): what a test
    /// reads of a plan.
    #[cfg(test)]
    pub fn readable(&self) -> Vec<String> {
        self.writes.iter().map(Write::readable).collect()
    }
}

/// What applying one item's change did, and the write units it consumed either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Applied {
    Written {
        units: f64,
    },
    /// A condition failed: someone else changed the item first, and nothing was written.
    Refused {
        units: f64,
    },
}

impl Applied {
    pub fn units(self) -> f64 {
        match self {
            Applied::Written { units } | Applied::Refused { units } => units,
        }
    }
}

impl Ctx {
    /// Applies one item's change: one write alone, several as one transaction. The units are
    /// what the engine reported; a refused write reports none, so it is counted as DynamoDB
    /// bills it, one unit a write (two in a transaction).
    pub async fn apply_change(&self, change: &Change) -> Result<Applied, ApiError> {
        let (written, consumed) = metered(async {
            Ok::<_, ApiError>(match change.writes.as_slice() {
                [] => true,
                [Write::Update(update)] => self.update_raw(update).await?.is_some(),
                [Write::Delete(delete)] => self.delete_raw(delete).await?,
                writes => {
                    let transaction = writes
                        .iter()
                        .enumerate()
                        .fold(Transaction::new(), |transaction, (part, write)| {
                            transaction.push(part, write.clone())
                        });
                    matches!(transaction.commit(self).await?, Commit::Done)
                }
            })
        })
        .await;
        let units = consumed.write_units;
        Ok(match written? {
            true => Applied::Written { units },
            false => {
                let per_write = if change.writes.len() > 1 { 2.0 } else { 1.0 };
                Applied::Refused {
                    units: per_write * change.writes.len() as f64,
                }
            }
        })
    }

    /// One page of one segment of a parallel `Scan` (eventually consistent: a migration's writes
    /// are conditioned, so a stale read can only make it skip or retry, never write wrong).
    pub async fn scan_page(
        &self,
        segment: u32,
        segments: u32,
        start: Option<Item>,
        limit: Option<i32>,
    ) -> Result<(Vec<Item>, Option<Item>), ApiError> {
        let page = self
            .scan(
                Scan::table()
                    .segment(segment, segments)
                    .limit(limit)
                    .start_after(start),
            )
            .await?;
        Ok((page.items, page.last_key))
    }

    /// Every item of one partition (a migration's checkpoints), strongly consistent.
    pub async fn partition(&self, pk: &str) -> Result<Vec<Item>, ApiError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .db
                .query()
                .table_name(&*self.table)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await?;
            items.extend(output.items.unwrap_or_default());
            match output.last_evaluated_key.filter(|key| !key.is_empty()) {
                Some(key) => start = Some(key),
                None => return Ok(items),
            }
        }
    }

    /// Puts an entity whole, unconditionally: a record only its own writer writes (a migration's
    /// checkpoint; the undecodable outbox item the events tests inject on purpose). Answers the
    /// write units consumed.
    pub async fn put_record(&self, record: &impl Entity) -> Result<f64, ApiError> {
        let output = self
            .db
            .put_item()
            .table_name(&*self.table)
            .set_item(Some(record.to_item()))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        Ok(output
            .consumed_capacity()
            .and_then(|c| c.capacity_units())
            .unwrap_or(0.0))
    }

    /// Deletes the bookkeeping items of one partition (a finished migration's checkpoints,
    /// before a new pass).
    pub async fn delete_partition(&self, pk: &str) -> Result<(), ApiError> {
        for item in self.partition(pk).await? {
            let text = |name| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            let (Some(pk), Some(sk)) = (text(PK), text(SK)) else {
                continue;
            };
            self.db
                .delete_item()
                .table_name(&*self.table)
                .set_key(Some(key_item(&Key { pk, sk })))
                .send()
                .await?;
        }
        Ok(())
    }
}
