//! The route table: every function, declared once, with what it touches ([`Access`]). The one
//! Lambda binary (serving the entry its `SINGLET_FUNCTION` names), the local runner, `invoke`
//! and the tests read it; `cargo run -- render` renders from it each function's block of
//! `template.yaml` (its policy, `SINGLET_FUNCTION`, its events) and the `Cargo.toml` watch router.

use crate::access::{Access, Grant};
use crate::context::Ctx;
use crate::http::HandlerResult;
use crate::model::accounts::{AccountRow, EmailLock, OwnerLock, UsernameLock};
use crate::model::audit::{Resource, ResourceEvent};
use crate::model::fleet::{ChassisLock, PlateLock, Vehicle};
use crate::model::idempotency::IdLock;
use crate::model::library::{Book, BookAvailability, Branch, Copy as BookCopy, Patron, PatronCard};
use crate::model::loans::{Checkout, MarkerRun};
use crate::{accounts, audit, fleet, library, loans};
use lambda_http::Request;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
pub type Handler = for<'a> fn(&'a Ctx, Request) -> BoxFuture<'a, HandlerResult>;
/// A scheduled function: its context, the event, and the deadline to stop before (none locally).
pub type ScheduledHandler = for<'a> fn(
    &'a Ctx,
    serde_json::Value,
    Option<SystemTime>,
) -> BoxFuture<'a, Result<Box<dyn RunReport>, String>>;

/// A stream-fed function: its context, the stream event, and the deadline; it answers the
/// partial batch response (`batchItemFailures`) as JSON.
pub type StreamedHandler = for<'a> fn(
    &'a Ctx,
    serde_json::Value,
    Option<SystemTime>,
) -> BoxFuture<'a, Result<serde_json::Value, String>>;

pub use crate::report::RunReport;

/// Turns an access pattern's `async fn handle(&Ctx, Request)` into a [`Handler`].
macro_rules! handler {
    ($handle:path) => {{
        fn handler<'a>(ctx: &'a Ctx, req: Request) -> BoxFuture<'a, HandlerResult> {
            Box::pin($handle(ctx, req))
        }
        handler as Handler
    }};
}

pub struct Route {
    /// The Lambda function's name (its `SINGLET_FUNCTION`) and its event file's name.
    pub function: &'static str,
    pub method: &'static str,
    /// API Gateway's path template: `/vehicles/{vehicleId}`.
    pub path: &'static str,
    /// What the access pattern is for, in one line.
    pub summary: &'static str,
    /// A token needs one of these scopes (API Gateway's `AuthorizationScopes`).
    pub scopes: &'static [&'static str],
    /// Whether the route takes an `Idempotency-Key` (its records are `IDEMPOTENCY#<function>#…`).
    pub idempotent: bool,
    /// Whether it answers pages (`nextCursor`), whose cursors it signs and verifies.
    pub paged: bool,
    /// What it touches: its least-privilege policy in `template.yaml`.
    pub access: Access,
    pub handler: Handler,
}

/// An [`Access`] declared in a line: `table [GetItem, UpdateItem] on [Vehicle]` once or more
/// (some table actions and the entities they reach; one clause per set of actions, so that each
/// entity gets only the actions called on it), `indexes [GSI1]`, `events [VehicleRegistered]`,
/// `tombstones "register-vehicle"`, each optional, in that order.
macro_rules! access {
    (@creator) => { None };
    (@creator $creator:literal) => { Some($creator) };
    ($(table [$($action:ident),+] on [$($entity:ident),+] $(,)?)*
     $(indexes [$($index:ident),+] $(,)?)?
     $(events [$($event:ident),+] $(,)?)?
     $(tombstones $creator:literal)?) => {
        Access {
            table: &[$($crate::access::Reach {
                actions: &[$($crate::access::Action::$action),+],
                entities: &[$(<$entity as $crate::model::Entity>::TYPE),+],
            }),*],
            indexes: &[$($(singlet_shared::schema::$index),+)?],
            events: &[$($($crate::events::EventType::$event),+)?],
            tombstones: access!(@creator $($creator)?),
            grants: &[],
        }
    };
}

macro_rules! route {
    ($function:literal, $method:literal $path:literal, $handle:path,
     $summary:literal, scopes [$($scope:literal),+], idempotent: $idempotent:literal,
     paged: $paged:literal, $($access:tt)*) => {
        Route {
            function: $function,
            method: $method,
            path: $path,
            summary: $summary,
            scopes: &[$($scope),+],
            idempotent: $idempotent,
            paged: $paged,
            access: access!($($access)*),
            handler: handler!($handle),
        }
    };
}

