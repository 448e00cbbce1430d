//! What happens to every request, on Lambda and locally, in one place: the route being served is
//! named for the handler, the contract's body rules are checked, the handler runs with a meter on
//! the capacity it consumes, an error becomes its problem document, and one log line says how it
//! went.

use crate::claims::Principal;
use crate::context::Ctx;
use crate::error::{ApiError, Code};
use crate::http::{ServedRoute, check_body};
use crate::routes::Route;
use crate::store::capacity::{Consumed, metered};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use std::time::Instant;
use tracing::{Instrument, info, info_span};

/// A response, the capacity its request consumed, and the field error codes it refused the
/// request with (`taken`, `limit_reached`; none for an answer that is not a `400` or `409`), so
/// that nothing reads them back out of the problem document.
pub struct Answer {
    pub response: Response<Body>,
    pub consumed: Consumed,
    pub codes: Vec<Code>,
}

/// Serves `req` with `route`'s handler.
pub async fn respond(ctx: &Ctx, route: &'static Route, req: Request) -> Response<Body> {
    answer(ctx, route, req).await.response
}

/// Serves `req` with `route`'s handler, and says what it consumed.
pub async fn answer(ctx: &Ctx, route: &'static Route, mut req: Request) -> Answer {
    let request_id = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(c)) => c.request_id.clone().unwrap_or_default(),
        _ => String::new(),
    };
    req.extensions_mut().insert(ServedRoute {
        function: route.function,
        idempotent: route.idempotent,
        paged: route.paged,
        tombstones: route.access.tombstones,
    });
    let principal = Principal::from_request(&req);
    let subject = principal
        .as_ref()
        .map(|p| p.subject.clone())
        .unwrap_or_default();
    let span = info_span!("request", route = %route.key(), %request_id, %subject);
    async move {
        let started = Instant::now();
        let (outcome, consumed) = metered(async move {
            // The authorizer has already checked both; a function deployed without it, or
            // reached around it, still serves no one it should not.
            match &principal {
                None => return Err(ApiError::Unauthorized),
                Some(p) if !p.has_any_scope(route.scopes) => return Err(ApiError::Forbidden),
                Some(p) => req.extensions_mut().insert(p.clone()),
            };
            check_body(&req)?;
            // Whatever the handler was waiting for is dropped with it: an engine call in
            // flight may still commit, as after the SDK's own timeout, which is why a `503`
            // says "retry" (with the same `Idempotency-Key`), never "nothing was written".
            let handled = ctx.clock.run((route.handler)(ctx, req));
            // The context's deadline, or less when the Lambda invocation serving the request
            // must be answered sooner: each invocation's own, however many run at once.
            let deadline = crate::invocation::request_deadline(ctx.deadline);
            match tokio::time::timeout(deadline, handled).await {
                Ok(answered) => answered,
                Err(_) => {
                    tracing::warn!(
                        deadline_ms = deadline.as_millis() as u64,
                        "request deadline passed"
                    );
                    Err(ApiError::Unavailable)
                }
            }
        })
        .await;
        let (response, codes) = match outcome {
            Ok(response) => (response, Vec::new()),
            Err(error) => {
                info!(status = error.status().as_u16(), error = ?error, "request refused");
                let codes = error.codes();
                (error.into_response(), codes)
            }
        };
        info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_millis() as u64,
            read_units = consumed.read_units,
            write_units = consumed.write_units,
            "request handled"
        );
        Answer {
            response,
            consumed,
            codes,
        }
    }
    .instrument(span)
    .await
}
