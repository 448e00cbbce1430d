//! Every SDK failure becomes a `503` (the engine is unreachable, stalled or throttling: try
//! again) or a `500` (a bug, a call the function's policy refuses); the cause is logged here and
//! never sent.

use crate::error::ApiError;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tracing::{error, warn};

/// Codes that mean the table refused the request's units (a hot key, the table's throughput), in
/// every spelling DynamoDB uses (a transaction's cancellation reasons drop the `Exception`
/// suffix): answered as [`ApiError::Throttled`].
const THROTTLED: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ThrottlingError",
    "ProvisionedThroughputExceededException",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
    "RequestLimitExceededException",
    "ThrottlingReason",
];

/// The other codes that mean "try again later", in the same spellings: answered as
/// [`ApiError::Unavailable`].
const UNAVAILABLE: &[&str] = &[
    "InternalServerError",
    "InternalServerErrorException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "TransactionInProgressException",
    "TransactionInProgress",
    "TransactionConflict",
    "TransactionConflictException",
    "ReplicatedWriteConflictException",
    "ReplicatedWriteConflict",
];

/// An error or cancellation-reason code that means "try again later": throttled or unavailable.
pub fn is_transient(code: &str) -> bool {
    is_throttling(code) || UNAVAILABLE.contains(&code)
}

pub fn is_throttling(code: &str) -> bool {
    THROTTLED.contains(&code)
}

/// The `503` a transient `code` is answered with.
pub fn unavailable_for(code: &str) -> ApiError {
    if is_throttling(code) {
        ApiError::Throttled
    } else {
        ApiError::Unavailable
    }
}

/// What the local runner's IAM check (`src/serve/iam.rs`) fails a call with before it is sent: the
/// function's policy in `template.yaml` refuses it, as AWS would answer `AccessDeniedException`.
/// The SDK hands it back as a dispatch failure, but it is no outage: it is answered as AWS's
/// would be, `500`, logged at `ERROR`, never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessDenied {
    pub function: &'static str,
    /// What was refused, by entity type: `dynamodb:PutItem on a plate-lock item` (never a key,
    /// which may be a plate or an email).
    pub refused: Vec<String>,
}

impl std::fmt::Display for AccessDenied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AccessDeniedException: {} is not authorized to perform {}: its policy in \
             template.yaml does not allow it (declare what it touches in {} and run `cargo run \
             -- render`)",
            self.function,
            self.refused.join(", "),
            // The tools functions' policies are declared whole, not from the route table.
            match self.function.starts_with("table-tools") {
                true => "src/render.rs (tools_policy, tools_check_policy)",
                false => "functions/src/routes.rs",
            }
        )
    }
}

impl std::error::Error for AccessDenied {}

/// The [`AccessDenied`] somewhere in `error`'s chain of causes, if any.
pub fn access_denied<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e AccessDenied> {
    let mut cause: Option<&'e (dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        if let Some(denied) = error.downcast_ref::<AccessDenied>() {
            return Some(denied);
        }
        cause = error.source();
    }
    None
}

impl<E, R> From<SdkError<E, R>> for ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + 'static,
{
    fn from(err: SdkError<E, R>) -> Self {
        if let Some(denied) = access_denied(&err) {
            error!(error = %denied, "a call its function's policy refuses");
            return ApiError::Internal;
        }
        let transient = match &err {
            SdkError::DispatchFailure(_)
            | SdkError::TimeoutError(_)
            | SdkError::ResponseError(_) => Some(ApiError::Unavailable),
            SdkError::ServiceError(service) => service
                .err()
                .code()
                .filter(|code| is_transient(code))
                .map(unavailable_for),
            _ => None,
        };
        if let Some(unavailable) = transient {
            warn!(error = %DisplayErrorContext(&err), "the engine is unavailable");
            unavailable
        } else {
            error!(error = %DisplayErrorContext(&err), "an engine request failed");
            ApiError::Internal
        }
    }
}
