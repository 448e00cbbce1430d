//! The local runner: singlet's API on a developer's machine, answering exactly as API Gateway and
//! Lambda do, over an embedded DynamoDB engine (dynoxide) or any external one.
//!
//! Its rooms: [`serve`] is the machinery of serving (the engine and its door, the front door and
//! its authorizer, the stream played as an event-source mapping, the local bus, retention, logs);
//! [`console`] is the browser console served beside the API; [`invoke`] runs one function on one
//! event; [`render`] writes the files rendered from the route table. The table tools are a crate
//! of their own (`singlet_tools`), and each command of the `singlet` binary is a file of
//! `src/commands/`.

pub mod console;
pub mod export_snapshot;
pub mod invoke;
pub mod plan;
pub mod render;
pub mod serve;
pub mod step_functions;
