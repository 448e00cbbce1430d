//! Every DynamoDB call a console request made, as it went over the wire.
//!
//! An SDK interceptor on the runner's client copies each call's request body (the DynamoDB JSON
//! the SDK serialised: `Key`, `IndexName`, expressions, `TransactItems`) and its response body
//! (`ConsumedCapacity`, `CancellationReasons`, the error type) into the list of the console
//! request that made it. That list lives in a `tokio::task_local!`: handlers run in the caller's
//! task (`tokio::try_join!` and `join_all` included), so nothing in the handlers changes, and a
//! call made outside a console request (the API, the scheduled `mark-overdue`) records nothing.

use aws_sdk_dynamodb::config::interceptors::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::config_bag::{Storable, StoreReplace};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One DynamoDB call: the operation, its request body and its last response.
#[derive(Debug, Clone)]
pub struct Call {
    /// `GetItem`, `TransactWriteItems`, ... (the `x-amz-target` header).
    pub operation: String,
    pub request: Value,
    /// The HTTP status and body of the last attempt; `None` when no answer came.
    pub response: Option<(u16, Value)>,
    /// Attempts the SDK made (more than one when it retried).
    pub attempts: u32,
}

type Calls = Arc<Mutex<Vec<Call>>>;

tokio::task_local! {
    static CALLS: Calls;
}

/// Runs `work`, recording every DynamoDB call made in this task meanwhile.
pub async fn recording<F: Future>(work: F) -> (F::Output, Vec<Call>) {
    let calls = Calls::default();
    let output = CALLS.scope(calls.clone(), work).await;
    let calls = std::mem::take(&mut *calls.lock().expect("not poisoned"));
    (output, calls)
}

/// Where this operation's call sits in the task's list, kept in the operation's config bag from
/// its serialisation to its deserialisation (so concurrent calls in one task never mix), and
/// which recorder put it there (so a client given two recorders records each call once).
#[derive(Debug, Clone, Copy)]
struct Slot {
    index: usize,
    recorder: u64,
}

impl Storable for Slot {
    type Storer = StoreReplace<Self>;
}

/// The interceptor: a no-op outside [`recording`].
#[derive(Debug)]
pub struct Recorder {
    id: u64,
}

impl Recorder {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Recorder {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
        }
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "singlet-console-recorder"
    }

    fn read_after_serialization(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Slot>().is_some() {
            return Ok(());
        }
        let _outside_the_console = CALLS.try_with(|calls| {
            let (operation, body) = crate::serve::iam::read_call(context.request());
            let mut calls = calls.lock().expect("not poisoned");
            calls.push(Call {
                operation,
                request: body,
                response: None,
                attempts: 0,
            });
            cfg.interceptor_state().store_put(Slot {
                index: calls.len() - 1,
                recorder: self.id,
            });
        });
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(slot) = cfg
            .load::<Slot>()
            .copied()
            .filter(|s| s.recorder == self.id)
        else {
            return Ok(());
        };
        let _outside_the_console = CALLS.try_with(|calls| {
            let response = context.response();
            let body = response
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or(Value::Null);
            if let Some(call) = calls.lock().expect("not poisoned").get_mut(slot.index) {
                call.response = Some((response.status().as_u16(), body));
                call.attempts += 1;
            }
        });
        Ok(())
    }
}
