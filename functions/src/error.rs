//! The one HTTP error type. Each variant only chooses a status and a problem `type`; the problem
//! document (RFC 9457, `application/problem+json`) is rendered in one place, [`ApiError::into_response`].

use crate::headers::{RETRY_AFTER_SECONDS, etag};
use lambda_http::http::{HeaderValue, StatusCode, header};
use lambda_http::{Body, Response};
use serde::Serialize;
use singlet_shared::Invalid;

/// A machine-readable reason attached to one field of a `400` or `409`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    Required,
    Invalid,
    TooLong,
    Taken,
    Unavailable,
    LimitReached,
    Returned,
    Overdue,
    RenewalLimit,
    HasLoans,
}

impl Code {
    /// The code as problem documents and metrics spell it (`taken`, `limit_reached`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Required => "required",
            Code::Invalid => "invalid",
            Code::TooLong => "too_long",
            Code::Taken => "taken",
            Code::Unavailable => "unavailable",
            Code::LimitReached => "limit_reached",
            Code::Returned => "returned",
            Code::Overdue => "overdue",
            Code::RenewalLimit => "renewal_limit",
            Code::HasLoans => "has_loans",
        }
    }
}

impl From<Invalid> for Code {
    fn from(invalid: Invalid) -> Self {
        match invalid {
            Invalid::Required => Code::Required,
            Invalid::Invalid => Code::Invalid,
            Invalid::TooLong => Code::TooLong,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: &'static str,
    pub code: Code,
}

impl FieldError {
    pub fn new(field: &'static str, code: impl Into<Code>) -> Self {
        Self {
            field,
            code: code.into(),
        }
    }
}

/// An RFC 9457 problem document, its members in the RFC's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: String,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    errors: &'a [FieldError],
    /// On a `412`: the version the client should read again.
    #[serde(skip_serializing_if = "Option::is_none")]
    current_version: Option<u64>,
}

#[derive(Debug)]
pub enum ApiError {
    /// 400: fields at fault, or a malformed body.
    BadRequest {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// 404: the named thing does not exist.
    NotFound(String),
    /// 409: the request conflicts with what is stored.
    Conflict {
        detail: String,
        errors: Vec<FieldError>,
    },
    /// 412: the `if-match` version is not the current one.
    PreconditionFailed { current_version: u64 },
    /// 413: the body is over the limit.
    PayloadTooLarge,
    /// 415: the body is not JSON.
    UnsupportedMediaType,
    /// 422: well-formed, but not acceptable (an idempotency key reused with another request).
    Unprocessable(String),
    /// 428: a guarded update without `if-match`.
    PreconditionRequired,
    /// 410: what an `Idempotency-Key` created has been deleted since, and its answer with it.
    Gone,
    /// 503: the engine could not be reached, or failed for a moment.
    Unavailable,
    /// 503: the table refused the request's units past the SDK's retries (a hot key: DynamoDB's
    /// per-key limits, or the table's): nothing was written. Its own problem type, so a client
    /// can tell load from an outage; it names no key, index or table.
    Throttled,
    /// 500: a bug. The cause is logged where it happened, never sent.
    Internal,
    /// 401: no verified caller. Rendered as API Gateway's own `{"message":"Unauthorized"}`.
    Unauthorized,
    /// 403: the caller's token lacks the route's scopes. API Gateway's `{"message":"Forbidden"}`.
    Forbidden,
}

impl ApiError {
    /// The field error codes of a `400` or `409`, in order; none for any other error.
    pub fn codes(&self) -> Vec<Code> {
        match self {
            ApiError::BadRequest { errors, .. } | ApiError::Conflict { errors, .. } => {
                errors.iter().map(|error| error.code).collect()
            }
            _ => Vec::new(),
        }
    }

    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let fields: Vec<&str> = errors.iter().map(|e| e.field).collect();
        ApiError::BadRequest {
            detail: format!("invalid fields: {}", fields.join(", ")),
            errors,
        }
    }

    pub fn field(field: &'static str, code: impl Into<Code>) -> Self {
        Self::invalid(vec![FieldError::new(field, code)])
    }

    pub fn malformed(detail: impl Into<String>) -> Self {
        ApiError::BadRequest {
            detail: detail.into(),
            errors: Vec::new(),
        }
    }

