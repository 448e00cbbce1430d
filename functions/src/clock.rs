//! Time as the contract writes it: epoch milliseconds, or ISO-8601 UTC strings for the library.

//!
//! "Now" is the system's time, unless the local runner set a [`Clock`] on the context to run a
//! function as if its clock read another time (`invoke --clock`, the console's "mark overdue at
//! a chosen time"). Nothing on Lambda sets one: `Ctx::from_lambda_env` takes the system's.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// What time it is for a context: the system's, or the system's moved by an offset (so time
/// still passes, from the time it was set to). Clones share one offset: a test, or the local
/// runner, that [`Clock::set`]s or [`Clock::advance`]s a clock moves it for every context and
/// engine holding a clone (the embedded engine reads its TTL sweep's "now" from the same clock).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// Nanoseconds ahead of the system's clock; `None` is the system's clock itself. On a
    /// [`Clock::frozen`] one, the time it reads, in nanoseconds since the epoch.
    offset: Option<Arc<AtomicI64>>,
    frozen: bool,
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
        let clock = Self {
            offset: Some(Arc::new(AtomicI64::new(0))),
            frozen: false,
        };
        clock.set(at);
        clock
    }

    /// A clock that reads `at` until it is set or advanced: for what is judged per second (the
    /// engine's partition limits), so that a test is never timed. A request run on it
    /// ([`Clock::run`]) sees time pass from `at` while it runs.
    pub fn frozen(at: OffsetDateTime) -> Self {
        let clock = Self {
            offset: Some(Arc::new(AtomicI64::new(0))),
            frozen: true,
        };
        clock.set(at);
        clock
    }

    /// Makes this clock (and every clone of it) read `at` now. On the system's clock it does
    /// nothing: only a clock made by [`Clock::reading`] can be moved.
    pub fn set(&self, at: OffsetDateTime) {
        if let Some(offset) = &self.offset {
            if self.frozen {
                let nanos = at.unix_timestamp_nanos();
                offset.store(
                    i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX }),
                    Ordering::SeqCst,
                );
                return;
            }
            let ahead = (at - OffsetDateTime::now_utc()).whole_nanoseconds();
            // Saturating, never wrapping: a time out of reach ([`settable`]) reads as the
            // nearest one in reach, not as one centuries the other way.
            let ahead = i64::try_from(ahead).unwrap_or(if ahead < 0 { i64::MIN } else { i64::MAX });
            offset.store(ahead, Ordering::SeqCst);
        }
    }

    /// Moves this clock (and every clone of it) `by` ahead.
    pub fn advance(&self, by: Duration) {
        self.set(self.now() + by);
    }

    fn offset(&self) -> Option<Duration> {
        if self.frozen {
            return Some(self.now() - OffsetDateTime::now_utc());
        }
        self.offset
            .as_ref()
            .map(|offset| Duration::nanoseconds(offset.load(Ordering::SeqCst)))
    }

    pub fn now(&self) -> OffsetDateTime {
        if let (true, Some(at)) = (self.frozen, &self.offset) {
            let at = i128::from(at.load(Ordering::SeqCst));
            return OffsetDateTime::from_unix_timestamp_nanos(at)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        }
        OffsetDateTime::now_utc() + self.offset().unwrap_or_default()
    }

    /// Runs `work` with this clock as [`now`]'s (its offset as it stands when `work` starts).
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        OFFSET.scope(self.offset(), work).await
    }
}

/// Now, by the clock of the request or run being served ([`Clock::run`]), else the system's.
pub fn now() -> OffsetDateTime {
    let offset = OFFSET.try_with(|offset| *offset).ok().flatten();
    OffsetDateTime::now_utc() + offset.unwrap_or_default()
}

/// `raw`, an ISO-8601 time, when a clock can be set to it (`invoke --clock`, `import --clock`,
/// the console's chosen time): its distance from now must fit the nanoseconds a clock keeps it
/// as, about 292 years either way.
pub fn settable(raw: &str) -> Result<OffsetDateTime, String> {
    let at = parse_iso(raw)
        .ok_or_else(|| format!("{raw:?} is not an ISO-8601 time such as 2026-12-29T09:00:00Z"))?;
    if i64::try_from((at - OffsetDateTime::now_utc()).whole_nanoseconds()).is_err() {
        return Err(format!(
            "{raw:?} is too far from now for a clock to read (about 292 years either way)"
        ));
    }
    Ok(at)
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

    #[test]
    fn a_clock_is_set_only_to_a_time_it_can_keep() {
        assert!(settable("2300-01-01T00:00:00Z").is_ok());
        let refused = settable("2500-06-01T00:00:00Z").unwrap_err();
        assert!(refused.contains("too far from now"), "{refused}");
        assert!(settable("1700-01-01T00:00:00Z").is_err());
        assert!(settable("tomorrow").unwrap_err().contains("ISO-8601"));
        // Set anyway, a clock saturates rather than wraps round.
        let far = parse_iso("2500-06-01T00:00:00Z").unwrap();
        assert!(Clock::reading(far).now() > parse_iso("2300-01-01T00:00:00Z").unwrap());
    }

    #[test]
    fn a_clock_moved_moves_every_clone() {
        let clock = Clock::reading(OffsetDateTime::now_utc());
        let shared = clock.clone();
        clock.advance(Duration::days(400));
        let ahead = shared.now() - OffsetDateTime::now_utc();
        assert!((ahead - Duration::days(400)).abs() < Duration::seconds(5));
        let system = Clock::system();
        system.advance(Duration::days(1));
        assert!((system.now() - OffsetDateTime::now_utc()).abs() < Duration::seconds(5));
    }
}
