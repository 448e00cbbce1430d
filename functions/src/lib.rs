//! singlet's access patterns. Each lives in one file (`fleet/register_vehicle.rs`, ...) that
//! reads as one story: the contract, the one DynamoDB request, and how each failure becomes a
//! response. What every route shares is here once: [`error`] (problem documents), [`http`]
//! (bodies, fields, responses), [`paging`] (cursors), [`idempotency`], [`db`] (the context,
//! transactions and SDK failures) and [`routes`] (the route table).

pub mod clock;
pub mod db;
pub mod error;
pub mod http;
pub mod idempotency;
pub mod lambda;
pub mod metrics;
pub mod paging;
pub mod routes;
pub mod table;

pub mod accounts;
pub mod audit;
pub mod fleet;
pub mod library;
pub mod loans;

pub use db::Ctx;
pub use error::ApiError;
