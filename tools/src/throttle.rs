//! A write throttle by consumed capacity, shared by the commands that write much (`migrate`,
//! `import`): every write first waits until the write units consumed in the last second (as
//! `ReturnConsumedCapacity` reported them) leave room for what it is expected to consume. Callers
//! expect the most a write of theirs has consumed so far, so a window passes the limit only when
//! a write consumes more than every one before it (the first writes of a run, before there is
//! anything to learn from). A write of more units than the limit allows in a second (an
//! import's transaction of many rows) holds its place for as long as its units take at the
//! limit, not one second: over any stretch of time the rate stays under the limit.
//!
//! Beside the table-wide limit, every write that names its keys ([`Throttle::admit_keys`]) is
//! paced per partition key value, of the table and of each index (`--max-key-wcu`, default
//! 800): DynamoDB serves one key at most 1,000 write units a second, however much the table
//! takes, so a bulk run that writes many items under one key (a depot's vehicles, the overdue
//! list) is held to that key's budget while its other writes go on. The per-key budget is
//! `singlet_functions::store::pace`'s, which the overdue marker uses too.

use singlet_functions::store::pace::{HottestKey, KeyRef, PaceClock, Pacer};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The write units consumed in the last second, as a sliding window, and the run's peak.
pub struct Throttle {
    max: Option<f64>,
    window: Mutex<Window>,
    peak: Mutex<f64>,
    /// The per-key budget: every key's units in the last second.
    keys: Pacer,
}

/// Writes admitted in the last second: when, and the units each consumed (its estimate until
/// it is settled), by the admission's number.
#[derive(Default)]
struct Window {
    entries: VecDeque<(u64, Instant, f64)>,
    next: u64,
}

impl Window {
    /// Drops the writes whose time in the window is over: a second, or as long as their units
    /// take at `max` when that is longer.
    fn forget_before(&mut self, now: Instant, max: Option<f64>) {
        while self.entries.front().is_some_and(|(_, at, units)| {
            let held = max.map_or(1.0, |max| (units / max).max(1.0));
            now.duration_since(*at) >= Duration::from_secs_f64(held)
        }) {
            self.entries.pop_front();
        }
    }

    fn used(&self) -> f64 {
        self.entries.iter().map(|(_, _, units)| units).sum()
    }

    fn push(&mut self, at: Instant, units: f64) -> Admission {
        let id = self.next;
        self.next += 1;
        self.entries.push_back((id, at, units));
        Admission(id)
    }
}

/// One admitted write, until [`Throttle::settle`] says what it consumed.
#[must_use]
pub struct Admission(u64);

impl Throttle {
    /// At most `max` write units a second; `None`: no limit, only the accounting.
    pub fn new(max: Option<f64>) -> Self {
        Self {
            max,
            window: Mutex::new(Window::default()),
            peak: Mutex::new(0.0),
            keys: Pacer::system(),
        }
    }

    /// At most `max_key_wcu` write units a second into any one partition key value.
    pub fn with_max_key_wcu(mut self, max_key_wcu: f64) -> Self {
        self.keys = Pacer::new(max_key_wcu, PaceClock::System);
        self
    }

    /// Waits until every key of `keys` has room for its units in the last second, then until
    /// `estimate` fits the table-wide limit ([`Throttle::admit`]).
    pub async fn admit_keys(&self, estimate: f64, keys: &[(KeyRef, f64)]) -> Admission {
        self.keys.admit(keys).await;
        self.admit(estimate).await
    }

    /// The most write units a second it lets into any one key.
    pub fn max_key_wcu(&self) -> f64 {
        self.keys.max()
    }

    /// The key written most in any one second so far (`hottestKey` in the reports).
    pub fn hottest_key(&self) -> Option<HottestKey> {
        self.keys.hottest()
    }

    /// Waits until `estimate` more units fit in the last second, and holds them there.
    pub async fn admit(&self, estimate: f64) -> Admission {
        loop {
            let wait = {
                let mut window = self.window.lock().unwrap();
                let now = Instant::now();
                window.forget_before(now, self.max);
                let fits = self
                    .max
                    .is_none_or(|max| window.used() + estimate <= max || window.entries.is_empty());
                if fits {
                    // Held in the window now, so that other segments see it before it is sent.
                    return window.push(now, estimate);
                }
                let (_, oldest, units) = *window.entries.front().expect("not empty");
                let held = self.max.map_or(1.0, |max| (units / max).max(1.0));
                Duration::from_secs_f64(held).saturating_sub(now.duration_since(oldest))
            };
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    /// Replaces an admitted write's estimate with what it consumed.
    pub fn settle(&self, admission: Admission, units: f64) {
        let mut window = self.window.lock().unwrap();
        // An admission older than a second is gone already: it counted in the window it was in.
        if let Some(entry) = window
            .entries
            .iter_mut()
            .find(|(id, _, _)| *id == admission.0)
        {
            entry.2 = units;
        }
        window.forget_before(Instant::now(), self.max);
        let used = window.used();
        let mut peak = self.peak.lock().unwrap();
        *peak = peak.max(used);
    }

    /// The most units consumed in any one-second window so far.
    pub fn peak(&self) -> f64 {
        *self.peak.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each admission is settled by its own number: two writes admitted with the same estimate
    /// and settled in the other order each replace their own entry.
    #[tokio::test]
    async fn a_settled_write_replaces_its_own_estimate() {
        let throttle = Throttle::new(Some(100.0));
        let first = throttle.admit(1.0).await;
        let second = throttle.admit(1.0).await;
        throttle.settle(second, 5.0);
        throttle.settle(first, 3.0);
        let window = throttle.window.lock().unwrap();
        let units: Vec<f64> = window.entries.iter().map(|(_, _, u)| *u).collect();
        assert_eq!(units, [3.0, 5.0]);
        assert_eq!(throttle.peak(), 8.0);
    }

    /// A write of more units than a second allows stays in the window, holding the next one
    /// back, for as long as its units take at the limit: 40 units at 10 a second, 4 seconds.
    #[test]
    fn a_write_over_the_limit_stays_for_its_share_of_time() {
        let mut window = Window::default();
        let start = Instant::now();
        let _big = window.push(start, 40.0);
        window.forget_before(start + Duration::from_millis(3900), Some(10.0));
        assert_eq!(window.used(), 40.0, "still held at 3.9 s");
        window.forget_before(start + Duration::from_secs(4), Some(10.0));
        assert_eq!(window.used(), 0.0, "gone at 4 s");
        // Under the limit, a second, as before.
        let _small = window.push(start, 5.0);
        window.forget_before(start + Duration::from_millis(999), Some(10.0));
        assert_eq!(window.used(), 5.0);
        window.forget_before(start + Duration::from_secs(1), Some(10.0));
        assert_eq!(window.used(), 0.0);
    }
}
