//! Pacing per partition key: DynamoDB serves each partition key value, of the table and of each
//! index, at most 1,000 write units a second, whatever the table's capacity; an index that falls
//! behind throttles the table writes that feed it (docs/API.md, "The table at scale"). Bulk work
//! (`mark-overdue`, `import`, `load`, `migrate`, `fsck --repair`) keeps every key it writes under
//! a budget (`--max-key-wcu`, default [`DEFAULT_MAX_KEY_WCU`]) with a [`KeyBudget`]: before a
//! write, the units each of its keys took in the last second, plus the write's, must fit.
//!
//! The budget reads time from a [`PaceClock`]: the system's, which sleeps, or a settable one
//! ([`crate::clock::Clock`]) that a wait moves forward at once, so that a test of a run over
//! thousands of loans takes no real time and is not timed.

use crate::clock::Clock;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// What bulk work writes into any one key a second by default: the limit is 1,000; a fifth is
/// left for the API's own writes into the same key meanwhile.
pub const DEFAULT_MAX_KEY_WCU: f64 = 800.0;

/// One key a write puts units on: the table's (`index: None`) or an index's partition key value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyRef {
    pub index: Option<&'static str>,
    pub pk: String,
}

impl KeyRef {
    pub fn table(pk: impl Into<String>) -> Self {
        Self {
            index: None,
            pk: pk.into(),
        }
    }

    pub fn index(index: &'static str, pk: impl Into<String>) -> Self {
        Self {
            index: Some(index),
            pk: pk.into(),
        }
    }
}

/// The key that took the most write units in any one second of a run: `hottestKey` in the
/// bulk tools' reports and the marker's response.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HottestKey {
    /// The index, or `null` for the table.
    pub index: Option<String>,
    /// The partition key value; one that holds a value a person gave (a plate, an email, ...)
    /// is named by its prefix alone.
    pub pk: String,
    pub peak_wcu_per_second: f64,
}

/// A partition key value as a report may show it: a plate, a chassis number, an email's
/// skeleton, a username or a card number is personal, so only its prefix is shown.
pub fn reportable(pk: &str) -> String {
    match crate::model::value_keyed(pk) {
        Some(_) => {
            let prefix_end = pk.rfind('#').map_or(0, |at| at + 1);
            format!("{}…", &pk[..prefix_end])
        }
        None => pk.to_owned(),
    }
}

/// The partition keys an item is written under: the table's, and each index's it has a key for.
pub fn keys_of_item(item: &crate::store::Item) -> Vec<KeyRef> {
    let pk_of = |name: &str| item.get(name).and_then(|value| value.as_s().ok()).cloned();
    let mut keys: Vec<KeyRef> = pk_of(singlet_shared::schema::PK)
        .map(KeyRef::table)
        .into_iter()
        .collect();
    for index in singlet_shared::schema::INDEXES {
        if let Some(pk) = pk_of(index.pk) {
            keys.push(KeyRef::index(index.name, pk));
        }
    }
    keys
}

/// Each key's expected write units for items written together: a unit a key on each index (an
/// item under 1 KB), and on the table one, or two in a transaction (`transactional`).
pub fn units_per_key(keys: Vec<KeyRef>, transactional: bool) -> Vec<(KeyRef, f64)> {
    let mut units: Vec<(KeyRef, f64)> = Vec::new();
    for key in keys {
        let unit = if key.index.is_none() && transactional {
            2.0
        } else {
            1.0
        };
        match units.iter_mut().find(|(k, _)| *k == key) {
            Some((_, counted)) => *counted += unit,
            None => units.push((key, unit)),
        }
    }
    units
}

/// The units each key took in the last second, and the most any took in one second.
#[derive(Debug)]
pub struct KeyBudget {
    max: f64,
    /// Per key: when each write was admitted (seconds on the budget's clock) and its units.
    windows: HashMap<KeyRef, VecDeque<(f64, f64)>>,
    hottest: Option<(KeyRef, f64)>,
}