#[rustfmt::skip]
pub static ROUTES: &[Route] = &[
    // Fleet registry
    route!("register-vehicle", "POST" "/vehicles", fleet::register_vehicle::handle,
        "Register a vehicle, claiming its plate and chassis number", scopes ["fleet:write"], idempotent: true, paged: false,
        table [PutItem] on [Vehicle, PlateLock, ChassisLock, IdLock], table [ConditionCheckItem] on [PlateLock, ChassisLock], events [VehicleRegistered]),
    route!("get-vehicle", "GET" "/vehicles/{vehicleId}", fleet::get_vehicle::handle,
        "Read a vehicle by id", scopes ["fleet:read", "fleet:write"], idempotent: false, paged: false,
        table [GetItem] on [Vehicle]),
    route!("find-by-plate", "GET" "/plates/{plate}", fleet::find_by_plate::handle,
        "Find the vehicle holding a plate", scopes ["fleet:read", "fleet:write"], idempotent: false, paged: false,
        table [GetItem] on [PlateLock]),
    route!("find-by-chassis", "GET" "/chassis/{chassis}", fleet::find_by_chassis::handle,
        "Find the vehicle holding a chassis number", scopes ["fleet:read", "fleet:write"], idempotent: false, paged: false,
        table [GetItem] on [ChassisLock]),
    route!("depot-vehicles", "GET" "/depots/{depot}/vehicles", fleet::depot_vehicles::handle,
        "List a depot's vehicles, newest first", scopes ["fleet:read", "fleet:write"], idempotent: false, paged: true,
        indexes [GSI5]),
    route!("change-plate", "PUT" "/vehicles/{vehicleId}/plate", fleet::change_plate::handle,
        "Move a vehicle to a new plate, freeing the old one", scopes ["fleet:write"], idempotent: false, paged: false,
        table [GetItem, UpdateItem] on [Vehicle], table [GetItem, PutItem, DeleteItem, ConditionCheckItem] on [PlateLock], table [GetItem] on [ChassisLock], events [VehiclePlateChanged]),
    route!("retire-vehicle", "DELETE" "/vehicles/{vehicleId}", fleet::retire_vehicle::handle,
        "Retire a vehicle and free its plate and chassis number", scopes ["fleet:write"], idempotent: false, paged: false,
        table [GetItem, DeleteItem] on [Vehicle, PlateLock, ChassisLock], events [VehicleRetired], tombstones "register-vehicle"),
    // Accounts
    route!("create-account", "POST" "/accounts", accounts::create_account::handle,
        "Create an account, claiming its email and username", scopes ["accounts:self", "accounts:admin"], idempotent: true, paged: false,
        table [PutItem] on [AccountRow, EmailLock, UsernameLock, OwnerLock, IdLock], events [AccountCreated]),
    route!("get-account", "GET" "/accounts/{accountId}", accounts::get_account::handle,
        "Read an account", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem] on [AccountRow]),
    route!("change-email", "PUT" "/accounts/{accountId}/email", accounts::change_email::handle,
        "Change an account's email, freeing the old one", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem, UpdateItem] on [AccountRow], table [PutItem, DeleteItem] on [EmailLock], events [AccountEmailChanged]),
    route!("change-username", "PUT" "/accounts/{accountId}/username", accounts::change_username::handle,
        "Change an account's username, freeing the old one", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem, UpdateItem] on [AccountRow], table [PutItem, DeleteItem] on [UsernameLock], events [AccountUsernameChanged]),
    route!("delete-account", "DELETE" "/accounts/{accountId}", accounts::delete_account::handle,
        "Delete an account and free its email and username", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem, DeleteItem] on [AccountRow], table [DeleteItem] on [EmailLock, UsernameLock, OwnerLock], events [AccountDeleted], tombstones "create-account"),
    route!("check-email", "GET" "/emails/{email}", accounts::check_email::handle,
        "Tell whether an email is free to sign up with", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem] on [EmailLock]),
    route!("check-username", "GET" "/usernames/{username}", accounts::check_username::handle,
        "Tell whether a username is free to sign up with", scopes ["accounts:self", "accounts:admin"], idempotent: false, paged: false,
        table [GetItem] on [UsernameLock]),
    // Change & audit log
    route!("create-resource", "POST" "/resources", audit::create_resource::handle,
        "Create a resource with its first history event", scopes ["audit:write"], idempotent: true, paged: false,
        table [PutItem] on [Resource, ResourceEvent], events [ResourceCreated]),
    route!("get-resource", "GET" "/resources/{resourceId}", audit::get_resource::handle,
        "Read a resource's current state and version", scopes ["audit:read", "audit:write"], idempotent: false, paged: false,
        table [GetItem] on [Resource]),
    route!("resource-history", "GET" "/resources/{resourceId}/history", audit::resource_history::handle,
        "Read a resource's state and a page of its history", scopes ["audit:read", "audit:write"], idempotent: false, paged: true,
        table [GetItem, Query] on [Resource], table [Query] on [ResourceEvent]),
    route!("change-resource", "PATCH" "/resources/{resourceId}", audit::change_resource::handle,
        "Change a resource if it is still at the version read", scopes ["audit:write"], idempotent: false, paged: false,
        table [GetItem, UpdateItem] on [Resource], table [PutItem] on [ResourceEvent], events [ResourceChanged]),
    // Library catalogue
    route!("create-branch", "POST" "/branches", library::create_branch::handle,
        "Open a branch", scopes ["library:staff"], idempotent: true, paged: false,
        table [PutItem] on [Branch], events [BranchCreated]),
    route!("list-branches", "GET" "/branches", library::list_branches::handle,
        "List every branch", scopes ["library:read", "library:staff"], idempotent: false, paged: true,
        indexes [GSI1]),
    route!("get-branch", "GET" "/branches/{branchId}", library::get_branch::handle,
        "Read a branch", scopes ["library:read", "library:staff"], idempotent: false, paged: false,
        table [GetItem] on [Branch]),
    route!("register-patron", "POST" "/branches/{branchId}/patrons", library::register_patron::handle,
        "Register a patron at a branch, claiming the card number", scopes ["library:staff"], idempotent: true, paged: false,
        table [ConditionCheckItem] on [Branch], table [PutItem] on [Patron, PatronCard, IdLock], events [PatronRegistered]),
    route!("list-patrons", "GET" "/branches/{branchId}/patrons", library::list_patrons::handle,
        "List a branch's patrons", scopes ["library:staff"], idempotent: false, paged: true,
        table [GetItem, Query] on [Branch], table [Query] on [Patron]),
    route!("get-patron", "GET" "/patrons/{patronId}", library::get_patron::handle,
        "Read a patron by id", scopes ["library:staff", "library:patron"], idempotent: false, paged: false,
        indexes [GSI1]),
    route!("reissue-card", "PUT" "/patrons/{patronId}/card", library::reissue_card::handle,
        "Give a patron a new library card, freeing the old one", scopes ["library:staff"], idempotent: false, paged: false,
        table [UpdateItem] on [Patron], table [PutItem, DeleteItem] on [PatronCard], indexes [GSI1], events [PatronCardReissued]),
    route!("change-tier", "PUT" "/patrons/{patronId}/tier", library::change_tier::handle,
        "Change a patron's membership tier and loan limit", scopes ["library:staff"], idempotent: false, paged: false,
        table [UpdateItem] on [Patron], indexes [GSI1], events [PatronTierChanged]),
    route!("remove-patron", "DELETE" "/patrons/{patronId}", library::remove_patron::handle,
        "Remove a patron without active loans and free its card", scopes ["library:staff"], idempotent: false, paged: false,
        table [DeleteItem] on [Patron, PatronCard], indexes [GSI1], events [PatronRemoved], tombstones "register-patron"),
    route!("find-by-card", "GET" "/cards/{cardNumber}", library::find_by_card::handle,
        "Find the patron holding a library card", scopes ["library:staff"], idempotent: false, paged: false,
        table [GetItem] on [PatronCard]),
    route!("create-book", "POST" "/books", library::create_book::handle,
        "Add a book to the catalogue by ISBN", scopes ["library:staff"], idempotent: true, paged: false,
        table [PutItem] on [Book], events [BookAdded]),
    route!("get-book", "GET" "/books/{isbn}", library::get_book::handle,
        "Read a book by ISBN", scopes ["library:read", "library:staff"], idempotent: false, paged: false,
        table [GetItem] on [Book]),
    route!("correct-book", "PATCH" "/books/{isbn}", library::correct_book::handle,
        "Correct a book's catalogue entry", scopes ["library:staff"], idempotent: false, paged: false,
        table [GetItem, UpdateItem] on [Book], events [BookCorrected]),
    route!("add-copy", "POST" "/branches/{branchId}/copies", library::add_copy::handle,
        "Add a copy of a book to a branch", scopes ["library:staff"], idempotent: true, paged: false,
        table [GetItem] on [Book, Branch], table [ConditionCheckItem] on [Branch], table [PutItem] on [BookCopy, IdLock], table [UpdateItem] on [BookAvailability], events [CopyAdded]),
    route!("list-copies", "GET" "/branches/{branchId}/copies", library::list_copies::handle,
        "List a branch's copies", scopes ["library:read", "library:staff"], idempotent: false, paged: true,
        table [GetItem, Query] on [Branch], table [Query] on [BookCopy]),
    route!("book-availability", "GET" "/books/{isbn}/availability", library::book_availability::handle,
        "Count a book's available copies per branch", scopes ["library:read", "library:staff"], idempotent: false, paged: false,
        table [Query] on [BookAvailability]),
    route!("available-copies", "GET" "/branches/{branchId}/books/{isbn}/copies", library::available_copies::handle,
        "List a book's copies on the shelf at one branch", scopes ["library:read", "library:staff"], idempotent: false, paged: true,
        table [GetItem] on [Branch, Book], indexes [GSI2]),
    // Library loans
    route!("checkout-book", "POST" "/checkouts", loans::checkout_book::handle,
        "Lend a copy to a patron", scopes ["library:staff"], idempotent: true, paged: false,
        table [GetItem] on [Book], table [GetItem, UpdateItem] on [BookCopy], table [UpdateItem] on [Patron, BookAvailability], table [PutItem] on [Checkout, IdLock], indexes [GSI1], events [LoanCheckedOut]),
    route!("active-checkouts", "GET" "/patrons/{patronId}/checkouts", loans::active_checkouts::handle,
        "List a patron's active loans", scopes ["library:staff", "library:patron"], idempotent: false, paged: true,
        table [Query] on [Checkout], indexes [GSI1]),
    route!("return-book", "POST" "/patrons/{patronId}/checkouts/{checkoutId}/return", loans::return_book::handle,
        "Return a loan, freeing the copy and the patron's slot", scopes ["library:staff"], idempotent: true, paged: false,
        table [GetItem, DeleteItem, PutItem] on [Checkout], table [UpdateItem] on [Patron, BookCopy, BookAvailability], events [LoanReturned]),
    route!("renew-checkout", "POST" "/patrons/{patronId}/checkouts/{checkoutId}/renew", loans::renew_checkout::handle,
        "Renew a loan that is not yet due", scopes ["library:staff", "library:patron"], idempotent: true, paged: false,
        table [GetItem, UpdateItem] on [Checkout], events [LoanRenewed]),
    route!("get-checkout", "GET" "/patrons/{patronId}/checkouts/{checkoutId}", loans::get_checkout::handle,
        "Read one loan, active or returned", scopes ["library:staff", "library:patron"], idempotent: false, paged: false,
        table [GetItem] on [Checkout]),
    route!("loan-history", "GET" "/patrons/{patronId}/history", loans::loan_history::handle,
        "List a patron's returned loans, newest return first", scopes ["library:staff", "library:patron"], idempotent: false, paged: true,
        indexes [GSI1]),
    route!("find-overdue", "GET" "/branches/{branchId}/overdue", loans::find_overdue::handle,
        "List a branch's overdue loans, oldest due first", scopes ["library:staff"], idempotent: false, paged: true,
        table [GetItem] on [Branch, MarkerRun], indexes [GSI3]),
    route!("find-all-overdue", "GET" "/overdue", loans::find_all_overdue::handle,
        "List every branch's overdue loans, oldest due first", scopes ["library:staff"], idempotent: false, paged: true,
        table [GetItem] on [MarkerRun], indexes [GSI4]),
];

