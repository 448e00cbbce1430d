//! The meter: what each partition key value (of the table and of each index) has consumed in
//! the current second, which the limiter judges against, and the hottest keys of each of the last
//! [`HEAT_SECONDS`], which the console shows.
//!
//! Memory is bounded whatever the number of distinct keys: the current second holds only the
//! keys touched in it, and each past second keeps [`KEPT_PER_FAMILY`] keys per key family and
//! index, [`HEAT_SECONDS`] of them.

use super::units::Halves;
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The per-key limits, per second (bp-partition-key-design).
pub const WRITE_UNITS_PER_KEY: u64 = 1000;
pub const READ_UNITS_PER_KEY: u64 = 3000;
/// How long the heat is kept.
pub const HEAT_SECONDS: i64 = 300;
/// How many keys of each family (per table or index) each past second keeps.
pub const KEPT_PER_FAMILY: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Write,
}

impl Kind {
    fn limit(self) -> Halves {
        2 * match self {
            Kind::Read => READ_UNITS_PER_KEY,
            Kind::Write => WRITE_UNITS_PER_KEY,
        }
    }
}

/// Units one request takes from one partition key value of the table (`index: None`) or an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub table: String,
    pub index: Option<String>,
    pub pk: String,
    pub kind: Kind,
    pub halves: Halves,
}

#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    read: Halves,
    write: Halves,
    throttled: u32,
}

type Resource = (String, Option<String>);
type KeyId = (u32, Box<str>);

#[derive(Clone)]
struct Hot {
    key: KeyId,
    tally: Tally,
}

#[derive(Default)]
struct State {
    second: i64,
    resources: Vec<Resource>,
    current: HashMap<KeyId, Tally>,
    past: VecDeque<(i64, Vec<Hot>)>,
    throttled_requests: u64,
    /// Every key's units summed over the seconds since [`Meter::start_totals`], when asked for:
    /// the past seconds keep only [`KEPT_PER_FAMILY`] keys each, and a key as busy as dozens of
    /// others in a second may be the one dropped, so a sum over them undercounts it.
    totals: Option<HashMap<KeyId, Total>>,
}

/// A key's units over the seconds summed, and its busiest second.
#[derive(Debug, Clone, Copy, Default)]
struct Total {
    sum: Tally,
    peak_read: Halves,
    peak_write: Halves,
}

impl Total {
    fn add(&mut self, tally: &Tally) {
        self.sum.read += tally.read;
        self.sum.write += tally.write;
        self.sum.throttled += tally.throttled;
        self.peak_read = self.peak_read.max(tally.read);
        self.peak_write = self.peak_write.max(tally.write);
    }
}

impl State {
    fn resource(&mut self, table: &str, index: Option<&str>) -> u32 {
        let found = self
            .resources
            .iter()
            .position(|(t, i)| t == table && i.as_deref() == index);
        match found {
            Some(at) => at as u32,
            None => {
                self.resources
                    .push((table.to_owned(), index.map(str::to_owned)));
                (self.resources.len() - 1) as u32
            }
        }
    }

    /// Moves to `second`: the current second's hottest keys join the past, the rest are forgotten.
    fn at(&mut self, second: i64) {
        if second == self.second {
            return;
        }
        if let Some(totals) = &mut self.totals {
            for (key, tally) in &self.current {
                totals.entry(key.clone()).or_default().add(tally);
            }
        }
        if !self.current.is_empty() {
            let hottest = hottest(self.current.drain().map(|(key, tally)| Hot { key, tally }));
            self.past.push_back((self.second, hottest));
        }
        self.second = second;
        while self
            .past
            .front()
            .is_some_and(|(s, _)| *s <= second - HEAT_SECONDS || *s > second)
        {
            self.past.pop_front();
        }
    }
}

/// How hot a tally is: the larger share of a limit it used, in millionths.
fn heat(tally: &Tally) -> u64 {
    let share = |used: Halves, kind: Kind| used * 1_000_000 / kind.limit();
    share(tally.write, Kind::Write).max(share(tally.read, Kind::Read))
}

