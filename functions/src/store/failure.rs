//! Every SDK failure becomes a `503` (the engine is unreachable, stalled or throttling: try
//! again) or a `500` (a bug); the cause is logged here and never sent.

use crate::error::ApiError;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use tracing::{error, warn};

/// Error and cancellation-reason codes that mean "try again later", in every spelling DynamoDB
/// uses (a transaction's cancellation reasons drop the `Exception` suffix).
const TRANSIENT: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "ThrottlingError",
    "ProvisionedThroughputExceededException",
    "ProvisionedThroughputExceeded",
    "RequestLimitExceeded",
    "RequestLimitExceededException",
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
    "ThrottlingReason",
];

pub fn is_transient(code: &str) -> bool {
    TRANSIENT.contains(&code)
}

impl<E, R> From<SdkError<E, R>> for ApiError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    fn from(err: SdkError<E, R>) -> Self {
        let transient = match &err {
            SdkError::DispatchFailure(_)
            | SdkError::TimeoutError(_)
            | SdkError::ResponseError(_) => true,
            SdkError::ServiceError(service) => service.err().code().is_some_and(is_transient),
            _ => false,
        };
        if transient {
            warn!(error = %DisplayErrorContext(&err), "the engine is unavailable");
            ApiError::Unavailable
        } else {
            error!(error = %DisplayErrorContext(&err), "an engine request failed");
            ApiError::Internal
        }
    }
}