/// A function that no HTTP route serves: it runs on a schedule. Its rendered block sends failed
/// runs to the queue `<Function>Failures` and undeliverable events to
/// `<Function>ScheduleDeadLetters` (`MarkOverdueFailures`...), which `template.yaml` declares by
/// hand with their alarm.
pub struct Scheduled {
    pub function: &'static str,
    pub summary: &'static str,
    /// How often EventBridge runs it (its `rate(…)`), in minutes.
    pub every_minutes: u32,
    /// Its Lambda timeout: the deadline its runs stop before.
    pub timeout_seconds: u32,
    pub access: Access,
    pub handler: ScheduledHandler,
}

pub static SCHEDULED: &[Scheduled] = &[Scheduled {
    function: loans::mark_overdue::FUNCTION,
    summary: "Move every open loan that fell due into the overdue index",
    every_minutes: 15,
    timeout_seconds: 120,
    access: access!(table [UpdateItem] on [Checkout, MarkerRun], indexes [GSI1]),
    handler: |ctx, event, deadline| {
        Box::pin(async move {
            let report = loans::mark_overdue::run(ctx, event, deadline).await?;
            Ok(Box::new(report) as Box<dyn RunReport>)
        })
    },
}];

/// A function the table's stream feeds, through an event-source mapping (`template.yaml`; the
/// runner plays it, `src/serve/event_source.rs`). Its handler takes the stream event and answers the
/// partial batch response. Its rendered mapping sends what keeps failing to the queue
/// `<Function>Failures` (`PublishEventsFailures`), which `template.yaml` declares by hand with its
/// alarm; what it needs beyond the stream is a [`Grant`] in its `access`.
pub struct Streamed {
    pub function: &'static str,
    pub summary: &'static str,
    /// Its Lambda timeout.
    pub timeout_seconds: u32,
    /// Environment variables beyond every function's, as the template writes each value.
    pub environment: &'static [(&'static str, &'static str)],
    /// What it touches beyond reading the stream (which the mapping's policy grants).
    pub access: Access,
    pub handler: StreamedHandler,
}