/// The [`KEPT_PER_FAMILY`] hottest of `keys` in each family of each table or index.
fn hottest(keys: impl Iterator<Item = Hot>) -> Vec<Hot> {
    let mut families: HashMap<(u32, String), Vec<Hot>> = HashMap::new();
    for hot in keys {
        let family = super::schema::family(&hot.key.1).to_owned();
        let kept = families.entry((hot.key.0, family)).or_default();
        kept.push(hot);
        if kept.len() > 4 * KEPT_PER_FAMILY {
            kept.sort_by_key(|h| std::cmp::Reverse(heat(&h.tally)));
            kept.truncate(KEPT_PER_FAMILY);
        }
    }
    families
        .into_values()
        .flat_map(|mut kept| {
            kept.sort_by_key(|h| std::cmp::Reverse(heat(&h.tally)));
            kept.truncate(KEPT_PER_FAMILY);
            kept
        })
        .collect()
}

#[derive(Default)]
pub struct Meter {
    state: Mutex<State>,
}

/// What refused a request: the charge that would have gone over its key's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Over {
    pub charge: Charge,
}

impl Meter {
    /// Takes every one of `charges` in `second`, or none: the first that would take its key past
    /// its limit (counting what the others take from the same key) refuses them all.
    pub fn take(&self, second: i64, charges: &[Charge]) -> Result<(), Over> {
        self.take_each(second, &[charges]).map_err(|mut refused| {
            let (_, over) = refused.remove(0);
            over
        })
    }

    /// Takes the charges of every part, or none: the parts that would go over, each with the
    /// charge that would, when any would.
    pub fn take_each(&self, second: i64, parts: &[&[Charge]]) -> Result<(), Vec<(usize, Over)>> {
        let mut state = self.state.lock().expect("the meter is never poisoned");
        state.at(second);
        let mut ids = Vec::new();
        for part in parts {
            let mut part_ids = Vec::with_capacity(part.len());
            for charge in *part {
                let resource = state.resource(&charge.table, charge.index.as_deref());
                part_ids.push((resource, Box::<str>::from(charge.pk.as_str())));
            }
            ids.push(part_ids);
        }
        let mut pending: HashMap<&KeyId, Tally> = HashMap::new();
        let mut refused = Vec::new();
        for (p, part) in parts.iter().enumerate() {
            for (charge, id) in part.iter().zip(&ids[p]) {
                let base = state.current.get(id).copied().unwrap_or_default();
                let add = pending.entry(id).or_default();
                let used = match charge.kind {
                    Kind::Read => {
                        add.read += charge.halves;
                        base.read + add.read
                    }
                    Kind::Write => {
                        add.write += charge.halves;
                        base.write + add.write
                    }
                };
                if used > charge.kind.limit() && refused.last().is_none_or(|(r, _)| *r != p) {
                    refused.push((
                        p,
                        Over {
                            charge: charge.clone(),
                        },
                    ));
                }
            }
        }
        if refused.is_empty() {
            let adds: Vec<(KeyId, Tally)> =
                pending.into_iter().map(|(k, t)| (k.clone(), t)).collect();
            for (id, add) in adds {
                let tally = state.current.entry(id).or_default();
                tally.read += add.read;
                tally.write += add.write;
            }
            return Ok(());
        }
        let overs: Vec<KeyId> = refused
            .iter()
            .map(|(p, over)| {
                let at = parts[*p]
                    .iter()
                    .position(|c| *c == over.charge)
                    .unwrap_or(0);
                ids[*p][at].clone()
            })
            .collect();
        drop(pending);
        for id in overs {
            state.current.entry(id).or_default().throttled += 1;
        }
        state.throttled_requests += 1;
        Err(refused)
    }

    /// Adds `charges` to `second`'s tallies (or takes them back, `refund`) whatever the limits:
    /// what a request consumed beyond what it was judged on, learned from the engine's answer.
    pub fn settle(&self, second: i64, charges: &[Charge], refund: bool) {
        if charges.is_empty() {
            return;
        }
        let mut state = self.state.lock().expect("the meter is never poisoned");
        state.at(second);
        for charge in charges {
            let resource = state.resource(&charge.table, charge.index.as_deref());
            let tally = state
                .current
                .entry((resource, charge.pk.as_str().into()))
                .or_default();
            let slot = match charge.kind {
                Kind::Read => &mut tally.read,
                Kind::Write => &mut tally.write,
            };
            *slot = if refund {
                slot.saturating_sub(charge.halves)
            } else {
                *slot + charge.halves
            };
        }
    }

