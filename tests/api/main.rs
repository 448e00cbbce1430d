//! singlet's API tests: every handler against a real engine (dynoxide, in-process, on a loopback
//! port) through the real `aws-sdk-dynamodb` client, each test body run both directly against
//! the handler and end to end through the local runner's HTTP front door; races with real
//! concurrent requests; the events in `events/` replayed; `template.yaml` kept equal to the code.

mod contract;
mod fixtures;
mod harness;
mod process;
mod relay;
mod runtime_api;
mod slow_proxy;

mod accounts;
mod audit;
mod auth;
mod bootstraps;
mod capacity;
mod concurrency;
mod conventions;
mod costs;
mod docs;
mod domain_events;
mod doors;
mod events;
mod events_hardening;
mod examples;
mod export_snapshot;
mod fake_aws;
mod faults;
mod fleet;
mod fsck;
mod fsck_on_aws;
mod idempotency;
mod import;
mod library;
mod loans;
mod logs;
mod migrate;
mod migrate_at_scale;
mod model;
mod on_aws;
mod openapi;
mod partition_limits;
mod plates;
mod policy;
mod readme;
mod reliability;
mod retention;
mod review_fixes;
mod runner;
mod s3_layout;
mod step_functions;
mod template;
mod transfer;
mod watch;
