//! `plan`: the table at a given size, by arithmetic (docs/API.md, "Capacity plan"). A workload
//! (how many of each entity, how often each route is called at peak, the overdue marker's run)
//! goes through each route's units per call, as `docs/COSTS.md` states them per table and index
//! (`tests/api/costs.rs` measures them on the engine and writes that file; this module reads it,
//! it does not restate them), to the peak units a second on the hottest key of each key family,
//! of the table and of each index, against DynamoDB's per-key limits; to the table's peak against
//! its warm throughput; to how long each bulk job takes paced; to storage and the monthly bill at
//! on-demand list prices.
//!
//! Where the plan cannot know exactly, it errs high: a call's units on the table (or an index)
//! are counted in full on every key family of the table (or index) the call may touch, and a
//! family whose population the workload does not give (books, depots, resources) is taken to be
//! one key that every call meets. The limits and prices it uses are parameters of the workload,
//! with AWS's published values as defaults (docs/guide/capacity.md cites each).

pub mod simulate;

use serde::{Deserialize, Serialize};
use singlet_functions::model::ENTITY_TYPES;
use singlet_functions::routes::ROUTES;
use singlet_shared::keys;
use std::collections::BTreeMap;

/// `docs/COSTS.md`, as `cargo test costs` last wrote it.
const COSTS_MD: &str = include_str!("../../docs/COSTS.md");

/// The place the table's own units are written under, next to the indexes' names.
pub const TABLE: &str = "table";

/// DynamoDB's limit on one partition key value, of the table or of an index: write units a
/// second ("Best practices for designing and using partition keys effectively", DynamoDB
/// Developer Guide; "Understanding DynamoDB warm throughput in different scenarios").
pub const KEY_WRITE_LIMIT: f64 = 1_000.0;
/// The same limit on read units a second.
pub const KEY_READ_LIMIT: f64 = 3_000.0;
/// What bulk work keeps any one key under by default (`--max-key-wcu`): a fifth of the limit
/// left for the API's own writes into the same key.
pub const DEFAULT_MAX_KEY_WCU: f64 = singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU;

/// Seconds in an average month (365.25 / 12 days).
const SECONDS_PER_MONTH: f64 = 365.25 / 12.0 * 86_400.0;
/// DynamoDB counts 100 bytes of overhead on every item and index entry it stores
/// ("Item sizes and formats", DynamoDB Developer Guide).
const ITEM_OVERHEAD_BYTES: f64 = 100.0;
/// `mark-overdue` runs every 15 minutes (its schedule in template.yaml).
const MARKER_RUNS_PER_DAY: f64 = 96.0;

/// What `plan` plans for: every field has the contract's default (docs/API.md, "Capacity
/// plan"), so a workload file names only what differs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Workload {
    pub branches: f64,
    pub patrons: f64,
    /// Loans on record, open and returned.
    pub loans: f64,
    pub checkouts_per_day: f64,
    /// As many returns as checkouts, unless said.
    pub returns_per_day: Option<f64>,
    /// How long the library's day is: the day's calls fall in it.
    pub hours_per_day: f64,
    /// The peak's calls a second over the day's mean.
    pub peak_to_mean: f64,
    /// How long a loan runs: open loans are `checkoutsPerDay × loanDays`.
    pub loan_days: f64,
    /// Loans one `mark-overdue` run marks (a long weekend's worth falling due at once).
    pub overdue_marked_per_run: f64,
    pub vehicles: f64,
    pub accounts: f64,
    /// Titles in the catalogue; unknown (`null`): every call meets one book.
    pub books: Option<f64>,
    /// Copies on the shelves (storage only).
    pub copies: f64,
    /// Depots of the fleet; unknown: every vehicle in one depot.
    pub depots: Option<f64>,
    /// The busiest entity of a kind (branch, patron, ...) takes this many times its even share
    /// of the calls.
    pub skew: f64,
    /// Peak calls a second of any route, by its function's name (`get-book`), over what the
    /// entities above imply (checkouts and returns).
    pub calls_per_second: BTreeMap<String, f64>,
    /// What bulk work keeps any one key under (`--max-key-wcu`).
    pub max_key_wcu: f64,
    /// The bulk tools' table-wide limit (`--max-wcu`); none: the warm throughput's.
    pub max_wcu: Option<f64>,
    /// The table's warm throughput and each index's (a new on-demand table's by default).
    pub warm_throughput: Throughput,
    /// The average item's size in bytes (every item of singlet's is under 1 KB: COSTS.md).
    pub average_item_bytes: f64,
    pub prices: Prices,
}

/// Units a second.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Throughput {
    pub write_units_per_second: f64,
    pub read_units_per_second: f64,
}

/// A new on-demand table's, and each new index's: 4,000 write and 12,000 read units a second
/// ("Understanding DynamoDB warm throughput", DynamoDB Developer Guide).
pub const NEW_ON_DEMAND_TABLE: Throughput = Throughput {
    write_units_per_second: 4_000.0,
    read_units_per_second: 12_000.0,
};

/// On-demand list prices, USD (<https://aws.amazon.com/dynamodb/pricing/on-demand/>, us-east-1).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Prices {
    pub per_million_write_units: f64,
    pub per_million_read_units: f64,
    /// Table class Standard; the first 25 GB a month are free, which the plan does not count.
    pub per_gb_month: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            per_million_write_units: 0.625,
            per_million_read_units: 0.125,
            per_gb_month: 0.25,
        }
    }
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            branches: 1_000.0,
            patrons: 1_000_000.0,
            loans: 10_000_000.0,
            checkouts_per_day: 100_000.0,
            returns_per_day: None,
            hours_per_day: 10.0,
            peak_to_mean: 10.0,
            loan_days: 21.0,
            overdue_marked_per_run: 50_000.0,
            vehicles: 100_000.0,
            accounts: 1_000_000.0,
            books: None,
            copies: 0.0,
            depots: None,
            skew: 10.0,
            calls_per_second: BTreeMap::new(),
            max_key_wcu: DEFAULT_MAX_KEY_WCU,
            max_wcu: None,
            warm_throughput: NEW_ON_DEMAND_TABLE,
            average_item_bytes: 400.0,
            prices: Prices::default(),
        }
    }
}