    /// The heat of the last [`HEAT_SECONDS`] up to `second`: each key's peak second, hottest
    /// first, at most [`KEPT_PER_FAMILY`] keys of each family of each table and index.
    pub fn report(&self, second: i64) -> Report {
        let mut state = self.state.lock().expect("the meter is never poisoned");
        state.at(second);
        let mut peaks: HashMap<KeyId, KeyPeak> = HashMap::new();
        let seconds = state
            .past
            .iter()
            .map(|(s, hot)| (*s, hot.clone()))
            .chain(std::iter::once((
                state.second,
                state
                    .current
                    .iter()
                    .map(|(key, tally)| Hot {
                        key: key.clone(),
                        tally: *tally,
                    })
                    .collect(),
            )));
        for (at, hot) in seconds {
            for Hot { key, tally } in hot {
                let peak = peaks.entry(key).or_default();
                if tally.write > peak.write || tally.read > peak.read {
                    peak.at = at;
                }
                peak.write = peak.write.max(tally.write);
                peak.read = peak.read.max(tally.read);
                peak.throttled += u64::from(tally.throttled);
                if at == state.second {
                    peak.now_write = tally.write;
                    peak.now_read = tally.read;
                }
            }
        }
        let mut families: HashMap<(u32, String), Vec<HotKey>> = HashMap::new();
        for ((resource, pk), peak) in peaks {
            let family = super::schema::family(&pk).to_owned();
            families
                .entry((resource, family))
                .or_default()
                .push(HotKey {
                    pk: pk.into(),
                    peak_wcu_per_second: peak.write as f64 / 2.0,
                    peak_rcu_per_second: peak.read as f64 / 2.0,
                    peak_at_second: peak.at,
                    wcu_this_second: peak.now_write as f64 / 2.0,
                    rcu_this_second: peak.now_read as f64 / 2.0,
                    throttled_requests: peak.throttled,
                });
        }
        let mut report: Vec<Family> = families
            .into_iter()
            .map(|((resource, family), mut keys)| {
                let share = |k: &HotKey| {
                    (k.peak_wcu_per_second / WRITE_UNITS_PER_KEY as f64)
                        .max(k.peak_rcu_per_second / READ_UNITS_PER_KEY as f64)
                };
                keys.sort_by(|a, b| share(b).total_cmp(&share(a)).then(a.pk.cmp(&b.pk)));
                keys.truncate(KEPT_PER_FAMILY);
                let (table, index) = state.resources[resource as usize].clone();
                Family {
                    table,
                    index,
                    family,
                    keys,
                }
            })
            .collect();
        report.sort_by(|a, b| {
            let top = |f: &Family| {
                f.keys.first().map_or(0.0, |k| {
                    (k.peak_wcu_per_second / WRITE_UNITS_PER_KEY as f64)
                        .max(k.peak_rcu_per_second / READ_UNITS_PER_KEY as f64)
                })
            };
            top(b)
                .total_cmp(&top(a))
                .then_with(|| a.family.cmp(&b.family))
        });
        Report {
            second,
            window_seconds: HEAT_SECONDS,
            write_units_per_key: WRITE_UNITS_PER_KEY,
            read_units_per_key: READ_UNITS_PER_KEY,
            throttled_requests: state.throttled_requests,
            families: report,
        }
    }

    /// Starts summing every key's units, second by second, from `second` on (`plan
    /// --simulate`'s window): memory then grows with the keys touched, so only a bounded run asks.
    pub fn start_totals(&self, second: i64) {
        let mut state = self.state.lock().expect("the meter is never poisoned");
        state.at(second);
        state.totals = Some(HashMap::new());
    }

    /// Each key's units since [`Meter::start_totals`] up to `second` (its current second
    /// included), with its busiest second and the requests refused at it; none when not started.
    pub fn totals(&self, second: i64) -> Vec<KeyTotal> {
        let mut state = self.state.lock().expect("the meter is never poisoned");
        state.at(second);
        let Some(totals) = &state.totals else {
            return Vec::new();
        };
        let mut totals = totals.clone();
        for (key, tally) in &state.current {
            totals.entry(key.clone()).or_default().add(tally);
        }
        totals
            .into_iter()
            .map(|((resource, pk), total)| {
                let (table, index) = state.resources[resource as usize].clone();
                KeyTotal {
                    table,
                    index,
                    family: super::schema::family(&pk).to_owned(),
                    pk: pk.into(),
                    read_units: total.sum.read as f64 / 2.0,
                    write_units: total.sum.write as f64 / 2.0,
                    peak_rcu_per_second: total.peak_read as f64 / 2.0,
                    peak_wcu_per_second: total.peak_write as f64 / 2.0,
                    throttled_requests: u64::from(total.sum.throttled),
                }
            })
            .collect()
    }

