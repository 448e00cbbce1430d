//! One invocation's own facts: its request id, its X-Ray trace id, its deadline and whether it
//! paid the instance's cold start, taken from the invocation's context (the Runtime API's
//! headers) and nowhere else.
//!
//! On Lambda's default model an instance serves one invocation at a time, and the runtime also
//! writes the trace id to the process's `_X_AMZN_TRACE_ID` variable, where the AWS SDK reads it.
//! On managed instances one process serves up to `AWS_LAMBDA_MAX_CONCURRENCY` invocations at
//! once ([`max_concurrency`]), and a process-wide variable can name only one of them: the
//! runtime leaves it unset, and so everything per invocation here is held by the invocation's
//! own task ([`Invocation::scope`]): its log lines (the runtime's span and the `invocation`
//! span, `crate::lambda`), its metric document, its request deadline ([`request_deadline`]) and
//! the trace header its AWS calls carry ([`TraceHeader`]).

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextMut;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

/// The variable Lambda sets on a managed instance's execution environment: how many invocations
/// one process may be handed at once.
pub const MAX_CONCURRENCY_VAR: &str = "AWS_LAMBDA_MAX_CONCURRENCY";

/// How long before the invocation's own deadline a request is given up (`503`), so that its
/// answer still reaches Lambda in time: what the 8 s request deadline leaves of the 10 s timeout
/// is 2 s; this is the least a nearer invocation deadline leaves.
pub const ANSWER_MARGIN: Duration = Duration::from_millis(500);

/// What one invocation is, from its context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Lambda's id of the invocation (`lambda-runtime-aws-request-id`).
    pub request_id: String,
    /// Its X-Ray trace header (`lambda-runtime-trace-id`: `Root=...;Parent=...;Sampled=...`).
    pub trace_id: Option<String>,
    /// When Lambda stops waiting for its answer (`lambda-runtime-deadline-ms`).
    pub deadline: SystemTime,
    /// Whether it is the first invocation this process serves ([`first_invocation`]).
    pub cold_start: bool,
}

tokio::task_local! {
    /// The invocation the running task serves.
    static CURRENT: Arc<Invocation>;
}

impl Invocation {
    /// The invocation `context` describes; the process's first one is its cold start.
    pub fn of(context: &lambda_runtime::Context) -> Self {
        Self {
            request_id: context.request_id.clone(),
            trace_id: context.xray_trace_id.clone().filter(|id| !id.is_empty()),
            deadline: context.deadline(),
            cold_start: first_invocation(),
        }
    }

    /// Runs `work` as this invocation's: [`current`] and everything read from it is this one.
    pub async fn scope<F: Future>(self: Arc<Self>, work: F) -> F::Output {
        CURRENT.scope(self, work).await
    }

    /// How long until its deadline, from `now` (zero once it has passed).
    pub fn remaining(&self, now: SystemTime) -> Duration {
        self.deadline.duration_since(now).unwrap_or_default()
    }
}

/// The invocation the running task serves, if it serves one (the local runner's requests and
/// the tests' handlers serve none).
pub fn current() -> Option<Arc<Invocation>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// How long a request may run: `limit` (the context's `REQUEST_DEADLINE`), or less when the
/// invocation it serves must be answered sooner ([`ANSWER_MARGIN`] before its deadline).
pub fn request_deadline(limit: Duration) -> Duration {
    match current() {
        Some(invocation) => deadline_within(limit, &invocation, SystemTime::now()),
        None => limit,
    }
}

/// [`request_deadline`] for `invocation`, read at `now`.
pub fn deadline_within(limit: Duration, invocation: &Invocation, now: SystemTime) -> Duration {
    limit.min(invocation.remaining(now).saturating_sub(ANSWER_MARGIN))
}

/// `true` the first time it is asked in this process, `false` ever after: one invocation, and
/// only one however many run at once, is the cold start.
pub fn first_invocation() -> bool {
    static COLD: AtomicBool = AtomicBool::new(true);
    COLD.swap(false, Ordering::Relaxed)
}

/// How many invocations this process may be handed at once: `AWS_LAMBDA_MAX_CONCURRENCY` when it
/// is a number above 0 (as the runtime reads it), else 1.
pub fn max_concurrency() -> u32 {
    max_concurrency_from(std::env::var(MAX_CONCURRENCY_VAR).ok().as_deref())
}

/// [`max_concurrency`] from the variable's value.
pub fn max_concurrency_from(raw: Option<&str>) -> u32 {
    raw.and_then(|raw| raw.trim().parse::<u32>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// The header the AWS SDK's recursion detection sets from `_X_AMZN_TRACE_ID`.
const TRACE_HEADER: &str = "x-amzn-trace-id";

/// Puts the running invocation's trace id on every AWS request a client sends
/// (`x-amzn-trace-id`), as the SDK does from `_X_AMZN_TRACE_ID` when one invocation runs at a
/// time: with many at once that variable is unset, and would name one invocation for all if it
/// were not. A request sent outside an invocation is left as the SDK made it.
#[derive(Debug, Default)]
pub struct TraceHeader;

impl Intercept for TraceHeader {
    fn name(&self) -> &'static str {
        "singlet::TraceHeader"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(trace_id) = current().and_then(|invocation| invocation.trace_id.clone()) else {
            return Ok(());
        };
        // A value that is no header value is left out: a trace id never fails a request.
        let _ = context
            .request_mut()
            .headers_mut()
            .try_insert(TRACE_HEADER, trace_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invocation(deadline: SystemTime) -> Invocation {
        Invocation {
            request_id: "r-1".into(),
            trace_id: Some("Root=1-6750a1b2-0123456789abcdef01234567".into()),
            deadline,
            cold_start: false,
        }
    }

    #[test]
    fn a_request_keeps_its_limit_unless_its_invocation_ends_sooner() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_580_000);
        let limit = Duration::from_secs(8);
        let roomy = invocation(now + Duration::from_secs(10));
        assert_eq!(deadline_within(limit, &roomy, now), limit);
        let near = invocation(now + Duration::from_millis(3_000));
        assert_eq!(
            deadline_within(limit, &near, now),
            Duration::from_millis(2_500)
        );
        let past = invocation(now - Duration::from_secs(1));
        assert_eq!(deadline_within(limit, &past, now), Duration::ZERO);
    }

    #[test]
    fn the_concurrency_is_a_number_above_zero_or_one() {
        assert_eq!(max_concurrency_from(None), 1);
        assert_eq!(max_concurrency_from(Some("")), 1);
        assert_eq!(max_concurrency_from(Some("0")), 1);
        assert_eq!(max_concurrency_from(Some("-4")), 1);
        assert_eq!(max_concurrency_from(Some("many")), 1);
        assert_eq!(max_concurrency_from(Some("1")), 1);
        assert_eq!(max_concurrency_from(Some("64")), 64);
    }

    #[tokio::test]
    async fn each_task_sees_its_own_invocation_and_none_outside() {
        assert!(current().is_none());
        let far = SystemTime::now() + Duration::from_secs(60);
        let one = Arc::new(Invocation {
            request_id: "one".into(),
            ..invocation(far)
        });
        let two = Arc::new(Invocation {
            request_id: "two".into(),
            ..invocation(far)
        });
        let (a, b) = tokio::join!(
            one.scope(async {
                tokio::task::yield_now().await;
                current().unwrap().request_id.clone()
            }),
            two.scope(async {
                tokio::task::yield_now().await;
                current().unwrap().request_id.clone()
            }),
        );
        assert_eq!((a.as_str(), b.as_str()), ("one", "two"));
        assert!(current().is_none());
    }
}