impl Workload {
    /// A workload file's text, checked: every count a number not below zero, every route named
    /// one of the route table's.
    pub fn parse(text: &str) -> Result<Self, String> {
        let workload: Workload = serde_json::from_str(text)
            .map_err(|e| format!("the workload is not one plan reads: {e}"))?;
        workload.check()?;
        Ok(workload)
    }

    fn check(&self) -> Result<(), String> {
        let counts = [
            ("branches", self.branches),
            ("patrons", self.patrons),
            ("loans", self.loans),
            ("checkoutsPerDay", self.checkouts_per_day),
            ("returnsPerDay", self.returns_per_day.unwrap_or(0.0)),
            ("loanDays", self.loan_days),
            ("overdueMarkedPerRun", self.overdue_marked_per_run),
            ("vehicles", self.vehicles),
            ("accounts", self.accounts),
            ("books", self.books.unwrap_or(1.0)),
            ("copies", self.copies),
            ("depots", self.depots.unwrap_or(1.0)),
            ("averageItemBytes", self.average_item_bytes),
            (
                "prices.perMillionWriteUnits",
                self.prices.per_million_write_units,
            ),
            (
                "prices.perMillionReadUnits",
                self.prices.per_million_read_units,
            ),
            ("prices.perGbMonth", self.prices.per_gb_month),
        ];
        for (name, value) in counts {
            if !value.is_finite() || value < 0.0 {
                return Err(format!("{name} must be a number not below 0, not {value}"));
            }
        }
        let positive = [
            ("hoursPerDay", self.hours_per_day),
            ("peakToMean", self.peak_to_mean),
            ("skew", self.skew),
            ("maxKeyWcu", self.max_key_wcu),
            ("maxWcu", self.max_wcu.unwrap_or(1.0)),
            (
                "warmThroughput.writeUnitsPerSecond",
                self.warm_throughput.write_units_per_second,
            ),
            (
                "warmThroughput.readUnitsPerSecond",
                self.warm_throughput.read_units_per_second,
            ),
        ];
        for (name, value) in positive {
            if !value.is_finite() || value <= 0.0 {
                return Err(format!("{name} must be more than 0, not {value}"));
            }
        }
        if self.hours_per_day > 24.0 {
            return Err(format!(
                "hoursPerDay is at most 24, not {}",
                self.hours_per_day
            ));
        }
        for (route, calls) in &self.calls_per_second {
            if !ROUTES.iter().any(|r| r.function == route) {
                return Err(format!(
                    "callsPerSecond names {route:?}, which is no route's function (`invoke` lists them)"
                ));
            }
            if !calls.is_finite() || *calls < 0.0 {
                return Err(format!(
                    "callsPerSecond.{route} must be a number not below 0"
                ));
            }
        }
        Ok(())
    }

    fn returns_per_day(&self) -> f64 {
        self.returns_per_day.unwrap_or(self.checkouts_per_day)
    }

    /// A day's calls at the peak's rate: spread over the day's hours, times the peak factor.
    fn peak_of_daily(&self, per_day: f64) -> f64 {
        per_day / (self.hours_per_day * 3_600.0) * self.peak_to_mean
    }

    /// Every route's peak calls a second: checkouts and returns from the day's counts, the rest
    /// as `callsPerSecond` says (none unless it does).
    pub fn peak_calls(&self) -> BTreeMap<&'static str, f64> {
        let mut calls: BTreeMap<&'static str, f64> = BTreeMap::new();
        for route in ROUTES {
            let implied = match route.function {
                "checkout-book" => self.peak_of_daily(self.checkouts_per_day),
                "return-book" => self.peak_of_daily(self.returns_per_day()),
                _ => 0.0,
            };
            let given = self.calls_per_second.get(route.function).copied();
            let rate = given.unwrap_or(0.0) + implied;
            if rate > 0.0 {
                calls.insert(route.function, rate);
            }
        }
        calls
    }

    fn open_loans(&self) -> f64 {
        (self.checkouts_per_day * self.loan_days).min(self.loans)
    }

    fn returned_loans(&self) -> f64 {
        self.loans - self.open_loans()
    }

    /// How many keys a family's entities are spread over.
    fn population(&self, population: Population) -> Option<f64> {
        match population {
            Population::Branches => Some(self.branches),
            Population::Patrons => Some(self.patrons),
            Population::Vehicles => Some(self.vehicles),
            Population::Accounts => Some(self.accounts),
            Population::Books => self.books,
            Population::Depots => self.depots,
            Population::Unknown => None,
        }
    }

    /// The part of a family's calls its busiest key takes.
    fn hottest_share(&self, keys: Keys) -> f64 {
        match keys {
            Keys::One => 1.0,
            Keys::Shards(shards) => 1.0 / f64::from(shards),
            Keys::Unique => 0.0,
            Keys::Per(population) => match self.population(population) {
                Some(count) if count >= 1.0 => (self.skew / count).min(1.0),
                _ => 1.0,
            },
        }
    }

    /// The part of a bulk job's items that fall in one key of a family: an even spread, the
    /// busiest key taking `skew` times its share.
    fn bulk_share(&self, keys: Keys) -> f64 {
        self.hottest_share(keys)
    }
}

/// How many values a key family's partition key takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keys {
    /// One constant (`OVERDUE`, `BRANCHES`, `MARKER#mark-overdue`).
    One,
    /// A fixed number of shards (`OPEN#00` … `OPEN#15`).
    Shards(u32),
    /// One per entity of a kind (`BRANCH#<id>`: one per branch).
    Per(Population),
    /// One per call (an id lock, an idempotency record, an event's outbox): never written
    /// twice in a second.
    Unique,
}

