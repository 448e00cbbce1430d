//! What serving the API on this machine takes: the embedded engine ([`engine`]) and the door
//! other programs reach it by ([`engine_door`]); API Gateway played by the [`front_door`], with
//! its JWT authorizer ([`auth`]), its own refusals ([`refusal`]) and the functions' policies
//! checked call by call ([`iam`]); the table's stream played as Lambda's event-source mapping
//! ([`event_source`], [`events_args`]) into the local bus ([`local_bus`]) and the archive of what
//! TTL deleted ([`retention`]); and the runner's logs ([`logging`]).

pub mod auth;
pub mod door_limits;
pub mod engine;
pub mod engine_door;
pub mod event_source;
pub mod events_args;
pub mod front_door;
pub mod iam;
pub mod local_bus;
pub mod logging;
pub mod loopback;
pub mod partition_limits;
pub mod published_outbox;
pub mod refusal;
pub mod retention;
pub mod unstreamed_outbox;
