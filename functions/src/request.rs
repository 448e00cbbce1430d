//! What happens to every request, on Lambda and locally, in one place: the route being served is
//! named for the handler, the contract's body rules are checked, the handler runs with a meter on
//! the capacity it consumes, an error becomes its problem document, and one log line says how it
//! went.

use crate::context::Ctx;
use crate::http::{ServedRoute, check_body};
use crate::routes::Route;
use crate::store::capacity::{Consumed, metered};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use std::time::Instant;
use tracing::{Instrument, info, info_span};

/// A response, and the capacity its request consumed.
pub struct Answer {
    pub response: Response<Body>,
    pub consumed: Consumed,
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
    });
    let span = info_span!("request", route = %route.key(), %request_id);
    async move {
        let started = Instant::now();
        let (outcome, consumed) = metered(async {
            check_body(&req)?;
            (route.handler)(ctx, req).await
        })
        .await;
        let response = match outcome {
            Ok(response) => response,
            Err(error) => {
                info!(status = error.status().as_u16(), error = ?error, "request refused");
                error.into_response()
            }
        };
        info!(
            status = response.status().as_u16(),
            latency_ms = started.elapsed().as_millis() as u64,
            read_units = consumed.read_units,
            write_units = consumed.write_units,
            "request handled"
        );
        Answer { response, consumed }
    }
    .instrument(span)
    .await
}
