//! `singlet invoke <function> --event <file>`: one function, once, on one event file (the files
//! `sam local invoke` takes), printing the function's response as Lambda would return it.

use lambda_http::Body;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::loans::mark_overdue::{self, PAGE_SIZE, ScheduledEvent, event_time};
use singlet_functions::routes::{by_function, respond};

pub async fn invoke(ctx: &Ctx, function: &str, event: &str) -> Result<Value, String> {
    if function == mark_overdue::FUNCTION {
        let event: ScheduledEvent = serde_json::from_str(event)
            .map_err(|e| format!("the event is not an EventBridge scheduled event: {e}"))?;
        let report = mark_overdue::mark_overdue(ctx, event_time(&event)?, PAGE_SIZE, || true)
            .await
            .map_err(|e| format!("mark-overdue failed: {e:?}"))?;
        return Ok(json!(report));
    }
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

/// Runs `mark-overdue` every `every`, as EventBridge would, with "now" as the event's time.
pub async fn schedule_mark_overdue(ctx: Ctx, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let now = time::OffsetDateTime::now_utc();
        if let Err(error) = mark_overdue::mark_overdue(&ctx, now, PAGE_SIZE, || true).await {
            tracing::warn!(
                ?error,
                "the scheduled mark-overdue run failed; the next one retries"
            );
        }
    }
}
