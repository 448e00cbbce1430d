//! DynamoDB's per-key limits on the embedded engine (API.md, "Partition limits on the laptop";
//! docs/guide/partition-limits.md): each partition key value of the table and of each global
//! secondary index is served at most 1,000 write units and 3,000 read units a second; a request
//! that would take a key past that is refused as DynamoDB refuses it.
//!
//! - [`front`]: where: the engine's endpoint, in front of dynoxide, for every client;
//! - [`judge`]: what a request consumes at which key, before and after the engine runs it;
//! - [`heat`]: the per-second tallies it is judged on, and the heat the console shows;
//! - [`units`], [`schema`], [`expressions`], [`refusals`]: DynamoDB's counting, the table's
//!   keys, what a request's expressions say, DynamoDB's answers.
//!
//! Time is the engine's clock (a test's settable one), read to the second.

pub mod expressions;
pub mod front;
pub mod heat;
pub mod judge;
pub mod refusals;
pub mod schema;
pub mod units;

pub use judge::Limiter;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// `--partition-limits on|off`: whether the engines this process starts from now on are limited.
static ENABLED: AtomicBool = AtomicBool::new(true);

/// `--partition-limits`' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// Sets whether the engines started from now on are limited (`--partition-limits`).
pub fn set(switch: Switch) {
    ENABLED.store(switch == Switch::On, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The limiter of each limited engine this process serves, by its endpoint URL: the console finds
/// the heat of the engine its client talks to.
static LIMITERS: Mutex<Vec<(String, Weak<Limiter>)>> = Mutex::new(Vec::new());

fn register(endpoint: &str, limiter: &Arc<Limiter>) {
    let mut limiters = LIMITERS.lock().expect("not poisoned");
    limiters.retain(|(_, l)| l.strong_count() > 0);
    limiters.push((endpoint.to_owned(), Arc::downgrade(limiter)));
}

/// The limiter in front of the engine at `endpoint`, when this process serves it limited.
pub fn at(endpoint: &str) -> Option<Arc<Limiter>> {
    let endpoint = endpoint.trim_end_matches('/');
    LIMITERS
        .lock()
        .expect("not poisoned")
        .iter()
        .find(|(e, _)| e == endpoint)
        .and_then(|(_, l)| l.upgrade())
}

/// Serves `db` on `listener` (whose URL is `endpoint`) behind a limiter on `clock`; the limiter
/// lives as long as the front does.
pub fn serve(
    db: dynoxide::Database,
    listener: tokio::net::TcpListener,
    endpoint: &str,
    clock: &singlet_functions::clock::Clock,
) -> Result<(), String> {
    let limiter = Arc::new(Limiter::new(db.clone(), clock.clone()));
    register(endpoint, &limiter);
    front::serve(db, listener, limiter)
}
