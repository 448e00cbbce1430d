//! `singlet-tools-lambda`, the stack's tools function (`table-tools`): each invocation one
//! segment of a table tool, as an item of the tools state machine's distributed map hands it
//! ([`singlet_tools::segment`]); the answer is the segment's report. One invocation at a time
//! on a `current_thread` runtime: a segment's own work is one sequence of pages.

use singlet_functions::Ctx;

fn main() -> Result<(), lambda_runtime::Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

async fn run() -> Result<(), lambda_runtime::Error> {
    singlet_functions::lambda::init_tracing();
    // A segment signs no cursor and derives no id: the tools function holds no server keys.
    // fsck's judge (the check function, given SERVER_SECRET_ARN) reads them, as the API's
    // functions do: where a subject's one-account lock is keyed is the owner key's.
    let holds_keys =
        std::env::var(singlet_functions::secret::SERVER_SECRET_VAR).is_ok_and(|id| !id.is_empty());
    let ctx = match Ctx::from_lambda_env(holds_keys).await {
        // A segment's page and its writes get the tools' budget, not an API request's 4 s.
        Ok(mut ctx) => {
            ctx.db = singlet_tools::budget::for_bulk_work(&ctx.db);
            &*Box::leak(Box::new(ctx))
        }
        Err(error) => {
            tracing::error!(error, "cannot start");
            return Err(error.into());
        }
    };
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| async move {
            let deadline = stop_before(event.context.deadline);
            let answer = singlet_tools::segment::handle(ctx, event.payload, Some(deadline)).await;
            match &answer {
                Ok(report) => tracing::info!(report = %report, "segment done"),
                Err(error) => tracing::warn!(error, "segment failed"),
            }
            answer.map_err(lambda_runtime::Error::from)
        },
    ))
    .await
}

/// When a segment stops between pages: a minute before Lambda's `deadline` (milliseconds since
/// the epoch), or half way to it when less is left. A page and its writes take well under a
/// minute at any `maxWcu` the guide gives; one that does not is killed by Lambda instead, and the
/// state machine invokes it again all the same (`Sandbox.Timedout`).
fn stop_before(deadline_ms: u64) -> std::time::Instant {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let left = deadline_ms.saturating_sub(now_ms);
    let margin = if left > 120_000 { 60_000 } else { left / 2 };
    std::time::Instant::now() + std::time::Duration::from_millis(left - margin)
}