    /// Requests refused since the meter started.
    pub fn throttled_requests(&self) -> u64 {
        self.state.lock().expect("not poisoned").throttled_requests
    }

    /// How many keys the current second holds (the bench's memory check).
    pub fn keys_this_second(&self) -> usize {
        self.state.lock().expect("not poisoned").current.len()
    }

    /// How many hot keys the past seconds hold.
    pub fn keys_kept(&self) -> usize {
        let state = self.state.lock().expect("not poisoned");
        state.past.iter().map(|(_, hot)| hot.len()).sum()
    }
}

/// One key's units summed over a window ([`Meter::totals`]).
#[derive(Debug, Clone)]
pub struct KeyTotal {
    pub table: String,
    pub index: Option<String>,
    pub family: String,
    pub pk: String,
    pub read_units: f64,
    pub write_units: f64,
    pub peak_rcu_per_second: f64,
    pub peak_wcu_per_second: f64,
    pub throttled_requests: u64,
}

#[derive(Default)]
struct KeyPeak {
    write: Halves,
    read: Halves,
    at: i64,
    now_write: Halves,
    now_read: Halves,
    throttled: u64,
}

/// The heat as the console's `/_console/api/heat` answers it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The clock's second (Unix time) the report was made at.
    pub second: i64,
    pub window_seconds: i64,
    pub write_units_per_key: u64,
    pub read_units_per_key: u64,
    pub throttled_requests: u64,
    /// Hottest family first.
    pub families: Vec<Family>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Family {
    pub table: String,
    /// `null` for the table itself.
    pub index: Option<String>,
    pub family: String,
    /// Hottest first.
    pub keys: Vec<HotKey>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HotKey {
    pub pk: String,
    pub peak_wcu_per_second: f64,
    pub peak_rcu_per_second: f64,
    pub peak_at_second: i64,
    pub wcu_this_second: f64,
    pub rcu_this_second: f64,
    pub throttled_requests: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(pk: &str, units: u64) -> Charge {
        Charge {
            table: "t".into(),
            index: None,
            pk: pk.into(),
            kind: Kind::Write,
            halves: units * 2,
        }
    }

    #[test]
    fn a_key_is_refused_past_its_second_and_served_in_the_next() {
        let meter = Meter::default();
        assert!(meter.take(10, &[write("A#1", 600)]).is_ok());
        assert!(meter.take(10, &[write("A#2", 600)]).is_ok());
        let over = meter.take(10, &[write("A#1", 401)]).unwrap_err();
        assert_eq!(over.charge.pk, "A#1");
        assert!(meter.take(10, &[write("A#1", 400)]).is_ok());
        assert!(meter.take(11, &[write("A#1", 1000)]).is_ok());
        let report = meter.report(11);
        assert_eq!(report.throttled_requests, 1);
        let keys = &report.families[0].keys;
        assert_eq!(keys[0].pk, "A#1");
        assert_eq!(keys[0].peak_wcu_per_second, 1000.0);
        assert_eq!(keys[0].throttled_requests, 1);
    }

    #[test]
    fn totals_sum_every_key_over_the_seconds_however_many_tie() {
        let meter = Meter::default();
        meter.settle(9, &[write("A#0", 7)], false);
        meter.start_totals(10);
        for second in 10..13 {
            // Twenty keys as busy as A#1 each second: the kept heat may drop it, the totals not.
            for k in 1..=20 {
                meter.settle(second, &[write(&format!("A#{k}"), 2)], false);
            }
        }
        meter.settle(12, &[write("A#1", 3)], false);
        let totals = meter.totals(12);
        let one = totals.iter().find(|t| t.pk == "A#1").unwrap();
        assert_eq!(one.write_units, 9.0);
        assert_eq!(one.peak_wcu_per_second, 5.0);
        assert_eq!(one.family, "A#");
        assert!(totals.iter().all(|t| t.pk != "A#0"), "before the window");
        assert_eq!(totals.len(), 20);
    }

    #[test]
    fn memory_is_bounded_by_the_seconds_kept_not_the_keys_seen() {
        let meter = Meter::default();
        for second in 0..(2 * HEAT_SECONDS) {
            for k in 0..200 {
                meter.settle(second, &[write(&format!("K#{second}-{k}"), 1)], false);
            }
        }
        assert!(meter.keys_kept() <= HEAT_SECONDS as usize * KEPT_PER_FAMILY);
        assert_eq!(meter.keys_this_second(), 200);
    }
}
