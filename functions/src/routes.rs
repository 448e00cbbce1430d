//! The route table: method, path and function name, once. The Lambda binaries, the local runner
//! and the tests that compare `template.yaml`, `events/` and the README all read it.

use crate::db::Ctx;
use crate::http::{HandlerResult, check_body};
use crate::{accounts, audit, fleet, library, loans};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;
use tracing::{Instrument, info, info_span};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
pub type Handler = for<'a> fn(&'a Ctx, Request) -> BoxFuture<'a, HandlerResult>;

/// Turns an access pattern's `async fn handle(&Ctx, Request)` into a [`Handler`].
#[macro_export]
macro_rules! handler {
    ($handle:path) => {{
        fn handler<'a>(
            ctx: &'a $crate::db::Ctx,
            req: ::lambda_http::Request,
        ) -> $crate::routes::BoxFuture<'a, $crate::http::HandlerResult> {
            Box::pin($handle(ctx, req))
        }
        handler as $crate::routes::Handler
    }};
}

pub struct Route {
    /// The Lambda function's name, its binary's name and its event file's name.
    pub function: &'static str,
    pub method: &'static str,
    /// API Gateway's path template: `/vehicles/{vehicleId}`.
    pub path: &'static str,
    pub handler: Handler,
    /// The DynamoDB actions the function calls: its least-privilege policy in `template.yaml`.
    pub permissions: &'static [&'static str],
}

macro_rules! route {
    ($function:literal, $method:literal, $path:literal, $handle:path, [$($action:literal),*]) => {
        Route {
            function: $function,
            method: $method,
            path: $path,
            handler: handler!($handle),
            permissions: &[$(concat!("dynamodb:", $action)),*],
        }
    };
}

#[rustfmt::skip]
pub static ROUTES: &[Route] = &[
    // Fleet registry
    route!("register-vehicle", "POST", "/vehicles", fleet::register_vehicle::handle, ["GetItem", "PutItem"]),
    route!("get-vehicle", "GET", "/vehicles/{vehicleId}", fleet::get_vehicle::handle, ["GetItem"]),
    route!("find-by-plate", "GET", "/plates/{plate}", fleet::find_by_plate::handle, ["GetItem"]),
    route!("find-by-chassis", "GET", "/chassis/{chassis}", fleet::find_by_chassis::handle, ["GetItem"]),
    route!("change-plate", "PUT", "/vehicles/{vehicleId}/plate", fleet::change_plate::handle, ["GetItem", "PutItem", "DeleteItem", "UpdateItem"]),
    route!("retire-vehicle", "DELETE", "/vehicles/{vehicleId}", fleet::retire_vehicle::handle, ["GetItem", "DeleteItem"]),
    // Accounts
    route!("create-account", "POST", "/accounts", accounts::create_account::handle, ["GetItem", "PutItem"]),
    route!("get-account", "GET", "/accounts/{accountId}", accounts::get_account::handle, ["GetItem"]),
    route!("change-email", "PUT", "/accounts/{accountId}/email", accounts::change_email::handle, ["GetItem", "PutItem", "DeleteItem", "UpdateItem"]),
    route!("change-username", "PUT", "/accounts/{accountId}/username", accounts::change_username::handle, ["GetItem", "PutItem", "DeleteItem", "UpdateItem"]),
    route!("delete-account", "DELETE", "/accounts/{accountId}", accounts::delete_account::handle, ["GetItem", "DeleteItem"]),
    // Change & audit log
    route!("create-resource", "POST", "/resources", audit::create_resource::handle, ["GetItem", "PutItem"]),
    route!("get-resource", "GET", "/resources/{resourceId}", audit::get_resource::handle, ["GetItem"]),
    route!("resource-history", "GET", "/resources/{resourceId}/history", audit::resource_history::handle, ["Query", "GetItem"]),
    route!("change-resource", "PATCH", "/resources/{resourceId}", audit::change_resource::handle, ["GetItem", "UpdateItem", "PutItem"]),
    // Library catalogue
    route!("create-branch", "POST", "/branches", library::create_branch::handle, ["GetItem", "PutItem"]),
    route!("get-branch", "GET", "/branches/{branchId}", library::get_branch::handle, ["GetItem"]),
    route!("register-patron", "POST", "/branches/{branchId}/patrons", library::register_patron::handle, ["ConditionCheckItem", "GetItem", "PutItem"]),
    route!("list-patrons", "GET", "/branches/{branchId}/patrons", library::list_patrons::handle, ["Query", "GetItem"]),
    route!("get-patron", "GET", "/patrons/{patronId}", library::get_patron::handle, ["Query"]),
    route!("find-by-card", "GET", "/cards/{cardNumber}", library::find_by_card::handle, ["GetItem"]),
    route!("create-book", "POST", "/books", library::create_book::handle, ["GetItem", "PutItem"]),
    route!("get-book", "GET", "/books/{isbn}", library::get_book::handle, ["GetItem"]),
    route!("add-copy", "POST", "/branches/{branchId}/copies", library::add_copy::handle, ["ConditionCheckItem", "GetItem", "PutItem"]),
    route!("list-copies", "GET", "/branches/{branchId}/copies", library::list_copies::handle, ["Query", "GetItem"]),
    route!("book-availability", "GET", "/books/{isbn}/availability", library::book_availability::handle, ["Query", "GetItem"]),
    // Library loans
    route!("checkout-book", "POST", "/checkouts", loans::checkout_book::handle, ["Query", "GetItem", "PutItem", "UpdateItem", "ConditionCheckItem"]),
    route!("active-checkouts", "GET", "/patrons/{patronId}/checkouts", loans::active_checkouts::handle, ["Query"]),
    route!("return-book", "POST", "/patrons/{patronId}/checkouts/{checkoutId}/return", loans::return_book::handle, ["GetItem", "DeleteItem", "PutItem", "UpdateItem"]),
    route!("renew-checkout", "POST", "/patrons/{patronId}/checkouts/{checkoutId}/renew", loans::renew_checkout::handle, ["GetItem", "UpdateItem"]),
    route!("find-overdue", "GET", "/branches/{branchId}/overdue", loans::find_overdue::handle, ["Query", "GetItem"]),
];

