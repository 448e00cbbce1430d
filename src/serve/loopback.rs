//! A loopback listener out of browsers' reach, for the embedded engine's own endpoint and for
//! dynoxide behind the partition limits' front: a module of its own so that both the engine
//! ([`super::engine`]) and the limiter ([`super::partition_limits`]) take it from below.

use std::net::SocketAddr;
use tokio::net::TcpListener;

/// The ports at or above 1024 that every browser refuses to fetch from, whatever a page asks
/// (the Fetch Standard's "bad ports", <https://fetch.spec.whatwg.org/#bad-port>), those least
/// likely to be taken on a developer's machine first.
pub const BROWSER_BLOCKED_PORTS: [u16; 19] = [
    10080, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 4190, 3659, 4045, 6566, 1719, 1720, 1723,
    5060, 5061, 6000, 2049,
];

/// A loopback listener no web page can reach: on the first free port of
/// [`BROWSER_BLOCKED_PORTS`]; when every one is taken, on one the system picks, and the `false`
/// beside it says so.
///
/// Why: dynoxide (3.2) answers every CORS preflight with `*` and checks no signature, so a page
/// that found its port could read and write the table from the developer's browser. The runner
/// serves the port other programs use through a door that refuses browsers
/// (`engine_door.rs`), but its own clients need dynoxide's endpoint itself, which dynoxide serves
/// only on a TCP listener: on a port browsers refuse, that listener is no way around the door.
///
/// Synchronous (a plain bind, which never blocks) so that a caller outside an `async fn` can
/// take one too; it must run inside the Tokio runtime, as every caller does.
pub fn listen_out_of_browsers_reach() -> Result<(TcpListener, bool), String> {
    let error = |e: std::io::Error| format!("cannot listen on the loopback for the engine: {e}");
    let (bound, refused) = match BROWSER_BLOCKED_PORTS.iter().find_map(|port| {
        std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], *port))).ok()
    }) {
        Some(bound) => (bound, true),
        None => (
            std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).map_err(error)?,
            false,
        ),
    };
    bound.set_nonblocking(true).map_err(error)?;
    Ok((TcpListener::from_std(bound).map_err(error)?, refused))
}
