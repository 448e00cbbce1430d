//! Time as the contract writes it: epoch milliseconds, or ISO-8601 UTC strings for the library.

use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

pub fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

pub fn now_millis() -> i64 {
    millis(now())
}

pub fn millis(at: OffsetDateTime) -> i64 {
    (at.unix_timestamp_nanos() / 1_000_000) as i64
}

/// `2026-11-29T18:00:00Z`: second precision, so string order is time order.
pub fn iso(at: OffsetDateTime) -> String {
    at.replace_nanosecond(0)
        .expect("zero nanoseconds are valid")
        .format(&Rfc3339)
        .expect("UTC times format")
}

pub fn parse_iso(raw: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(raw, &Rfc3339)
        .ok()
        .map(|t| t.to_offset(time::UtcOffset::UTC))
}

pub fn days(n: i64) -> Duration {
    Duration::days(n)
}