impl KeyBudget {
    /// At most `max` write units a second into any one key.
    pub fn new(max: f64) -> Self {
        Self {
            max,
            windows: HashMap::new(),
            hottest: None,
        }
    }

    pub fn max(&self) -> f64 {
        self.max
    }

    fn used(window: &VecDeque<(f64, f64)>) -> f64 {
        window.iter().map(|(_, units)| units).sum()
    }

    /// At `now` (seconds), admits a write of `units` on each of `keys` if every key has room in
    /// the last second (a key with nothing in its window always has: one write larger than the
    /// budget must still go), and returns `None`; else how long until the fullest key has room.
    pub fn try_admit(&mut self, now: f64, keys: &[(KeyRef, f64)]) -> Option<Duration> {
        let mut wait: f64 = 0.0;
        for (key, units) in keys {
            let Some(window) = self.windows.get_mut(key) else {
                continue;
            };
            while window.front().is_some_and(|(at, _)| now - at >= 1.0) {
                window.pop_front();
            }
            let mut used = Self::used(window);
            // How long until enough of the oldest writes leave the window.
            let mut until = 0.0;
            for (at, taken) in window.iter() {
                if used + units <= self.max || used == 0.0 {
                    break;
                }
                used -= taken;
                until = at + 1.0 - now;
            }
            if Self::used(window) + units > self.max && !window.is_empty() {
                wait = wait.max(until.max(0.001));
            }
        }
        if wait > 0.0 {
            return Some(Duration::from_secs_f64(wait));
        }
        for (key, units) in keys {
            let window = self.windows.entry(key.clone()).or_default();
            window.push_back((now, *units));
            let used = Self::used(window);
            if self.hottest.as_ref().is_none_or(|(_, peak)| used > *peak) {
                self.hottest = Some((key.clone(), used));
            }
        }
        // Keys with nothing in their last second are forgotten, so a long run's map stays small.
        if self.windows.len() > 4096 {
            self.windows
                .retain(|_, window| window.back().is_some_and(|(at, _)| now - at < 1.0));
        }
        None
    }

    /// The key that took the most units in one second so far.
    pub fn hottest(&self) -> Option<HottestKey> {
        self.hottest.as_ref().map(|(key, peak)| HottestKey {
            index: key.index.map(str::to_owned),
            pk: reportable(&key.pk),
            peak_wcu_per_second: (peak * 100.0).round() / 100.0,
        })
    }
}

/// Where a [`Pacer`] reads the time and how it waits.
#[derive(Debug, Clone)]
pub enum PaceClock {
    /// Tokio's clock: waiting sleeps.
    System,
    /// A settable clock: waiting moves it (and every clone of it) forward at once.
    Settable(Clock),
}

/// A [`KeyBudget`] shared by concurrent writers, with its clock.
#[derive(Debug)]
pub struct Pacer {
    budget: Mutex<KeyBudget>,
    clock: PaceClock,
    start: tokio::time::Instant,
    start_settable: time::OffsetDateTime,
}

impl Pacer {
    pub fn new(max_key_wcu: f64, clock: PaceClock) -> Self {
        let start_settable = match &clock {
            PaceClock::Settable(clock) => clock.now(),
            PaceClock::System => time::OffsetDateTime::UNIX_EPOCH,
        };
        Self {
            budget: Mutex::new(KeyBudget::new(max_key_wcu)),
            clock,
            start: tokio::time::Instant::now(),
            start_settable,
        }
    }

    /// The system's clock, at most [`DEFAULT_MAX_KEY_WCU`] a key.
    pub fn system() -> Self {
        Self::new(DEFAULT_MAX_KEY_WCU, PaceClock::System)
    }

    fn now(&self) -> f64 {
        match &self.clock {
            PaceClock::System => self.start.elapsed().as_secs_f64(),
            PaceClock::Settable(clock) => (clock.now() - self.start_settable).as_seconds_f64(),
        }
    }

