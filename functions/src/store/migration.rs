//! What a migration reads and writes, in DynamoDB's terms (only the store speaks DynamoDB).
//!
//! A migration ([`crate::migrations`]) is a pure function from one item to its [`Write`]s, each
//! conditioned so that it applies once: on the item's schema version (`_v`), on the attributes it
//! adds being absent, on a lock still naming its holder. [`Ctx::apply_writes`] sends one write as
//! one `UpdateItem`/`PutItem`/`DeleteItem` (one write unit per KB) and several as one
//! `TransactWriteItems`; a failed condition means another writer (a rerun, a second runner, the
//! API) got there first, and nothing is written. [`Ctx::scan_page`] reads one page of one
//! segment of a parallel `Scan`, and the checkpoint functions keep a run's place per segment in
//! the table, so a killed run resumes where it stopped.

use super::capacity::{self, Billing};
use super::item::{Item, key_item, s};
use crate::context::Ctx;
use crate::error::ApiError;
use crate::model::Entity;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Delete, Put, ReturnConsumedCapacity, TransactWriteItem, Update,
};
use singlet_shared::Key;
use singlet_shared::schema::{PK, VERSION};
use std::collections::HashMap;

/// A condition a migration's write holds to.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    /// The item exists (an update never creates a half item).
    Exists,
    /// The item does not exist (a lock being claimed).
    Absent,
    /// The attribute is absent (index keys not yet written).
    Missing(&'static str),
    /// The attribute holds this value (a lock still naming its holder).
    Equals(&'static str, AttributeValue),
    /// The item's schema version is below this one (a missing `_v` is version 1).
    VersionBelow(u32),
}

/// One write of a migration.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Sets attributes on the item at `key`.
    Update {
        key: Key,
        set: Vec<(&'static str, AttributeValue)>,
        conditions: Vec<Condition>,
    },
    /// Puts a whole item.
    Put {
        item: Item,
        conditions: Vec<Condition>,
    },
    /// Deletes the item at `key`.
    Delete {
        key: Key,
        conditions: Vec<Condition>,
    },
}

/// What applying a migration's writes did, and the write units it consumed either way (a failed
/// condition is billed too).
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

/// An expression's names and values, numbered as they are added.
#[derive(Default)]
struct Expression {
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expression {
    fn name(&mut self, attribute: &str) -> String {
        let placeholder = format!("#n{}", self.names.len());
        self.names.insert(placeholder.clone(), attribute.to_owned());
        placeholder
    }

    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    fn condition(&mut self, conditions: &[Condition]) -> Option<String> {
        let parts: Vec<String> = conditions
            .iter()
            .map(|condition| match condition {
                Condition::Exists => format!("attribute_exists({})", self.name(PK)),
                Condition::Absent => format!("attribute_not_exists({})", self.name(PK)),
                Condition::Missing(attribute) => {
                    format!("attribute_not_exists({})", self.name(attribute))
                }
                Condition::Equals(attribute, value) => {
                    format!("{} = {}", self.name(attribute), self.value(value.clone()))
                }
                Condition::VersionBelow(version) => {
                    let (v, bound) = (self.name(VERSION), self.value(n(*version)));
                    format!("(attribute_not_exists({v}) OR {v} < {bound})")
                }
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" AND "))
    }

    fn names(&self) -> Option<HashMap<String, String>> {
        (!self.names.is_empty()).then(|| self.names.clone())
    }

    fn values(&self) -> Option<HashMap<String, AttributeValue>> {
        (!self.values.is_empty()).then(|| self.values.clone())
    }
}

fn n(value: u32) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

impl Ctx {
    /// Applies one item's writes: one write alone, several as one transaction.
    pub async fn apply_writes(&self, writes: &[Write]) -> Result<Applied, ApiError> {
        match writes {
            [] => Ok(Applied::Written { units: 0.0 }),
            [write] => self.apply_one(write).await,
            _ => self.apply_together(writes).await,
        }
    }

    async fn apply_one(&self, write: &Write) -> Result<Applied, ApiError> {
        let mut expression = Expression::default();
        match write {
            Write::Update {
                key,
                set,
                conditions,
            } => {
                let assignments: Vec<String> = set
                    .iter()
                    .map(|(name, value)| {
                        format!(
                            "{} = {}",
                            expression.name(name),
                            expression.value(value.clone())
                        )
                    })
                    .collect();
                let condition = expression.condition(conditions);
                let result = self
                    .db
                    .update_item()
                    .table_name(&*self.table)
                    .set_key(Some(key_item(key)))
                    .update_expression(format!("SET {}", assignments.join(", ")))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(expression.names())
                    .set_expression_attribute_values(expression.values())
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await;
                match result {
                    Ok(output) => Ok(Applied::Written {
                        units: units(output.consumed_capacity()),
                    }),
                    Err(err)
                        if matches!(
                            err.as_service_error(),
                            Some(UpdateItemError::ConditionalCheckFailedException(_))
                        ) =>
                    {
                        Ok(Applied::Refused { units: 1.0 })
                    }
                    Err(err) => Err(err.into()),
                }
            }
            Write::Put { item, conditions } => {
                let condition = expression.condition(conditions);
                let result = self
                    .db
                    .put_item()
                    .table_name(&*self.table)
                    .set_item(Some(item.clone()))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(expression.names())
                    .set_expression_attribute_values(expression.values())
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await;
                match result {
                    Ok(output) => Ok(Applied::Written {
                        units: units(output.consumed_capacity()),
                    }),
                    Err(err)
                        if matches!(
                            err.as_service_error(),
                            Some(PutItemError::ConditionalCheckFailedException(_))
                        ) =>
                    {
                        Ok(Applied::Refused { units: 1.0 })
                    }
                    Err(err) => Err(err.into()),
                }
            }
            Write::Delete { key, conditions } => {
                let condition = expression.condition(conditions);
                let result = self
                    .db
                    .delete_item()
                    .table_name(&*self.table)
                    .set_key(Some(key_item(key)))
                    .set_condition_expression(condition)
                    .set_expression_attribute_names(expression.names())
                    .set_expression_attribute_values(expression.values())
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await;
                match result {
                    Ok(output) => Ok(Applied::Written {
                        units: units(output.consumed_capacity()),
                    }),
                    Err(err)
                        if matches!(
                            err.as_service_error(),
                            Some(DeleteItemError::ConditionalCheckFailedException(_))
                        ) =>
                    {
                        Ok(Applied::Refused { units: 1.0 })
                    }
                    Err(err) => Err(err.into()),
                }
            }
        }
    }

    async fn apply_together(&self, writes: &[Write]) -> Result<Applied, ApiError> {
        let items: Vec<TransactWriteItem> = writes
            .iter()
            .map(|write| {
                let mut expression = Expression::default();
                let built = match write {
                    Write::Update {
                        key,
                        set,
                        conditions,
                    } => {
                        let assignments: Vec<String> = set
                            .iter()
                            .map(|(name, value)| {
                                format!(
                                    "{} = {}",
                                    expression.name(name),
                                    expression.value(value.clone())
                                )
                            })
                            .collect();
                        let condition = expression.condition(conditions);
                        TransactWriteItem::builder().update(
                            Update::builder()
                                .table_name(&*self.table)
                                .set_key(Some(key_item(key)))
                                .update_expression(format!("SET {}", assignments.join(", ")))
                                .set_condition_expression(condition)
                                .set_expression_attribute_names(expression.names())
                                .set_expression_attribute_values(expression.values())
                                .build()
                                .expect("an update names its key and expression"),
                        )
                    }
                    Write::Put { item, conditions } => {
                        let condition = expression.condition(conditions);
                        TransactWriteItem::builder().put(
                            Put::builder()
                                .table_name(&*self.table)
                                .set_item(Some(item.clone()))
                                .set_condition_expression(condition)
                                .set_expression_attribute_names(expression.names())
                                .set_expression_attribute_values(expression.values())
                                .build()
                                .expect("a put names its item"),
                        )
                    }
                    Write::Delete { key, conditions } => {
                        let condition = expression.condition(conditions);
                        TransactWriteItem::builder().delete(
                            Delete::builder()
                                .table_name(&*self.table)
                                .set_key(Some(key_item(key)))
                                .set_condition_expression(condition)
                                .set_expression_attribute_names(expression.names())
                                .set_expression_attribute_values(expression.values())
                                .build()
                                .expect("a delete names its key"),
                        )
                    }
                };
                built.build()
            })
            .collect();
        let result = self
            .db
            .transact_write_items()
            .set_transact_items(Some(items))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match result {
            Ok(output) => Ok(Applied::Written {
                units: output
                    .consumed_capacity()
                    .iter()
                    .filter_map(|c| c.capacity_units())
                    .sum(),
            }),
            Err(err)
                if matches!(
                    err.as_service_error(),
                    Some(TransactWriteItemsError::TransactionCanceledException(e))
                        if e.cancellation_reasons().iter().any(|r| r.code() == Some("ConditionalCheckFailed"))
                ) =>
            {
                Ok(Applied::Refused {
                    units: 2.0 * writes.len() as f64,
                })
            }
            Err(err) => Err(err.into()),
        }
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
        let output = self
            .db
            .scan()
            .table_name(&*self.table)
            .segment(segment as i32)
            .total_segments(segments as i32)
            .set_exclusive_start_key(start)
            .set_limit(limit)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await?;
        capacity::record("Scan", Billing::Read, output.consumed_capacity());
        Ok((
            output.items.unwrap_or_default(),
            output.last_evaluated_key.filter(|key| !key.is_empty()),
        ))
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

    /// Puts a bookkeeping entity (a checkpoint) whole, unconditionally: only its own runner
    /// writes it. Answers the write units consumed.
    pub async fn put_record(&self, record: &impl Entity) -> Result<f64, ApiError> {
        let output = self
            .db
            .put_item()
            .table_name(&*self.table)
            .set_item(Some(record.to_item()))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await?;
        Ok(units(output.consumed_capacity()))
    }

    /// Deletes the bookkeeping items of one partition (a finished migration's checkpoints,
    /// before a new pass).
    pub async fn delete_partition(&self, pk: &str) -> Result<(), ApiError> {
        for item in self.partition(pk).await? {
            let key = [PK, singlet_shared::schema::SK]
                .into_iter()
                .filter_map(|name| item.get(name).map(|v| (name.to_owned(), v.clone())))
                .collect();
            self.db
                .delete_item()
                .table_name(&*self.table)
                .set_key(Some(key))
                .send()
                .await?;
        }
        Ok(())
    }
}

fn units(capacity: Option<&aws_sdk_dynamodb::types::ConsumedCapacity>) -> f64 {
    capacity.and_then(|c| c.capacity_units()).unwrap_or(0.0)
}