/// The kinds of entity the workload counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Population {
    Branches,
    Patrons,
    Vehicles,
    Accounts,
    Books,
    Depots,
    Unknown,
}

/// One partition key family: a key prefix (or constant) of the table or of one index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Family {
    /// `PLATE#`, `OVERDUE`, ...
    pub family: &'static str,
    /// `None`: the table.
    pub index: Option<&'static str>,
    pub keys: Keys,
    /// The entity types whose items (or index entries) it holds.
    pub entities: &'static [&'static str],
}

impl Family {
    fn place(&self) -> &'static str {
        self.index.unwrap_or(TABLE)
    }
}

/// How many keys a table family's partition-key prefix takes. The prefixes are the entity
/// types' own ([`EntityType::keys`]); this says how many values each takes.
fn table_keys(prefix: &str) -> Keys {
    match prefix {
        p if p == keys::BRANCH_PREFIX => Keys::Per(Population::Branches),
        p if p == keys::PATRON_PREFIX || p == keys::CARD_PREFIX => Keys::Per(Population::Patrons),
        p if p == keys::VEHICLE_PREFIX || p == keys::PLATE_PREFIX || p == keys::CHASSIS_PREFIX => {
            Keys::Per(Population::Vehicles)
        }
        p if p == keys::ACCOUNT_PREFIX
            || p == keys::EMAIL_LOCK_PREFIX
            || p == keys::HANDLE_LOCK_PREFIX
            || p == keys::OWNER_LOCK_PREFIX =>
        {
            Keys::Per(Population::Accounts)
        }
        p if p == keys::BOOK_PREFIX => Keys::Per(Population::Books),
        p if p == keys::MARKER_PREFIX || p == keys::MIGRATION_PREFIX => Keys::One,
        p if p == keys::ID_PREFIX || p == keys::IDEMPOTENCY_PREFIX || p == keys::OUTBOX_PREFIX => {
            Keys::Unique
        }
        // A resource's events share its partition: how many resources there are is not said.
        _ => Keys::Per(Population::Unknown),
    }
}

/// Every index key family: which index, which partition key (as `singlet_shared::keys` builds
/// it), how many values it takes, and whose entries it holds.
const INDEX_FAMILIES: &[Family] = &[
    Family {
        family: keys::BRANCHES,
        index: Some("GSI1"),
        keys: Keys::One,
        entities: &["branch"],
    },
    Family {
        family: keys::PATRON_PREFIX,
        index: Some("GSI1"),
        keys: Keys::Per(Population::Patrons),
        entities: &["patron"],
    },
    Family {
        family: keys::OPEN_PREFIX,
        index: Some("GSI1"),
        keys: Keys::Shards(keys::OPEN_LOAN_SHARDS),
        entities: &["loan"],
    },
    Family {
        family: keys::HISTORY_PREFIX,
        index: Some("GSI1"),
        keys: Keys::Per(Population::Patrons),
        entities: &["loan"],
    },
    Family {
        family: keys::BOOK_PREFIX,
        index: Some("GSI2"),
        keys: Keys::Per(Population::Books),
        entities: &["copy"],
    },
    Family {
        family: keys::OVERDUE_PREFIX,
        index: Some("GSI3"),
        keys: Keys::Per(Population::Branches),
        entities: &["loan"],
    },
    Family {
        family: keys::ALL_OVERDUE,
        index: Some("GSI4"),
        keys: Keys::One,
        entities: &["loan"],
    },
    Family {
        family: keys::DEPOT_PREFIX,
        index: Some("GSI5"),
        keys: Keys::Per(Population::Depots),
        entities: &["vehicle"],
    },
];

/// Every key family, the table's (one per partition-key prefix of the entity types) then the
/// indexes'.
pub fn families() -> Vec<Family> {
    let mut by_prefix: BTreeMap<&'static str, Vec<&'static str>> = BTreeMap::new();
    for entity in ENTITY_TYPES {
        for shape in entity.keys {
            let names = by_prefix.entry(shape.partition).or_default();
            if !names.contains(&entity.name) {
                names.push(entity.name);
            }
        }
    }
    let mut families: Vec<Family> = by_prefix
        .into_iter()
        .map(|(prefix, entities)| Family {
            family: prefix,
            index: None,
            keys: table_keys(prefix),
            entities: Vec::leak(entities),
        })
        .collect();
    families.extend_from_slice(INDEX_FAMILIES);
    families
}

/// Read and write units on one place.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Units {
    pub read: f64,
    pub write: f64,
}

/// Units per place (`table`, `GSI1`, ...).
pub type PlaceUnits = BTreeMap<String, Units>;

/// `GSI1 0.5 R + 1 W; table 8 W`, the last but one column of COSTS.md.
fn parse_places(text: &str) -> Result<PlaceUnits, String> {
    let mut places = PlaceUnits::new();
    if text.trim() == "nothing" {
        return Ok(places);
    }
    for part in text.split(';') {
        let part = part.trim();
        let (place, figures) = part
            .split_once(' ')
            .ok_or_else(|| format!("no units in {part:?}"))?;
        let units: &mut Units = places.entry(place.to_owned()).or_default();
        for figure in figures.split('+') {
            let mut words = figure.split_whitespace();
            let (Some(number), Some(kind), None) = (words.next(), words.next(), words.next())
            else {
                return Err(format!("{figure:?} is not `<n> R` or `<n> W`"));
            };
            let number: f64 = number
                .parse()
                .map_err(|_| format!("{number:?} is not a number"))?;
            match kind {
                "R" => units.read += number,
                "W" => units.write += number,
                _ => return Err(format!("{kind:?} is neither R nor W")),
            }
        }
    }
    Ok(places)
}

