//! The local runner: singlet's API on a developer's machine, answering exactly as API Gateway and
//! Lambda do, over an embedded DynamoDB engine (dynoxide) or any external one.

pub mod anonymise;
pub mod auth;
pub mod console;
pub mod engine;
pub mod event_source;
pub mod events_args;
pub mod front_door;
pub mod fsck;
pub mod import;
pub mod invoke;
pub mod local_bus;
pub mod logging;
pub mod migrate;
pub mod refusal;
pub mod render;
pub mod retention;
pub mod throttle;
pub mod transfer;

/// The server secret the runner uses when `CURSOR_KEY` is not set: public, so that ids derived
/// from `Idempotency-Key`s, cursors and the sample events in `events/` agree across runs and
/// machines. Only the local runner falls back to it; a Lambda without `CURSOR_KEY` does not start.
pub const LOCAL_SECRET: &str = "singlet-local-development-secret-do-not-deploy";
