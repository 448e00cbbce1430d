//! singlet's access patterns. Each lives in one file (`fleet/register_vehicle.rs`, ...) that
//! reads as one story: the contract, the one DynamoDB request, and how each failure becomes a
//! response. The entities themselves are the model's ([`model`]), and each domain's `mod.rs` owns
//! their lifecycles. What every route shares is here once:
//! - [`routes`]: the route table, every function declared once, and [`access`]: what each
//!   touches, from which its policy in `template.yaml` is rendered;
//! - [`request`]: what happens to every request (body rules, metering, logging, errors);
//! - [`claims`]: who is asking, and what they may reach;
//! - [`error`]: the one error type and its problem documents;
//! - [`http`]: bodies, fields, path parameters and responses;
//! - [`model`]: every stored entity, its keys, `_et`/`_v`, and the registry that decodes any item;
//! - [`store`]: the data layer, every DynamoDB request (reads, writes, transactions, locks,
//!   capacity, SDK failures);
//! - [`paging`] and [`cursor`]: lists and their signed cursors;
//! - [`idempotency`] and [`ids`]: `Idempotency-Key` and the ids it derives;
//! - [`context`]: the clients and configuration, read from the environment once;
//! - [`events`]: every change's domain event and its outbox item; [`recording`]: the outbox
//!   item's put a route adds to its transaction; [`publish_events`]: the publisher;
//! - [`lambda`]: what the one Lambda binary runs for whichever function `SINGLET_FUNCTION`
//!   names, [`invocation`]: what is each invocation's own when one process serves many at once,
//!   and [`metrics`]: its CloudWatch EMF lines.

pub mod access;
pub mod claims;
pub mod clock;
pub mod context;
pub mod cursor;
pub mod error;
pub mod events;
pub mod headers;
pub mod http;
pub mod idempotency;
pub mod ids;
pub mod invocation;
pub mod lambda;
pub mod metrics;
pub mod migrations;
pub mod model;
pub mod paging;
pub mod publish_events;
pub mod recording;
pub mod report;
pub mod request;
pub mod routes;
pub mod secret;
pub mod store;
pub mod table;

pub mod accounts;
pub mod audit;
pub mod fleet;
pub mod library;
pub mod loans;

pub use context::Ctx;
pub use error::ApiError;
