//! The `singlet` binary's commands, one file each: its options and its body. What they share is
//! in [`runner`] (the options every command takes) and [`connect`] (the engine and the table).

pub mod connect;
pub mod export;
pub mod fsck;
pub mod import;
pub mod invoke;
pub mod load;
pub mod migrate;
pub mod on_s3;
pub mod on_sfn;
pub mod output;
pub mod plan;
pub mod render;
pub mod runner;
pub mod seed;
pub mod serve;
pub mod token;
