//! [`Transaction`]: one `TransactWriteItems` whose parts are tagged with what they are (`P`, the
//! pattern's own enum), so a cancellation is read by what failed, never by index.
//!
//! A conflict with another transaction on the same item (`TransactionConflict`, as an error or as
//! a cancellation reason) says nothing about the data: the same transaction is sent again a few
//! times, with jittered backoff, before the request is a `503`. Its conditions are evaluated
//! anew each time, so a retry can never apply what the first attempt would have refused.

use super::capacity::{self, Billing};
use super::failure::{is_transient, unavailable_for};
use super::item::Item;
use super::write::{Check, Delete, Put, Update, Write};
use crate::context::Ctx;
use crate::error::ApiError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, ReturnConsumedCapacity};
use std::time::Duration;
use tracing::warn;

/// The most parts one `TransactWriteItems` takes.
pub const MAX_PARTS: usize = 100;

/// Attempts at one transaction that keeps conflicting with others before the request is a `503`.
pub const CONFLICT_ATTEMPTS: u32 = 4;

#[derive(Clone)]
pub struct Transaction<P> {
    parts: Vec<(P, Write)>,
    token: Option<String>,
}

/// How a transaction ended.
#[derive(Debug)]
pub enum Commit<P> {
    Done,
    /// Conditions failed: the parts whose condition failed, with the item as it stood.
    Cancelled(Cancelled<P>),
}

/// How a transaction with a `ClientRequestToken` ended.
#[derive(Debug)]
pub enum TokenCommit<P> {
    Committed(Commit<P>),
    /// The token was used by another request with other parts within DynamoDB's 10 minutes
    /// (`IdempotentParameterMismatch`): nothing was written.
    TokenReused,
}

#[derive(Debug)]
pub struct Cancelled<P> {
    pub failed: Vec<(P, Option<Item>)>,
}

impl<P: PartialEq> Cancelled<P> {
    pub fn failed(&self, part: P) -> bool {
        self.failed.iter().any(|(p, _)| *p == part)
    }

    /// The item as it stood when `part`'s condition failed (`ALL_OLD` on condition failure).
    pub fn old(&self, part: P) -> Option<&Item> {
        self.failed
            .iter()
            .find(|(p, _)| *p == part)
            .and_then(|(_, item)| item.as_ref())
    }

    /// The parts whose condition failed, without the items: what a log may say of them.
    pub fn parts(&self) -> Vec<&P> {
        self.failed.iter().map(|(p, _)| p).collect()
    }

    /// The same cancellation with each part renamed; parts `rename` drops are left out.
    pub fn map<Q>(self, rename: impl Fn(P) -> Option<Q>) -> Cancelled<Q> {
        Cancelled {
            failed: self
                .failed
                .into_iter()
                .filter_map(|(p, item)| rename(p).map(|q| (q, item)))
                .collect(),
        }
    }
}

impl<P: Copy + PartialEq + std::fmt::Debug> Default for Transaction<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Copy + PartialEq + std::fmt::Debug> Transaction<P> {
    pub fn new() -> Self {
        Self {
            parts: Vec::new(),
            token: None,
        }
    }

