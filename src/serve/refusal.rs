//! The answers API Gateway gives itself, before any function runs (`404 {"message":"Not
//! Found"}`, `401`, `403`, `413`): the front door and the local authorizer both give them.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

pub fn gateway_message(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "message": message }).to_string(),
    )
        .into_response()
}

/// An answer API Gateway gives itself, before any function runs: its status and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayRefusal(pub StatusCode, pub &'static str);

impl IntoResponse for GatewayRefusal {
    fn into_response(self) -> Response {
        gateway_message(self.0, self.1)
    }
}
