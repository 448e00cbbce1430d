//! A unique value's lock: an item keyed by the value (`PLATE#<plate>`, `UNIQ#EMAIL#<email>`,
//! `CARD#<cardNumber>`) that names its holder. Uniqueness is a key collision:
//! - [`claim`] puts the lock only if no item has its key, and asks for the item as it stood if
//!   one does, so [`holder`] can tell "taken by another" from "already mine";
//! - [`release`] deletes it only if it still names the holder, so a write that read stale data
//!   can never free a value that someone else holds now.
//!
//! The fleet (plates, chassis numbers), accounts (emails, usernames) and library cards all use
//! these three functions.

use super::ABSENT;
use super::item::{Item, s, text};
use crate::context::Ctx;
use crate::model::Entity;
use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
use aws_sdk_dynamodb::types::builders::{DeleteBuilder, PutBuilder};
use singlet_shared::{Id, Key};

/// Puts `lock` unless its key is taken.
pub fn claim<E: Entity>(ctx: &Ctx, lock: &E) -> PutBuilder {
    ctx.put(lock)
        .condition_expression(ABSENT)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
}

/// Deletes the lock at `key` only if its `holder_field` still names `holder`.
pub fn release(ctx: &Ctx, key: &Key, holder_field: &'static str, holder: &Id) -> DeleteBuilder {
    ctx.delete(key)
        .condition_expression("#holder = :holder")
        .expression_attribute_names("#holder", holder_field)
        .expression_attribute_values(":holder", s(holder.as_str()))
}

/// Who holds a lock whose claim failed, from the item the cancellation returned.
pub fn holder<'i>(old: Option<&'i Item>, holder_field: &str) -> Option<&'i str> {
    old.map(|item| text(item, holder_field))
        .filter(|holder| !holder.is_empty())
}