/// Each pattern's units per call, by its function's name: the first row COSTS.md has for it
/// (the plain case: a later row is a variant, such as a plate spelled with separators).
pub fn declared_costs() -> Result<BTreeMap<String, PlaceUnits>, String> {
    let mut costs = BTreeMap::new();
    for line in COSTS_MD.lines() {
        let Some(row) = line.strip_prefix("| `") else {
            continue;
        };
        let cells: Vec<&str> = row.split(" | ").collect();
        // pattern`, operation, why, read, write, places, price |
        if cells.len() < 7 {
            return Err(format!(
                "COSTS.md has a row of {} cells: {line}",
                cells.len()
            ));
        }
        let function = cells[0].trim_end_matches('`');
        let places = parse_places(cells[cells.len() - 2])
            .map_err(|e| format!("COSTS.md, {function}: {e}"))?;
        costs.entry(function.to_owned()).or_insert(places);
    }
    Ok(costs)
}

/// One key family's peak on its busiest key.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyPeak {
    pub family: String,
    pub index: Option<String>,
    pub peak_wcu_per_second: f64,
    pub peak_rcu_per_second: f64,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Ok,
    Hot,
}

/// The table's (or an index's) peak, all keys together.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacePeak {
    pub peak_wcu_per_second: f64,
    pub peak_rcu_per_second: f64,
}

/// One bulk job, paced.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bulk {
    pub work: String,
    pub seconds: f64,
}

/// What `plan --json` prints: the contract's shape.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub keys: Vec<KeyPeak>,
    pub table: PlacePeak,
    pub bulk: Vec<Bulk>,
    pub monthly_cost_usd: f64,
}

/// The plan and what the text output says beside it.
#[derive(Debug, Clone)]
pub struct Report {
    pub plan: Plan,
    /// Each index's peak, next to the table's.
    pub indexes: BTreeMap<String, PlacePeak>,
    /// What each bulk job is limited by.
    pub bulk_limits: Vec<String>,
    pub storage_gb: f64,
    pub monthly_storage_usd: f64,
    pub workload: Workload,
}

impl Report {
    pub fn any_hot(&self) -> bool {
        self.plan.keys.iter().any(|key| key.verdict == Verdict::Hot)
    }
}

/// One kind of work's units per item (a call, a marked loan, an imported row) on each family
/// it touches, and per place.
struct Work {
    per_place: PlaceUnits,
    /// The families it touches, each with the units one item puts on it.
    families: Vec<(Family, Units)>,
}

/// What a call of `function` touches: on each place its read units counted in full on every
/// family of that place holding an entity it reads, and its write units on every family
/// holding an entity it writes (a condition check is billed as a write, on the table only); a
/// call that only queries an index (no entity of its declares which family) counts on each of
/// the index's families.
fn route_work(function: &str, per_place: &PlaceUnits, all: &[Family]) -> Work {
    use singlet_functions::access::Action;
    let reaches = ROUTES
        .iter()
        .find(|route| route.function == function)
        .map(|route| route.access.table)
        .unwrap_or_default();
    let entities = |wanted: &dyn Fn(Action) -> bool| -> Vec<&'static str> {
        reaches
            .iter()
            .filter(|reach| reach.actions.iter().any(|action| wanted(*action)))
            .flat_map(|reach| reach.entities.iter().map(|entity| entity.name))
            .collect()
    };
    let reads = entities(&|action| matches!(action, Action::GetItem | Action::Query));
    let writes_table = entities(&|action| {
        matches!(
            action,
            Action::PutItem | Action::UpdateItem | Action::DeleteItem | Action::ConditionCheckItem
        )
    });
    let writes_index = entities(&|action| {
        matches!(
            action,
            Action::PutItem | Action::UpdateItem | Action::DeleteItem
        )
    });
    let mut families: Vec<(Family, Units)> = Vec::new();
    let mut count =
        |family: &Family, units: Units| match families.iter_mut().find(|(f, _)| f == family) {
            Some((_, counted)) => {
                counted.read += units.read;
                counted.write += units.write;
            }
            None => families.push((*family, units)),
        };
    for (place, units) in per_place {
        let on_place: Vec<&Family> = all.iter().filter(|f| f.place() == place).collect();
        let holding = |names: &[&'static str]| -> Vec<&Family> {
            let held: Vec<&Family> = on_place
                .iter()
                .copied()
                .filter(|family| family.entities.iter().any(|name| names.contains(name)))
                .collect();
            if held.is_empty() && place != TABLE {
                on_place.clone()
            } else {
                held
            }
        };
        if units.read > 0.0 {
            for family in holding(&reads) {
                count(
                    family,
                    Units {
                        read: units.read,
                        write: 0.0,
                    },
                );
            }
        }
        if units.write > 0.0 {
            let writers = if place == TABLE {
                &writes_table
            } else {
                &writes_index
            };
            for family in holding(writers) {
                count(
                    family,
                    Units {
                        read: 0.0,
                        write: units.write,
                    },
                );
            }
        }
    }
    Work {
        per_place: per_place.clone(),
        families,
    }
}

fn family_named(all: &[Family], family: &str, index: Option<&str>) -> Family {
    *all.iter()
        .find(|f| f.family == family && f.index == index)
        .unwrap_or_else(|| panic!("no key family {family} on {index:?}"))
}

