//! `singlet invoke <function> --event <file>`: one function, once, on one event file (the files
//! `sam local invoke` takes), printing the function's response as Lambda would return it.

use lambda_http::Body;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::routes::{by_function, respond};

pub async fn invoke(ctx: &Ctx, function: &str, event: &str) -> Result<Value, String> {
    let route = by_function(function).ok_or_else(|| format!("no function named {function}"))?;
    let request = lambda_http::request::from_str(event)
        .map_err(|e| format!("the event is not an API Gateway HTTP API event: {e}"))?;
    let response = respond(ctx, route.handler, request).await;
    let headers: serde_json::Map<String, Value> = response
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                value.to_str().unwrap_or_default().into(),
            )
        })
        .collect();
    let body = match response.body() {
        Body::Text(text) => text.clone(),
        _ => String::new(),
    };
    Ok(json!({
        "statusCode": response.status().as_u16(),
        "headers": headers,
        "body": body,
        "isBase64Encoded": false,
    }))
}