/// A function that no HTTP route serves: it runs on a schedule.
pub struct Scheduled {
    pub function: &'static str,
    pub permissions: &'static [&'static str],
}

pub static SCHEDULED: &[Scheduled] = &[Scheduled {
    function: crate::loans::mark_overdue::FUNCTION,
    permissions: &["dynamodb:Query", "dynamodb:UpdateItem"],
}];

impl Route {
    /// `POST /vehicles`: API Gateway's route key.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// The path parameters if `path` (percent-decoded segments) fits this route's template.
    pub fn matches(&self, method: &str, segments: &[String]) -> Option<HashMap<String, String>> {
        if method != self.method {
            return None;
        }
        let template: Vec<&str> = self.path.trim_start_matches('/').split('/').collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut params = HashMap::new();
        for (part, segment) in template.iter().zip(segments) {
            match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(name) if !segment.is_empty() => {
                    params.insert(name.to_owned(), segment.clone());
                }
                Some(_) => return None,
                None if part == segment => {}
                None => return None,
            }
        }
        Some(params)
    }
}

pub fn by_function(function: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.function == function)
}

/// Runs a handler and renders its outcome: the one place every request is logged.
pub async fn respond(ctx: &Ctx, handler: Handler, req: Request) -> Response<Body> {
    let (route, request_id) = match req.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(c)) => (
            c.route_key.clone().unwrap_or_default(),
            c.request_id.clone().unwrap_or_default(),
        ),
        _ => (String::new(), String::new()),
    };
    let span = info_span!("request", %route, %request_id);
    async move {
        let started = Instant::now();
        let outcome = match check_body(&req) {
            Ok(()) => handler(ctx, req).await,
            Err(refused) => Err(refused),
        };
        let response = match outcome {
            Ok(response) => response,
            Err(error) => {
                info!(status = error.status().as_u16(), error = ?error, "request refused");
                error.into_response()
            }
        };
        info!(
            status = response.status().as_u16(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "request handled"
        );
        response
    }
    .instrument(span)
    .await
}
