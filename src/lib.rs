//! The local runner: singlet's API on a developer's machine, answering exactly as API Gateway and
//! Lambda do, over an embedded DynamoDB engine (dynoxide) or any external one.

pub mod console;
pub mod engine;
pub mod front_door;
pub mod invoke;
