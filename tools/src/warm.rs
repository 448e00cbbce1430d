//! How long a bulk write takes on AWS, said before it starts: a new on-demand table serves 4,000
//! write units a second at once (its warm throughput), and any one partition key value 1,000
//! (the tools keep to `--max-key-wcu`, 800 by default); a table pre-warmed to a higher
//! `WarmThroughput` takes the same work faster, up to what the busiest key allows
//! (docs/guide/capacity.md, "Pre-warming before a big import").
//!
//! Sources: "Understanding DynamoDB warm throughput"
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html>): a
//! new on-demand table's warm throughput is 4,000 write and 12,000 read units a second; the
//! per-key limit: "Understanding DynamoDB warm throughput in different scenarios"
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html>).

use singlet_functions::store::pace::{KeyRef, reportable};
use std::collections::HashMap;

/// A new on-demand table's warm write throughput, units a second.
pub const NEW_TABLE_WARM_WCU: f64 = 4_000.0;

/// The work of a bulk write: its units in all, and per partition key value.
#[derive(Debug, Default)]
pub struct Work {
    pub units: f64,
    per_key: HashMap<KeyRef, f64>,
}

impl Work {
    /// Adds one write's units at each of its keys (`units_per_key`'s shape); the write's total
    /// is their sum.
    pub fn add(&mut self, keys: Vec<(KeyRef, f64)>) {
        for (key, units) in keys {
            self.units += units;
            *self.per_key.entry(key).or_default() += units;
        }
    }

    /// Adds units whose keys are not counted one by one (a load's: ten million items would be
    /// ten million keys to hold), paced per key as they are written.
    pub fn spread(&mut self, units: f64) {
        self.units += units;
    }

    /// The key the work writes most into, and its units.
    fn busiest(&self) -> Option<(&KeyRef, f64)> {
        self.per_key
            .iter()
            .map(|(key, units)| (key, *units))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// What the work takes at a new table's warm throughput (or `max_wcu` when lower), and
    /// what would make it faster: one sentence for the operator.
    pub fn said(&self, what: &str, max_wcu: Option<f64>, max_key_wcu: f64) -> String {
        let table_rate = max_wcu.map_or(NEW_TABLE_WARM_WCU, |max| max.min(NEW_TABLE_WARM_WCU));
        let by_table = self.units / table_rate;
        let (key_name, by_key) = self.busiest().map_or((String::new(), 0.0), |(key, units)| {
            let place = key.index.unwrap_or("the table");
            (
                format!("{} on {place}", reportable(&key.pk)),
                units / max_key_wcu,
            )
        });
        let seconds = by_table.max(by_key);
        let held = if by_key > 0.0 && by_key >= by_table {
            format!("held by its busiest key, {key_name}, at --max-key-wcu {max_key_wcu}")
        } else if max_wcu.is_some_and(|max| max < NEW_TABLE_WARM_WCU) {
            format!("held by --max-wcu {table_rate}")
        } else {
            let faster = (self.units / by_key.max(60.0)).ceil();
            format!(
                "held by the table's warm throughput of {NEW_TABLE_WARM_WCU} WCU; a \
                 WarmThroughput of {faster} write units a second would take it to {:.0} s \
                 (docs/guide/capacity.md, \"Pre-warming before a big import\")",
                self.units / faster
            )
        };
        format!(
            "{what}: about {:.0} write units; on AWS about {seconds:.0} s, {held}",
            self.units
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pk: &str, units: f64) -> Vec<(KeyRef, f64)> {
        vec![(KeyRef::table(pk), units)]
    }

    #[test]
    fn spread_work_is_held_by_the_warm_throughput_and_says_what_would_be_faster() {
        let mut work = Work::default();
        for n in 0..400_000 {
            work.add(keys(&format!("PATRON#{n}"), 2.0));
        }
        let said = work.said("import patrons", None, 800.0);
        assert!(said.contains("about 800000 write units"), "{said}");
        assert!(said.contains("about 200 s"), "{said}");
        assert!(said.contains("WarmThroughput of 13334"), "{said}");
    }

    #[test]
    fn one_busy_key_holds_it_whatever_the_table_serves() {
        let mut work = Work::default();
        for _ in 0..8_000 {
            work.add(keys("DEPOT#north", 1.0));
        }
        let said = work.said("migrate", Some(2_000.0), 800.0);
        assert!(said.contains("about 10 s"), "{said}");
        assert!(said.contains("DEPOT#north on the table"), "{said}");
    }
}
