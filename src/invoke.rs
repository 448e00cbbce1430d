//! `singlet invoke <function> --event <file>`: one function, once, on one event file (the files
//! `sam local invoke` takes), printing the function's response as Lambda would return it.

use lambda_http::Body;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::request::respond;
use singlet_functions::routes::{by_function, scheduled, streamed};

pub async fn invoke(ctx: &Ctx, function: &str, event: &str) -> Result<Value, String> {
    if let Some(scheduled) = scheduled(function) {
        let event: Value =
            serde_json::from_str(event).map_err(|e| format!("the event is not JSON: {e}"))?;
        return (scheduled.handler)(ctx, event, None).await;
    }
    if let Some(streamed) = streamed(function) {
        let event: Value =
            serde_json::from_str(event).map_err(|e| format!("the event is not JSON: {e}"))?;
        return (streamed.handler)(ctx, event, None).await;
    }
    let route = by_function(function).ok_or_else(|| format!("no function named {function}"))?;
    let request = lambda_http::request::from_str(event)
        .map_err(|e| format!("the event is not an API Gateway HTTP API event: {e}"))?;
    let response = respond(ctx, route, request).await;
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

/// Runs every scheduled function every `every`, as EventBridge would, with "now" as the event's
/// time.
pub async fn schedule(ctx: Ctx, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let now = singlet_functions::clock::iso(singlet_functions::clock::now());
        for scheduled in singlet_functions::routes::SCHEDULED {
            let event =
                json!({"time": now, "detail-type": "Scheduled Event", "source": "aws.events"});
            if let Err(error) = (scheduled.handler)(&ctx, event, None).await {
                tracing::warn!(
                    function = scheduled.function,
                    error,
                    "a scheduled run failed; the next one retries"
                );
            }
        }
    }
}
