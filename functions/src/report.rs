//! What a scheduled run reports. Its own module, below the route table: a scheduled handler
//! implements it, and the route table names the handler.

/// What a scheduled run reports: the counts its metrics line carries, each under its metric's
/// name, and the invocation's JSON result.
pub trait RunReport: Send + std::fmt::Debug {
    fn counts(&self) -> Vec<(&'static str, u64)>;
    fn to_json(&self) -> serde_json::Value;
}