    /// Waits until a write of these units on these keys fits every key's budget, and counts it.
    pub async fn admit(&self, keys: &[(KeyRef, f64)]) {
        loop {
            let wait = {
                let mut budget = self.budget.lock().expect("the budget is never poisoned");
                match budget.try_admit(self.now(), keys) {
                    None => return,
                    Some(wait) => wait,
                }
            };
            match &self.clock {
                PaceClock::System => tokio::time::sleep(wait).await,
                PaceClock::Settable(clock) => {
                    clock.advance(
                        time::Duration::try_from(wait).unwrap_or(time::Duration::MILLISECOND),
                    );
                    tokio::task::yield_now().await;
                }
            }
        }
    }

    pub fn hottest(&self) -> Option<HottestKey> {
        self.budget.lock().expect("never poisoned").hottest()
    }

    pub fn max(&self) -> f64 {
        self.budget.lock().expect("never poisoned").max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overdue() -> KeyRef {
        KeyRef::index("GSI4", "OVERDUE")
    }

    #[test]
    fn a_key_takes_no_more_than_its_budget_in_any_second() {
        let mut budget = KeyBudget::new(800.0);
        let mut now = 0.0;
        let mut admitted = Vec::new();
        for i in 0..5_000u32 {
            let key = [
                (overdue(), 1.0),
                (KeyRef::table(format!("PATRON#p{i}")), 1.0),
            ];
            while let Some(wait) = budget.try_admit(now, &key) {
                now += wait.as_secs_f64();
            }
            admitted.push(now);
        }
        // In every second-long window, at most 800 writes.
        for (i, start) in admitted.iter().enumerate() {
            let within = admitted[i..]
                .iter()
                .take_while(|at| **at - start < 1.0)
                .count();
            assert!(
                within <= 800,
                "{within} writes within a second from {start}"
            );
        }
        // 5,000 writes at 800 a second: six full seconds and more.
        assert!(now >= 6.0, "{now}");
        let hottest = budget.hottest().unwrap();
        assert_eq!(hottest.index.as_deref(), Some("GSI4"));
        assert_eq!(hottest.pk, "OVERDUE");
        assert_eq!(hottest.peak_wcu_per_second, 800.0);
    }

    #[test]
    fn other_keys_are_not_held_back() {
        let mut budget = KeyBudget::new(2.0);
        assert!(budget.try_admit(0.0, &[(overdue(), 2.0)]).is_none());
        assert!(budget.try_admit(0.1, &[(overdue(), 1.0)]).is_some());
        assert!(
            budget
                .try_admit(0.1, &[(KeyRef::table("BRANCH#b1"), 2.0)])
                .is_none()
        );
        // A write larger than the budget goes alone.
        assert!(
            budget
                .try_admit(0.2, &[(KeyRef::table("BRANCH#b2"), 5.0)])
                .is_none()
        );
        assert!(budget.try_admit(1.0, &[(overdue(), 1.0)]).is_none());
    }

    #[test]
    fn a_personal_key_is_reported_by_its_prefix() {
        assert_eq!(reportable("PLATE#ka19xtr"), "PLATE#…");
        assert_eq!(reportable("UNIQ#EMAIL#ada@x.y"), "UNIQ#EMAIL#…");
        assert_eq!(reportable("OVERDUE"), "OVERDUE");
        assert_eq!(reportable("BRANCH#b1"), "BRANCH#b1");
    }

    #[tokio::test]
    async fn a_settable_clock_is_moved_instead_of_waited_on() {
        let clock = Clock::reading(time::macros::datetime!(2026-12-01 00:00 UTC));
        let pacer = Pacer::new(10.0, PaceClock::Settable(clock.clone()));
        let before = clock.now();
        for _ in 0..35 {
            pacer.admit(&[(overdue(), 1.0)]).await;
        }
        let moved = (clock.now() - before).as_seconds_f64();
        // 35 writes at 10 a second: the last waits for the fourth second.
        assert!(moved >= 3.0, "{moved}");
        assert_eq!(pacer.hottest().unwrap().peak_wcu_per_second, 10.0);
    }
}