/// The marker's units per marked loan: its COSTS.md row is a run that marked one loan, less
/// what every run costs whatever it marks (its shards' queries, the write recording the run).
///
/// Each loan it marks it has also read, in its page of the open-loans shard: a `Query` sums its
/// items' sizes and is charged a unit per 4 KB, half for an eventually consistent read ("Read
/// consumption for queries", <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html>),
/// so `average_item_bytes` / 4 KB / 2 a loan on GSI1 (`plan --simulate` found it missing).
fn marker_work(
    costs: &BTreeMap<String, PlaceUnits>,
    all: &[Family],
    average_item_bytes: f64,
) -> Result<Work, String> {
    let run = costs
        .get("mark-overdue")
        .ok_or("COSTS.md has no row for mark-overdue")?;
    let mut per_loan = PlaceUnits::new();
    for (place, units) in run {
        let write = if place == TABLE {
            units.write - 1.0
        } else {
            units.write
        };
        let read = if place == "GSI1" {
            average_item_bytes / 4096.0 / 2.0
        } else {
            0.0
        };
        per_loan.insert(place.clone(), Units { read, write });
    }
    let place_units = |place: &str| per_loan.get(place).copied().unwrap_or_default();
    let families = vec![
        (
            family_named(all, keys::PATRON_PREFIX, None),
            place_units(TABLE),
        ),
        (
            family_named(all, keys::OPEN_PREFIX, Some("GSI1")),
            place_units("GSI1"),
        ),
        (
            family_named(all, keys::OVERDUE_PREFIX, Some("GSI3")),
            place_units("GSI3"),
        ),
        (
            family_named(all, keys::ALL_OVERDUE, Some("GSI4")),
            place_units("GSI4"),
        ),
    ];
    Ok(Work {
        per_place: per_loan,
        families,
    })
}

/// How long `items` items of `work` take when every key is kept under the workload's
/// `maxKeyWcu`, the table and each index under their warm throughput and all of it under
/// `maxWcu`; and what holds it back.
fn paced(workload: &Workload, items: f64, work: &Work) -> (f64, String) {
    let mut seconds = 0.0;
    let mut limit = String::from("nothing");
    let mut consider = |candidate: f64, why: String| {
        if candidate > seconds {
            seconds = candidate;
            limit = why;
        }
    };
    let total: f64 = work.per_place.values().map(|units| units.write).sum();
    if let Some(max) = workload.max_wcu {
        consider(items * total / max, format!("--max-wcu {max}"));
    }
    let warm = workload.warm_throughput.write_units_per_second;
    for (place, units) in &work.per_place {
        consider(
            items * units.write / warm,
            format!("{place}'s warm throughput ({warm} WCU/s)"),
        );
    }
    for (family, units) in &work.families {
        let share = workload.bulk_share(family.keys);
        let on_hottest = items * units.write * share;
        // A family of unique keys takes one item's units per key: never held back.
        consider(
            on_hottest / workload.max_key_wcu,
            format!(
                "one {} key{} at --max-key-wcu {}",
                family.family,
                family.index.map(|i| format!(" on {i}")).unwrap_or_default(),
                workload.max_key_wcu
            ),
        );
    }
    (seconds, limit)
}

/// How many of each family's entries the table holds: for storage, a load and a migration
/// that rewrites every item.
fn census(workload: &Workload, all: &[Family]) -> Vec<(Family, f64)> {
    let count = |family: &Family| -> f64 {
        let w = workload;
        match (family.index, family.family) {
            (None, f) if f == keys::BRANCH_PREFIX => w.branches + w.patrons + w.copies,
            (None, f) if f == keys::PATRON_PREFIX => w.loans,
            (None, f) if f == keys::CARD_PREFIX => w.patrons,
            (None, f)
                if f == keys::VEHICLE_PREFIX
                    || f == keys::PLATE_PREFIX
                    || f == keys::CHASSIS_PREFIX =>
            {
                w.vehicles
            }
            (None, f)
                if f == keys::ACCOUNT_PREFIX
                    || f == keys::EMAIL_LOCK_PREFIX
                    || f == keys::HANDLE_LOCK_PREFIX
                    || f == keys::OWNER_LOCK_PREFIX =>
            {
                w.accounts
            }
            (None, f) if f == keys::BOOK_PREFIX => w.books.unwrap_or(0.0),
            (None, f) if f == keys::MARKER_PREFIX => 1.0,
            (Some(_), f) if f == keys::BRANCHES => w.branches,
            (Some(_), f) if f == keys::PATRON_PREFIX => w.patrons,
            (Some(_), f) if f == keys::OPEN_PREFIX => w.open_loans(),
            (Some(_), f) if f == keys::HISTORY_PREFIX => w.returned_loans(),
            (Some(_), f) if f == keys::BOOK_PREFIX => w.copies,
            (Some(_), f) if f == keys::OVERDUE_PREFIX || f == keys::ALL_OVERDUE => {
                w.overdue_marked_per_run
            }
            (Some(_), f) if f == keys::DEPOT_PREFIX => w.vehicles,
            // Outbox items, idempotency records, id locks, checkpoints: few, and they expire.
            _ => 0.0,
        }
    };
    all.iter()
        .map(|family| (*family, count(family)))
        .filter(|(_, entries)| *entries > 0.0)
        .collect()
}

/// Every entry of `census` written once (1 W each): a load, or a migration that rewrites every
/// item (an index entry is rewritten with its item).
fn rewrite_all(entries: &[(Family, f64)]) -> (f64, Work) {
    let items: f64 = entries
        .iter()
        .filter(|(family, _)| family.index.is_none())
        .map(|(_, n)| n)
        .sum();
    let mut per_place = PlaceUnits::new();
    let mut families = Vec::new();
    for (family, n) in entries {
        per_place
            .entry(family.place().to_owned())
            .or_default()
            .write += n / items;
        families.push((
            *family,
            Units {
                read: 0.0,
                write: n / items,
            },
        ));
    }
    (
        items,
        Work {
            per_place,
            families,
        },
    )
}

