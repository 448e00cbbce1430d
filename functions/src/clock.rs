//! Time as the contract writes it: epoch milliseconds, or ISO-8601 UTC strings for the library.

//!
//! "Now" is the system's time, unless the local runner set a [`Clock`] on the context to run a
//! function as if its clock read another time (`invoke --clock`, the console's "mark overdue at
//! a chosen time"). Nothing on Lambda sets one: `Ctx::from_lambda_env` takes the system's.

use std::future::Future;
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// What time it is for a context: the system's, or the system's moved by a fixed offset (so time
/// still passes, from the time it was set to).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    offset: Option<Duration>,
}

tokio::task_local! {
    /// The offset of the clock of the request or run being served, for [`now`].
    static OFFSET: Option<Duration>;
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock that reads `at` now.
    pub fn reading(at: OffsetDateTime) -> Self {
        Self {
            offset: Some(at - OffsetDateTime::now_utc()),
        }
    }

    pub fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc() + self.offset.unwrap_or_default()
    }

    /// Runs `work` with this clock as [`now`]'s.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        OFFSET.scope(self.offset, work).await
    }
}

/// Now, by the clock of the request or run being served ([`Clock::run`]), else the system's.
pub fn now() -> OffsetDateTime {
    let offset = OFFSET.try_with(|offset| *offset).ok().flatten();
    OffsetDateTime::now_utc() + offset.unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_set_clock_is_now_for_what_it_runs_and_nowhere_else() {
        let month_ahead = OffsetDateTime::now_utc() + Duration::days(30);
        let clock = Clock::reading(month_ahead);
        let inside = clock.run(async { now() }).await;
        assert!((inside - month_ahead).abs() < Duration::seconds(5));
        assert!((now() - OffsetDateTime::now_utc()).abs() < Duration::seconds(5));
        assert!((Clock::system().now() - OffsetDateTime::now_utc()).abs() < Duration::seconds(5));
    }
}