pub static STREAMED: &[Streamed] = &[Streamed {
    function: "publish-events",
    summary: "Publish every change's domain event to EventBridge",
    timeout_seconds: 60,
    environment: &[
        (crate::context::EVENT_BUS_VAR, "!Ref EventBus"),
        (crate::context::ARCHIVE_BUCKET_VAR, "!Ref ArchiveBucket"),
    ],
    access: Access {
        grants: &[
            Grant {
                why: "The stack's own bus, nothing else (by its name: its policy names this role, so the role cannot name it back).",
                actions: &["events:PutEvents"],
                resource: "!Sub \"arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/${AWS::StackName}-events\"",
            },
            Grant {
                why: "Retention's archive of what TTL deleted: new objects in that bucket, nothing else.",
                actions: &["s3:PutObject"],
                resource: "!Sub \"${ArchiveBucket.Arn}/*\"",
            },
        ],
        ..Access::NONE
    },
    handler: |ctx, event, deadline| Box::pin(crate::publish_events::run(ctx, event, deadline)),
}];

/// The functions the library desk and the overdue marker cannot do without: the template
/// reserves each `CriticalReservedConcurrency` (none by default).
pub static CRITICAL: &[&str] = &["checkout-book", "return-book", "mark-overdue"];

impl Route {
    /// `POST /vehicles`: API Gateway's route key.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Whether the function needs the server's keys (the template's `ServerSecret`): to derive
    /// ids from `Idempotency-Key`s, to sign and verify cursors, or to key a subject's one-account
    /// lock. Only these functions are granted the secret and read it at cold start; every other
    /// one starts without it (docs/guide/deploy.md, "The server secret").
    pub fn holds_server_keys(&self) -> bool {
        use crate::model::Entity;
        self.idempotent || self.paged || self.access.entities().contains(&OwnerLock::TYPE)
    }

    /// The path parameters if `segments` (percent-decoded) fit this route's template.
    fn matches(&self, method: &str, segments: &[String]) -> Option<HashMap<String, String>> {
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

/// The route that serves `method` on `segments` (the path's percent-decoded segments), with its
/// path parameters: the one route matcher of the runner, the tests and the benches.
pub fn find(
    method: &str,
    segments: &[String],
) -> Option<(&'static Route, HashMap<String, String>)> {
    ROUTES.iter().find_map(|route| {
        route
            .matches(method, segments)
            .map(|params| (route, params))
    })
}

/// Every scope some route takes, sorted, once each: a token with all of them reaches every route.
pub fn all_scopes() -> Vec<&'static str> {
    let mut scopes: Vec<&'static str> = ROUTES
        .iter()
        .flat_map(|route| route.scopes.iter().copied())
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    scopes
}

pub fn by_function(function: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.function == function)
}

pub fn scheduled(function: &str) -> Option<&'static Scheduled> {
    SCHEDULED.iter().find(|s| s.function == function)
}

pub fn streamed(function: &str) -> Option<&'static Streamed> {
    STREAMED.iter().find(|s| s.function == function)
}