    /// How many parts it has so far.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn put(self, part: P, put: Put) -> Self {
        self.push(part, put.into())
    }

    pub fn update<E>(self, part: P, update: Update<E>) -> Self {
        self.push(part, update.into())
    }

    pub fn delete<E>(self, part: P, delete: Delete<E>) -> Self {
        self.push(part, delete.into())
    }

    pub fn check<E>(self, part: P, check: Check<E>) -> Self {
        self.push(part, check.into())
    }

    /// [`Transaction::check`], when there is a check to make.
    pub fn check_if_some<E>(self, part: P, check: Option<Check<E>>) -> Self {
        match check {
            Some(check) => self.check(part, check),
            None => self,
        }
    }

    /// Commits the transaction.
    pub async fn commit(self, ctx: &Ctx) -> Result<Commit<P>, ApiError> {
        match self.send(ctx).await? {
            TokenCommit::Committed(commit) => Ok(commit),
            // Only a transaction with a token can meet its token again.
            TokenCommit::TokenReused => Err(ApiError::Internal),
        }
    }

    /// Commits the transaction with `token` as its `ClientRequestToken`: DynamoDB applies one
    /// token's transaction at most once within its 10-minute window.
    pub async fn commit_with_token(
        mut self,
        ctx: &Ctx,
        token: Option<String>,
    ) -> Result<TokenCommit<P>, ApiError> {
        self.token = token;
        self.send(ctx).await
    }

    /// The same parts, each tagged anew.
    pub fn map<Q>(self, tag: impl Fn(P) -> Q) -> Transaction<Q> {
        Transaction {
            parts: self
                .parts
                .into_iter()
                .map(|(part, item)| (tag(part), item))
                .collect(),
            token: self.token,
        }
    }

    pub(super) fn push(mut self, part: P, write: Write) -> Self {
        self.parts.push((part, write));
        self
    }

    async fn send(self, ctx: &Ctx) -> Result<TokenCommit<P>, ApiError> {
        let items: Vec<_> = self
            .parts
            .iter()
            .map(|(_, write)| write.transact_item(&ctx.table))
            .collect();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = ctx
                .db
                .transact_write_items()
                // A copy per attempt: the SDK takes the items, and a conflict sends them again.
                .set_transact_items(Some(items.clone()))
                .set_client_request_token(self.token.clone())
                .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
                .send()
                .await;
            let err = match result {
                Ok(output) => {
                    capacity::record(
                        "TransactWriteItems",
                        Billing::Write,
                        output.consumed_capacity(),
                    );
                    return Ok(TokenCommit::Committed(Commit::Done));
                }
                Err(err) => err,
            };
            let conflict = match err.as_service_error() {
                Some(TransactWriteItemsError::TransactionCanceledException(cancelled)) => {
                    match self.cancelled(cancelled.cancellation_reasons())? {
                        Some(cancelled) => {
                            return Ok(TokenCommit::Committed(Commit::Cancelled(cancelled)));
                        }
                        None => true,
                    }
                }
                Some(TransactWriteItemsError::IdempotentParameterMismatchException(_)) => {
                    return Ok(TokenCommit::TokenReused);
                }
                // The same token is being committed by a concurrent request: wait for it.
                Some(TransactWriteItemsError::TransactionInProgressException(_)) => true,
                Some(other) if other.meta().code() == Some("TransactionConflictException") => true,
                _ => return Err(err.into()),
            };
            if conflict && attempt >= CONFLICT_ATTEMPTS {
                warn!(
                    attempts = attempt,
                    "a transaction kept conflicting with others; the client should retry"
                );
                return Err(ApiError::Unavailable);
            }
            tokio::time::sleep(backoff(attempt)).await;
        }
    }

    /// The failed parts of a cancelled transaction; `None` when it only conflicted with another
    /// transaction and is worth sending again.
    fn cancelled(&self, reasons: &[CancellationReason]) -> Result<Option<Cancelled<P>>, ApiError> {
        let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
        let mut failed = Vec::new();
        let mut conflicted = false;
        for (i, (part, _)) in self.parts.iter().enumerate() {
            match code(i) {
                "None" => {}
                "ConditionalCheckFailed" => failed.push((*part, reasons[i].item().cloned())),
                "TransactionConflict" => conflicted = true,
                other => {
                    warn!(part = ?part, reason = other, "transaction cancelled for a reason other than a condition");
                    return Err(if is_transient(other) {
                        unavailable_for(other)
                    } else {
                        ApiError::Internal
                    });
                }
            }
        }
        if !failed.is_empty() {
            return Ok(Some(Cancelled { failed }));
        }
        if conflicted {
            return Ok(None);
        }
        // Codes only: a reason can carry the item as it stood (`ALL_OLD`), personal data and all.
        let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
        warn!(?codes, "transaction cancelled without a reason");
        Err(ApiError::Unavailable)
    }
}

/// Full jitter: a random wait up to 20 ms × 2^attempt.
fn backoff(attempt: u32) -> Duration {
    let ceiling = 20u64 << attempt.min(6);
    let random = (uuid::Uuid::new_v4().as_u128() % u128::from(ceiling)) as u64;
    Duration::from_millis(random.max(1))
}