    pub fn not_found(what: impl Into<String>) -> Self {
        ApiError::NotFound(what.into())
    }

    /// A 409 naming every field at fault.
    pub fn conflict(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| match e.code {
                Code::Taken => format!("{} is already registered", e.field),
                Code::Unavailable => format!("{} is not available", e.field),
                Code::LimitReached => format!("{} has reached the limit", e.field),
                Code::Returned => format!("{} has already been returned", e.field),
                Code::Overdue => format!("{} is overdue", e.field),
                Code::RenewalLimit => format!("{} has reached the renewal limit", e.field),
                Code::HasLoans => format!("{} has active loans", e.field),
                _ => format!("{} conflicts", e.field),
            })
            .collect::<Vec<_>>()
            .join("; ");
        ApiError::Conflict { detail, errors }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::PreconditionFailed { .. } => StatusCode::PRECONDITION_FAILED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PreconditionRequired => StatusCode::PRECONDITION_REQUIRED,
            ApiError::Gone => StatusCode::GONE,
            ApiError::Unavailable | ApiError::Throttled => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden => StatusCode::FORBIDDEN,
        }
    }

    fn slug(&self) -> &'static str {
        match self {
            ApiError::BadRequest { .. } => "bad-request",
            ApiError::NotFound(_) => "not-found",
            ApiError::Conflict { .. } => "conflict",
            ApiError::PreconditionFailed { .. } => "precondition-failed",
            ApiError::PayloadTooLarge => "payload-too-large",
            ApiError::UnsupportedMediaType => "unsupported-media-type",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::PreconditionRequired => "precondition-required",
            ApiError::Gone => "gone",
            ApiError::Unavailable => "unavailable",
            ApiError::Throttled => "throttled",
            ApiError::Internal => "internal",
            ApiError::Unauthorized => "unauthorized",
            ApiError::Forbidden => "forbidden",
        }
    }

    fn detail(&self) -> String {
        match self {
            ApiError::BadRequest { detail, .. } | ApiError::Conflict { detail, .. } => {
                detail.clone()
            }
            ApiError::NotFound(what) => format!("{what} not found"),
            ApiError::PreconditionFailed { current_version } => {
                format!("the resource has changed: its current version is {current_version}")
            }
            ApiError::PayloadTooLarge => "the body is larger than 64 KiB".into(),
            ApiError::UnsupportedMediaType => "the body must be application/json".into(),
            ApiError::Unprocessable(detail) => detail.clone(),
            ApiError::PreconditionRequired => {
                "this update needs an if-match header carrying the version you read".into()
            }
            ApiError::Gone => {
                "what this Idempotency-Key created has been deleted; use a new key".into()
            }
            ApiError::Unavailable => "the database is unavailable; retry shortly".into(),
            ApiError::Throttled => {
                "too many requests for the same data at once; nothing was changed, retry shortly"
                    .into()
            }
            ApiError::Internal => "an unexpected error occurred".into(),
            ApiError::Unauthorized => "Unauthorized".into(),
            ApiError::Forbidden => "Forbidden".into(),
        }
    }

    /// Renders the problem document: the only place an error becomes a response.
    pub fn into_response(self) -> Response<Body> {
        let status = self.status();
        if let ApiError::Unauthorized | ApiError::Forbidden = self {
            // Exactly what API Gateway's authorizer answers, so a client sees one shape.
            let body = serde_json::json!({ "message": self.detail() }).to_string();
            let mut response = Response::new(Body::Text(body));
            *response.status_mut() = status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return response;
        }
        let errors = match &self {
            ApiError::BadRequest { errors, .. } | ApiError::Conflict { errors, .. } => {
                errors.as_slice()
            }
            _ => &[],
        };
        let current_version = match &self {
            ApiError::PreconditionFailed { current_version } => Some(*current_version),
            _ => None,
        };
        let problem = Problem {
            kind: format!("/problems/{}", self.slug()),
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: self.detail(),
            errors,
            current_version,
        };
        let body = serde_json::to_string(&problem).expect("problems serialise");
        let mut response = Response::new(Body::Text(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let ApiError::Unavailable | ApiError::Throttled = self {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        }
        if let ApiError::PreconditionFailed { current_version } = self {
            headers.insert(header::ETAG, etag(current_version));
        }
        response
    }
}
