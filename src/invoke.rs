//! `singlet invoke <function> --event <file>`: one function, once, on one event file (the files
//! `sam local invoke` takes), printing the function's response as Lambda would return it.

use crate::serve::iam::serving;
use lambda_http::Body;
use serde_json::{Value, json};
use singlet_functions::Ctx;
use singlet_functions::request::respond;
use singlet_functions::routes::{ROUTES, SCHEDULED, STREAMED, by_function, scheduled, streamed};
use singlet_tools::segment::FUNCTION as TOOLS;

/// Every function `invoke` runs, one a line: its name, then its route or its schedule, then
/// what it does.
pub fn list() -> String {
    let width = ROUTES
        .iter()
        .map(|r| r.function.len())
        .chain(SCHEDULED.iter().map(|s| s.function.len()))
        .chain(STREAMED.iter().map(|s| s.function.len()))
        .max()
        .unwrap_or(0);
    let key_width = ROUTES.iter().map(|r| r.key().len()).max().unwrap_or(0);
    let mut text = String::new();
    for route in ROUTES {
        let key = route.key();
        text += &format!(
            "{:width$}  {key:key_width$}  {}\n",
            route.function, route.summary
        );
    }
    for scheduled in SCHEDULED {
        text += &format!(
            "{:width$}  {:key_width$}  {}\n",
            scheduled.function, "(scheduled)", scheduled.summary
        );
    }
    for streamed in STREAMED {
        text += &format!(
            "{:width$}  {:key_width$}  {}\n",
            streamed.function, "(stream)", streamed.summary
        );
    }
    text += &format!(
        "{:width$}  {:key_width$}  {}\n",
        TOOLS,
        "(state machine)",
        "One segment of a table tool (migrate and its survey, fsck and its judge), its own bootstrap"
    );
    text
}

/// `Ok` when a function has that name; else an error naming the closest names.
pub fn check_function(function: &str) -> Result<(), String> {
    if by_function(function).is_some()
        || scheduled(function).is_some()
        || streamed(function).is_some()
        || function == TOOLS
    {
        return Ok(());
    }
    let names = ROUTES
        .iter()
        .map(|r| r.function)
        .chain(SCHEDULED.iter().map(|s| s.function))
        .chain(STREAMED.iter().map(|s| s.function))
        .chain([TOOLS]);
    let mut close: Vec<(usize, &str)> = names
        .map(|name| (edit_distance(function, name), name))
        .filter(|(distance, name)| {
            *distance <= (name.len() / 3).max(2) || name.contains(function) && function.len() >= 3
        })
        .collect();
    close.sort();
    let suggestion = match close.as_slice() {
        [] => String::new(),
        [(_, one)] => format!("; did you mean {one}?"),
        more => {
            let names: Vec<&str> = more.iter().take(3).map(|(_, name)| *name).collect();
            format!("; did you mean one of {}?", names.join(", "))
        }
    };
    Err(format!(
        "no function named {function}{suggestion} (`invoke --list` lists them)"
    ))
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The route an HTTP API event was made for (its `routeKey`, else its method and path), when
/// that is not `function`'s: Lambda runs a function on any event, and so does `invoke`, but the
/// answer is then seldom what was meant.
pub fn other_route(function: &str, event: &Value) -> Option<String> {
    let own = by_function(function)?;
    let key = match event["routeKey"].as_str() {
        Some(key) if key != "$default" => key.to_owned(),
        _ => {
            let method = event["requestContext"]["http"]["method"].as_str()?;
            let path = event["rawPath"].as_str()?;
            let segments = crate::serve::front_door::segments(path);
            singlet_functions::routes::find(method, &segments)?.0.key()
        }
    };
    (key != own.key()).then_some(key)
}

/// `event` as a scheduled `function` is handed it when its schedule fires at `at`: its `time` is
/// `at`, as EventBridge's would be. A scheduled function's "now" is its event's time (at most its
/// clock plus 5 minutes), so `invoke --clock` would otherwise move the clock but not the run.
/// Any other function's event is left as it is.
pub fn fired_at(function: &str, event: String, at: time::OffsetDateTime) -> Result<String, String> {
    if scheduled(function).is_none() {
        return Ok(event);
    }
    let mut parsed: Value =
        serde_json::from_str(&event).map_err(|e| format!("the event is not JSON: {e}"))?;
    let Some(fields) = parsed.as_object_mut() else {
        return Err("a scheduled event is a JSON object".into());
    };
    fields.insert("time".into(), singlet_functions::clock::iso(at).into());
    Ok(parsed.to_string())
}

pub async fn invoke(ctx: &Ctx, function: &str, event: &str) -> Result<Value, String> {
    check_function(function)?;
    let parsed: Value =
        serde_json::from_str(event).map_err(|e| format!("the event is not JSON: {e}"))?;
    if let Some(scheduled) = scheduled(function) {
        return serving(scheduled.function, (scheduled.handler)(ctx, parsed, None))
            .await
            .map(|report| report.to_json());
    }
    if let Some(streamed) = streamed(function) {
        return serving(streamed.function, (streamed.handler)(ctx, parsed, None)).await;
    }
    if function == TOOLS {
        // Locally one name serves both tools functions; each event is held to the policy of
        // the function the state machine would invoke with it (fsck's judge: the check one).
        let as_function = match parsed["tool"].as_str() {
            Some(singlet_tools::segment::JUDGE_TOOL) => singlet_tools::segment::CHECK_FUNCTION,
            _ => TOOLS,
        };
        // Boxed: a segment's future is large, and a caller's stack need not hold it.
        return serving(
            as_function,
            Box::pin(singlet_tools::segment::handle(ctx, parsed, None)),
        )
        .await;
    }
    let route = by_function(function).expect("checked");
    if let Some(other) = other_route(function, &parsed) {
        tracing::warn!(
            function,
            event_route = %other,
            function_route = %route.key(),
            "the event is for another route than the function's; running it anyway, as Lambda would"
        );
    }
    let request = lambda_http::request::from_str(event)
        .map_err(|e| format!("the event is not an API Gateway HTTP API event: {e}"))?;
    let response = serving(route.function, respond(ctx, route, request)).await;
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
            let run = serving(scheduled.function, (scheduled.handler)(&ctx, event, None));
            if let Err(error) = run.await {
                tracing::warn!(
                    function = scheduled.function,
                    error,
                    "a scheduled run failed; the next one retries"
                );
            }
        }
    }
}