/// A migration's items and its units per item. Each migration's writes are its own
/// (functions/src/migrations); a new one needs its line here, which a test asks for.
fn migration_work(
    name: &str,
    workload: &Workload,
    entries: &[(Family, f64)],
    all: &[Family],
) -> Option<(f64, Work)> {
    let on = |family: &str, index: Option<&str>, write: f64| {
        (family_named(all, family, index), Units { read: 0.0, write })
    };
    let work = |families: Vec<(Family, Units)>| {
        let mut per_place = PlaceUnits::new();
        for (family, units) in &families {
            let place = per_place.entry(family.place().to_owned()).or_default();
            // Families of one place share the place's units: the place counts them once.
            place.write = place.write.max(units.write);
        }
        Work {
            per_place,
            families,
        }
    };
    match name {
        // `_et` and `_v` on every item (and so on its index entries).
        "stamp-entity-types" => Some(rewrite_all(entries)),
        // One UpdateItem per vehicle adding its depot index keys.
        "vehicles-by-depot" => Some((
            workload.vehicles,
            work(vec![
                on(keys::VEHICLE_PREFIX, None, 1.0),
                on(keys::DEPOT_PREFIX, Some("GSI5"), 1.0),
            ]),
        )),
        // One transaction per vehicle: two locks put, two deleted, the vehicle stamped (5 × 2),
        // and its depot index entry rewritten.
        "plates-compact" => {
            let mut plates = work(vec![
                on(keys::VEHICLE_PREFIX, None, 10.0),
                on(keys::PLATE_PREFIX, None, 4.0),
                on(keys::CHASSIS_PREFIX, None, 4.0),
                on(keys::DEPOT_PREFIX, Some("GSI5"), 1.0),
            ]);
            plates.per_place.insert(
                TABLE.to_owned(),
                Units {
                    read: 0.0,
                    write: 10.0,
                },
            );
            Some((workload.vehicles, plates))
        }
        // One UpdateItem per returned loan, its history entry rewritten with it.
        "returned-loans-expire" => Some((
            workload.returned_loans(),
            work(vec![
                on(keys::PATRON_PREFIX, None, 1.0),
                on(keys::HISTORY_PREFIX, Some("GSI1"), 1.0),
            ]),
        )),
        _ => None,
    }
}

/// Each create route an import runs as, by the entity count it imports.
fn imports(workload: &Workload) -> [(&'static str, &'static str, f64); 4] {
    [
        ("branches", "create-branch", workload.branches),
        ("patrons", "register-patron", workload.patrons),
        ("vehicles", "register-vehicle", workload.vehicles),
        ("accounts", "create-account", workload.accounts),
    ]
}

fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// The plan of `workload`.
pub fn plan(workload: &Workload) -> Result<Report, String> {
    let costs = declared_costs()?;
    let all = families();
    let calls = workload.peak_calls();

    // Peak units a second on each family's busiest key, and on each place.
    let mut peaks: Vec<(Family, Units)> = all.iter().map(|f| (*f, Units::default())).collect();
    let mut places: BTreeMap<String, PlacePeak> = BTreeMap::new();
    let mut add = |family: &Family, units: Units, rate: f64| {
        let share = workload.hottest_share(family.keys);
        // A unique key meets one call, at most once a second.
        let on_key = if family.keys == Keys::Unique {
            rate.min(1.0)
        } else {
            rate * share
        };
        if let Some((_, peak)) = peaks.iter_mut().find(|(f, _)| f == family) {
            peak.read += units.read * on_key;
            peak.write += units.write * on_key;
        }
    };
    let mut monthly_read_units = 0.0;
    let mut monthly_write_units = 0.0;
    for (function, rate) in &calls {
        let per_call = costs
            .get(*function)
            .ok_or_else(|| format!("COSTS.md has no row for {function}"))?;
        let work = route_work(function, per_call, &all);
        for (family, units) in &work.families {
            add(family, *units, *rate);
        }
        for (place, units) in per_call {
            let peak = places.entry(place.clone()).or_default();
            peak.peak_rcu_per_second += units.read * rate;
            peak.peak_wcu_per_second += units.write * rate;
            // The day's calls, over a month.
            let per_month = rate / workload.peak_to_mean
                * workload.hours_per_day
                * 3_600.0
                * (SECONDS_PER_MONTH / 86_400.0);
            monthly_read_units += units.read * per_month;
            monthly_write_units += units.write * per_month;
        }
    }

    // The marker's run, at its paced rate, on top of the peak's calls.
    let mut bulk = Vec::new();
    let mut bulk_limits = Vec::new();
    let marker = marker_work(&costs, &all, workload.average_item_bytes)?;
    let marked = workload.overdue_marked_per_run;
    let (marker_seconds, marker_limit) = paced(workload, marked, &marker);
    if marker_seconds > 0.0 {
        let loans_per_second = marked / marker_seconds;
        for (family, units) in &marker.families {
            let share = workload.bulk_share(family.keys);
            if let Some((_, peak)) = peaks.iter_mut().find(|(f, _)| f == family) {
                peak.write += units.write * loans_per_second * share;
                peak.read += units.read * loans_per_second * share;
            }
        }
        for (place, units) in &marker.per_place {
            let peak = places.entry(place.clone()).or_default();
            peak.peak_wcu_per_second += units.write * loans_per_second;
            peak.peak_rcu_per_second += units.read * loans_per_second;
        }
    }
    bulk.push(Bulk {
        work: format!("mark-overdue: a run marking {marked} loans"),
        seconds: round(marker_seconds),
    });
    bulk_limits.push(marker_limit);
    // A day's marker: its runs' shard queries and records, and one run's loans.
    let marker_run = costs.get("mark-overdue").expect("checked above");
    for (place, units) in marker_run {
        monthly_read_units += units.read * MARKER_RUNS_PER_DAY * SECONDS_PER_MONTH / 86_400.0;
        let per_run_write = if place == TABLE { 1.0 } else { 0.0 };
        monthly_write_units += per_run_write * MARKER_RUNS_PER_DAY * SECONDS_PER_MONTH / 86_400.0;
    }
    let marker_units: f64 = marker.per_place.values().map(|u| u.write).sum();
    monthly_write_units += marker_units * marked * SECONDS_PER_MONTH / 86_400.0;
    let marker_read_units: f64 = marker.per_place.values().map(|u| u.read).sum();
    monthly_read_units += marker_read_units * marked * SECONDS_PER_MONTH / 86_400.0;

    // Imports of every entity, a load of the whole table, each migration.
    for (kind, function, rows) in imports(workload) {
        let per_row = costs
            .get(function)
            .ok_or_else(|| format!("COSTS.md has no row for {function}"))?;
        let work = route_work(function, per_row, &all);
        let (seconds, limit) = paced(workload, rows, &work);
        bulk.push(Bulk {
            work: format!("import {kind}: {rows} rows"),
            seconds: round(seconds),
        });
        bulk_limits.push(limit);
    }
    let entries = census(workload, &all);
    let (items, load) = rewrite_all(&entries);
    let (seconds, limit) = paced(workload, items, &load);
    bulk.push(Bulk {
        work: format!("load: every item ({items} items and their index entries)"),
        seconds: round(seconds),
    });
    bulk_limits.push(limit);
    for migration in singlet_functions::migrations::MIGRATIONS {
        let (items, work) = migration_work(migration.name, workload, &entries, &all)
            .ok_or_else(|| format!("plan has no model of the migration {}", migration.name))?;
        let (seconds, limit) = paced(workload, items, &work);
        bulk.push(Bulk {
            work: format!("migrate {}: {items} items", migration.name),
            seconds: round(seconds),
        });
        bulk_limits.push(limit);
    }

    let stored: f64 = entries.iter().map(|(_, n)| n).sum();
    let storage_gb =
        stored * (workload.average_item_bytes + ITEM_OVERHEAD_BYTES) / (1024.0 * 1024.0 * 1024.0);
    let monthly_storage_usd = storage_gb * workload.prices.per_gb_month;
    let monthly = monthly_read_units / 1e6 * workload.prices.per_million_read_units
        + monthly_write_units / 1e6 * workload.prices.per_million_write_units
        + monthly_storage_usd;

    let keys = peaks
        .into_iter()
        .map(|(family, units)| {
            let hot = units.write > KEY_WRITE_LIMIT || units.read > KEY_READ_LIMIT;
            KeyPeak {
                family: family.family.to_owned(),
                index: family.index.map(str::to_owned),
                peak_wcu_per_second: round(units.write),
                peak_rcu_per_second: round(units.read),
                verdict: if hot { Verdict::Hot } else { Verdict::Ok },
            }
        })
        .collect();
    let table = places.remove(TABLE).unwrap_or_default();
    let table = PlacePeak {
        peak_wcu_per_second: round(table.peak_wcu_per_second),
        peak_rcu_per_second: round(table.peak_rcu_per_second),
    };
    let indexes = places
        .into_iter()
        .map(|(place, peak)| {
            (
                place,
                PlacePeak {
                    peak_wcu_per_second: round(peak.peak_wcu_per_second),
                    peak_rcu_per_second: round(peak.peak_rcu_per_second),
                },
            )
        })
        .collect();
    Ok(Report {
        plan: Plan {
            keys,
            table,
            bulk,
            monthly_cost_usd: round(monthly),
        },
        indexes,
        bulk_limits,
        storage_gb,
        monthly_storage_usd,
        workload: workload.clone(),
    })
}

/// The plan as a person reads it.
pub fn text(report: &Report) -> String {
    use std::fmt::Write;
    let plan = &report.plan;
    let warm = report.workload.warm_throughput;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Key families, peak units a second on the busiest key (limits: {KEY_WRITE_LIMIT} WCU, \
         {KEY_READ_LIMIT} RCU a key):"
    );
    let _ = writeln!(
        out,
        "  {:<16} {:<6} {:>10} {:>10}  verdict",
        "family", "index", "WCU/s", "RCU/s"
    );
    for key in &plan.keys {
        let _ = writeln!(
            out,
            "  {:<16} {:<6} {:>10.2} {:>10.2}  {}",
            key.family,
            key.index.as_deref().unwrap_or("table"),
            key.peak_wcu_per_second,
            key.peak_rcu_per_second,
            match key.verdict {
                Verdict::Ok => "ok",
                Verdict::Hot => "HOT",
            }
        );
    }
    let _ = writeln!(
        out,
        "\nPeak, all keys (warm throughput {} WCU/s, {} RCU/s each):",
        warm.write_units_per_second, warm.read_units_per_second
    );
    let _ = writeln!(
        out,
        "  table  {:>10.2} WCU/s {:>10.2} RCU/s",
        plan.table.peak_wcu_per_second, plan.table.peak_rcu_per_second
    );
    for (index, peak) in &report.indexes {
        let _ = writeln!(
            out,
            "  {index:<6} {:>10.2} WCU/s {:>10.2} RCU/s",
            peak.peak_wcu_per_second, peak.peak_rcu_per_second
        );
    }
    let _ = writeln!(
        out,
        "\nBulk work, paced (--max-key-wcu {}{}):",
        report.workload.max_key_wcu,
        report
            .workload
            .max_wcu
            .map(|max| format!(", --max-wcu {max}"))
            .unwrap_or_default()
    );
    for (job, limit) in plan.bulk.iter().zip(&report.bulk_limits) {
        let _ = writeln!(
            out,
            "  {:<62} {:>9.0} s ({:.1} h), held by {limit}",
            job.work,
            job.seconds,
            job.seconds / 3_600.0
        );
    }
    let _ = writeln!(
        out,
        "\nStorage: {:.1} GB, ${:.2} a month",
        report.storage_gb, report.monthly_storage_usd
    );
    let _ = writeln!(
        out,
        "Monthly cost on demand (requests and storage, list prices): ${:.2}",
        plan.monthly_cost_usd
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_column_reads_as_units() {
        let places = parse_places("GSI1 0.5 R + 1 W; table 8 W").unwrap();
        assert_eq!(
            places["GSI1"],
            Units {
                read: 0.5,
                write: 1.0
            }
        );
        assert_eq!(
            places[TABLE],
            Units {
                read: 0.0,
                write: 8.0
            }
        );
        assert!(parse_places("table 8 X").is_err());
        assert!(parse_places("table").is_err());
    }

    #[test]
    fn every_route_and_the_marker_have_their_costs() {
        let costs = declared_costs().unwrap();
        for route in ROUTES {
            assert!(costs.contains_key(route.function), "{}", route.function);
        }
        let marker = &costs["mark-overdue"];
        assert_eq!(marker["GSI4"].write, 1.0);
        assert_eq!(costs["checkout-book"][TABLE].write, 10.0);
    }

    #[test]
    fn every_migration_has_a_model() {
        let workload = Workload::default();
        let all = families();
        let entries = census(&workload, &all);
        for migration in singlet_functions::migrations::MIGRATIONS {
            assert!(
                migration_work(migration.name, &workload, &entries, &all).is_some(),
                "{}",
                migration.name
            );
        }
    }

    #[test]
    fn the_peak_is_ten_times_the_mean_of_a_ten_hour_day() {
        let calls = Workload::default().peak_calls();
        // 100,000 checkouts over 36,000 seconds, times 10.
        assert!((calls["checkout-book"] - 27.777).abs() < 0.01);
        assert!((calls["return-book"] - 27.777).abs() < 0.01);
        assert_eq!(calls.len(), 2);
    }

    fn key<'r>(report: &'r Report, family: &str, index: Option<&str>) -> &'r KeyPeak {
        report
            .plan
            .keys
            .iter()
            .find(|k| k.family == family && k.index.as_deref() == index)
            .unwrap_or_else(|| panic!("no {family} on {index:?}"))
    }

    #[test]
    fn the_default_workload_has_no_hot_family() {
        let report = plan(&Workload::default()).unwrap();
        assert!(!report.any_hot(), "{}", text(&report));
        // The marker, paced, puts 800 entries a second into `OVERDUE`: 50,000 take 62.5 s.
        let overdue = key(&report, "OVERDUE", Some("GSI4"));
        assert_eq!(overdue.peak_wcu_per_second, 800.0);
        assert_eq!(report.plan.bulk[0].seconds, 62.5);
        // Checkouts and returns at peak: (10 + 12) W on the table each a second, 27.8 of each,
        // and the marker's 800 loans a second, 1 W each.
        let expected = 27.777_777 * 22.0 + 800.0;
        assert!((report.plan.table.peak_wcu_per_second - expected).abs() < 0.1);
        assert!(report.plan.table.peak_wcu_per_second < NEW_ON_DEMAND_TABLE.write_units_per_second);
    }

    #[test]
    fn an_unpaced_marker_or_a_single_busy_key_is_hot() {
        // The marker allowed the whole limit and more: its run writes past 1,000 a second
        // into `OVERDUE`.
        let unpaced = Workload {
            max_key_wcu: 3_200.0,
            ..Workload::default()
        };
        let report = plan(&unpaced).unwrap();
        assert_eq!(key(&report, "OVERDUE", Some("GSI4")).verdict, Verdict::Hot);
        assert!(report.any_hot());
        // 400 lookups a second of one plate are 400 RCU on one `PLATE#` key: fine; 4,000 are hot.
        let busy = |calls: f64| {
            let mut workload = Workload::default();
            workload
                .calls_per_second
                .insert("find-by-plate".into(), calls);
            workload.skew = workload.vehicles;
            plan(&workload).unwrap()
        };
        assert_eq!(key(&busy(400.0), "PLATE#", None).peak_rcu_per_second, 400.0);
        assert_eq!(key(&busy(4_000.0), "PLATE#", None).verdict, Verdict::Hot);
    }

    #[test]
    fn a_bulk_job_is_held_by_its_hottest_key_or_by_the_table() {
        let report = plan(&Workload::default()).unwrap();
        let seconds = |prefix: &str| {
            report
                .plan
                .bulk
                .iter()
                .find(|job| job.work.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix}"))
                .seconds
        };
        // A million patrons, 8 W each on the table: 8,000,000 / 4,000 a second.
        assert_eq!(seconds("import patrons"), 2_000.0);
        // 100,000 vehicles into one depot (their number unknown): 100,000 / 800.
        assert_eq!(seconds("migrate vehicles-by-depot"), 125.0);
        // With 100 depots, the table's warm throughput holds it: 100,000 / 4,000.
        let spread = plan(&Workload {
            depots: Some(100.0),
            ..Workload::default()
        })
        .unwrap();
        let job = spread
            .plan
            .bulk
            .iter()
            .find(|job| job.work.starts_with("migrate vehicles-by-depot"))
            .unwrap();
        assert_eq!(job.seconds, 25.0);
    }

    #[test]
    fn a_bad_workload_is_refused_naming_what_is_wrong() {
        let refused = |text: &str| Workload::parse(text).unwrap_err();
        assert!(refused("{").contains("not one plan reads"));
        assert!(refused(r#"{"patrons": -1}"#).contains("patrons"));
        assert!(refused(r#"{"hoursPerDay": 0}"#).contains("hoursPerDay"));
        assert!(refused(r#"{"callsPerSecond": {"get-nothing": 1}}"#).contains("get-nothing"));
        assert!(refused(r#"{"patron": 5}"#).contains("patron"));
        let given = Workload::parse(r#"{"branches": 10, "checkoutsPerDay": 3600}"#).unwrap();
        assert_eq!(given.branches, 10.0);
        assert_eq!(given.patrons, 1_000_000.0);
    }

    #[test]
    fn storage_and_cost_follow_the_counts() {
        let report = plan(&Workload::default()).unwrap();
        assert!(
            report.storage_gb > 5.0 && report.storage_gb < 20.0,
            "{}",
            report.storage_gb
        );
        assert!(report.plan.monthly_cost_usd > 0.0);
        let bigger = plan(&Workload {
            checkouts_per_day: 200_000.0,
            ..Workload::default()
        })
        .unwrap();
        assert!(bigger.plan.monthly_cost_usd > report.plan.monthly_cost_usd);
    }
}
