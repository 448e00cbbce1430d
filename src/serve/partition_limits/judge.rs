//! The limiter: each DynamoDB request judged against the per-key limits before the engine runs
//! it ([`Limiter::judge`]), and what it consumed learned from the engine's answer
//! ([`Limiter::settle`]).
//!
//! What a request says is what it is judged on: the table key it names, the index entries a put
//! makes, and the entries the item it replaces or deletes held (read from the engine, in process,
//! before the write). What it cannot say (the index keys an update writes, how large a read's items
//! are) is learned after the fact from the engine, and charged then: a later request to that key
//! is refused, as an index's back-pressure reaches the table on AWS.

use super::expressions::{Assignments, queried_key};
use super::heat::{Charge, Kind, Meter, Over};
use super::refusals;
use super::schema::{Table, key_text};
use super::units::{item_size, read_halves, write_halves};
use dynoxide::Database;
use serde_json::{Map, Value, json};
use singlet_functions::clock::Clock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Item = Map<String, Value>;

pub struct Limiter {
    db: Database,
    clock: Clock,
    pub meter: Meter,
    schemas: Mutex<HashMap<String, Option<Arc<Table>>>>,
}

/// What to do with a request.
pub enum Verdict {
    /// Send it to the engine (`body`: rewritten, when a batch lost items to the limits), then
    /// [`Limiter::settle`] with the answer.
    Send {
        body: Option<Vec<u8>>,
        pending: Pending,
    },
    /// Refuse it with this `400` body, as DynamoDB would.
    Refuse(String),
}

impl Verdict {
    fn send(pending: Pending) -> Verdict {
        Verdict::Send {
            body: None,
            pending,
        }
    }
}

/// What a request sent to the engine took, and what to learn from the answer.
pub struct Pending {
    taken: Vec<Charge>,
    work: Work,
}

impl Pending {
    fn nothing() -> Pending {
        Pending {
            taken: Vec::new(),
            work: Work::Nothing,
        }
    }
}

enum Work {
    Nothing,
    Write(Vec<Write>),
    Read(Vec<Read>),
    /// A batch's items the limits kept back, per table, to join the answer's unprocessed ones.
    BatchWrite(Map<String, Value>),
    BatchGet(Map<String, Value>, Vec<Read>),
}

#[derive(Clone)]
enum New {
    /// A put's item, or none (a delete).
    Known(Option<Item>),
    /// An update: read from the engine once it has run; before, what its expression says
    /// plainly (`SET a = :v`, `REMOVE a`) applied to the item as it stands.
    Updated(Assignments),
    /// A transaction's condition check: nothing written.
    Checked,
}

struct Write {
    table: String,
    schema: Arc<Table>,
    key: Item,
    old: Option<Item>,
    new: New,
    transactional: bool,
}

struct Read {
    table: String,
    pk: String,
    consistent: bool,
    transactional: bool,
    /// Where the answer's items are: a `GetItem`'s `Item`, a `Query`'s `Items`, the position of a
    /// transaction's part, or a batch's items (keyed by their own partition key).
    answer: Answered,
    taken: Charge,
}

enum Answered {
    Item,
    Items,
    Part(usize),
    Batch,
}

/// How a write's answer came back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    /// A condition refused it: the table's units are consumed, no index is written.
    Refused,
    /// Not run at all (a malformed request): nothing is consumed.
    NotRun,
}

impl Limiter {
    pub fn new(db: Database, clock: Clock) -> Limiter {
        Limiter {
            db,
            clock,
            meter: Meter::default(),
            schemas: Mutex::default(),
        }
    }

    pub fn second(&self) -> i64 {
        self.clock.now().unix_timestamp()
    }

    fn schema(&self, table: &str) -> Option<Arc<Table>> {
        let mut schemas = self.schemas.lock().expect("not poisoned");
        if let Some(known) = schemas.get(table) {
            return known.clone();
        }
        let read = Table::read(&self.db, table).map(Arc::new);
        // A table not there yet is asked again next time (it may be being created).
        if read.is_some() {
            schemas.insert(table.to_owned(), read.clone());
        }
        read
    }

    /// The item at `key` in `table` as the engine holds it now, in DynamoDB JSON.
    fn read_item(&self, table: &str, key: &Item) -> Option<Item> {
        let request = serde_json::from_value(json!({
            "TableName": table, "Key": key, "ConsistentRead": true,
        }))
        .ok()?;
        let item = self.db.get_item(request).ok()?.item?;
        match serde_json::to_value(item).ok()? {
            Value::Object(item) => Some(item),
            _ => None,
        }
    }

    /// Judges `operation` (`PutItem`, …) with JSON `body` against the limits, taking what it
    /// consumes when it passes.
    pub fn judge(&self, operation: &str, body: &[u8]) -> Verdict {
        if matches!(operation, "CreateTable" | "UpdateTable" | "DeleteTable") {
            self.schemas.lock().expect("not poisoned").clear();
            return Verdict::send(Pending::nothing());
        }
        let watched = matches!(
            operation,
            "PutItem"
                | "UpdateItem"
                | "DeleteItem"
                | "GetItem"
                | "Query"
                | "BatchWriteItem"
                | "BatchGetItem"
                | "TransactWriteItems"
                | "TransactGetItems"
        );
        if !watched {
            return Verdict::send(Pending::nothing());
        }
        // A body the engine cannot read is the engine's to refuse.
        let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
            return Verdict::send(Pending::nothing());
        };
        let second = self.second();
        match operation {
            "PutItem" | "UpdateItem" | "DeleteItem" => {
                let Some(write) = self.write_of(operation, &request, false) else {
                    return Verdict::send(Pending::nothing());
                };
                let charges = write.charges(&write.predicted(), Outcome::Written);
                match self.meter.take(second, &charges) {
                    Ok(()) => Verdict::send(Pending {
                        taken: charges,
                        work: Work::Write(vec![write]),
                    }),
                    Err(Over { charge }) => Verdict::Refuse(refusals::throughput_exceeded(&charge)),
                }
            }
            "TransactWriteItems" => self.judge_transact_write(second, &request),
            "GetItem" | "Query" => {
                let Some(read) = self.read_of(operation, &request) else {
                    return Verdict::send(Pending::nothing());
                };
                match self.meter.take(second, std::slice::from_ref(&read.taken)) {
                    Ok(()) => Verdict::send(Pending {
                        taken: vec![read.taken.clone()],
                        work: Work::Read(vec![read]),
                    }),
                    Err(Over { charge }) => Verdict::Refuse(refusals::throughput_exceeded(&charge)),
                }
            }
            "TransactGetItems" => self.judge_transact_get(second, &request),
            "BatchWriteItem" => self.judge_batch_write(second, request),
            "BatchGetItem" => self.judge_batch_get(second, request),
            _ => Verdict::send(Pending::nothing()),
        }
    }

    /// A single write (`PutItem`, `UpdateItem`, `DeleteItem`, or a transaction's part with
    /// `ConditionCheck`) of `request`, its item as it stands read from the engine.
    fn write_of(&self, operation: &str, request: &Item, transactional: bool) -> Option<Write> {
        let table = request.get("TableName")?.as_str()?.to_owned();
        let schema = self.schema(&table)?;
        let (key, new) = match operation {
            "PutItem" | "Put" => {
                let item = request.get("Item")?.as_object()?.clone();
                let key = schema_key(&schema, &item)?;
                (key, New::Known(Some(item)))
            }
            "UpdateItem" | "Update" => (
                request.get("Key")?.as_object()?.clone(),
                New::Updated(Assignments::of(request)),
            ),
            "DeleteItem" | "Delete" => (request.get("Key")?.as_object()?.clone(), New::Known(None)),
            "ConditionCheck" => (request.get("Key")?.as_object()?.clone(), New::Checked),
            _ => return None,
        };
        key_text(key.get(&schema.keys.hash)?)?;
        // The item as it stands, for the entries it holds and its size; not read for a put that
        // only creates (it writes nothing when the item is there, and replaces nothing when it
        // is not) nor for a condition check (charged the least a write takes): a read each
        // would slow every registration, whose parts are all of these.
        let old = match &new {
            New::Checked => None,
            New::Known(Some(_)) if only_creates(request) => None,
            _ => self.read_item(&table, &key),
        };
        Some(Write {
            table,
            schema,
            key,
            old,
            new,
            transactional,
        })
    }

    fn judge_transact_write(&self, second: i64, request: &Item) -> Verdict {
        let Some(parts) = request.get("TransactItems").and_then(Value::as_array) else {
            return Verdict::send(Pending::nothing());
        };
        let mut writes = Vec::new();
        for part in parts {
            let write = part.as_object().and_then(|part| {
                let (kind, body) = part.iter().next()?;
                self.write_of(kind, body.as_object()?, true)
            });
            match write {
                Some(write) => writes.push(write),
                // A part the engine will refuse: the whole transaction is its to answer.
                None => return Verdict::send(Pending::nothing()),
            }
        }
        let charges: Vec<Vec<Charge>> = writes
            .iter()
            .map(|w| w.charges(&w.predicted(), Outcome::Written))
            .collect();
        let parts_charges: Vec<&[Charge]> = charges.iter().map(Vec::as_slice).collect();
        match self.meter.take_each(second, &parts_charges) {
            Ok(()) => Verdict::send(Pending {
                taken: charges.into_iter().flatten().collect(),
                work: Work::Write(writes),
            }),
            Err(refused) => {
                let parts: Vec<usize> = refused.iter().map(|(p, _)| *p).collect();
                Verdict::Refuse(refusals::transaction_throttled(writes.len(), &parts))
            }
        }
    }

    /// A read (`GetItem`, `Query`, a transaction's `Get`) of `request`: the key it reads and the
    /// least it can consume.
    fn read_of(&self, operation: &str, request: &Item) -> Option<Read> {
        let table = request.get("TableName")?.as_str()?.to_owned();
        let schema = self.schema(&table)?;
        let transactional = operation == "Get";
        let consistent = transactional
            || request
                .get("ConsistentRead")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        let (index, pk, answer) = match operation {
            "GetItem" | "Get" => {
                let key = request.get("Key")?.as_object()?;
                let answer = if transactional {
                    Answered::Part(0)
                } else {
                    Answered::Item
                };
                (None, key_text(key.get(&schema.keys.hash)?)?, answer)
            }
            "Query" => {
                let index = request.get("IndexName").and_then(Value::as_str);
                let hash = match index {
                    Some(name) => &schema.index(name)?.keys.hash,
                    None => &schema.keys.hash,
                };
                let pk = queried_key(request, hash)?;
                (index.map(str::to_owned), pk, Answered::Items)
            }
            _ => return None,
        };
        let taken = Charge {
            table: table.clone(),
            index: index.clone(),
            pk: pk.clone(),
            kind: Kind::Read,
            halves: read_halves(0, consistent, transactional),
        };
        Some(Read {
            table,
            pk,
            consistent,
            transactional,
            answer,
            taken,
        })
    }

    fn judge_transact_get(&self, second: i64, request: &Item) -> Verdict {
        let Some(parts) = request.get("TransactItems").and_then(Value::as_array) else {
            return Verdict::send(Pending::nothing());
        };
        let mut reads = Vec::new();
        for (at, part) in parts.iter().enumerate() {
            let read = part
                .get("Get")
                .and_then(Value::as_object)
                .and_then(|get| self.read_of("Get", get));
            match read {
                Some(mut read) => {
                    read.answer = Answered::Part(at);
                    reads.push(read);
                }
                None => return Verdict::send(Pending::nothing()),
            }
        }
        let charges: Vec<[Charge; 1]> = reads.iter().map(|r| [r.taken.clone()]).collect();
        let parts_charges: Vec<&[Charge]> = charges.iter().map(|c| c.as_slice()).collect();
        match self.meter.take_each(second, &parts_charges) {
            Ok(()) => Verdict::send(Pending {
                taken: charges.into_iter().flatten().collect(),
                work: Work::Read(reads),
            }),
            Err(refused) => {
                let parts: Vec<usize> = refused.iter().map(|(p, _)| *p).collect();
                Verdict::Refuse(refusals::transaction_throttled(reads.len(), &parts))
            }
        }
    }

    /// Each item of a batch judged on its own: those over a limit are left out of what the
    /// engine is sent and answered as `UnprocessedItems`; all of them over, the batch is refused.
    fn judge_batch_write(&self, second: i64, mut request: Item) -> Verdict {
        let Some(Value::Object(tables)) = request.get_mut("RequestItems") else {
            return Verdict::send(Pending::nothing());
        };
        let mut taken = Vec::new();
        let mut kept_back = Map::new();
        let mut first_over = None;
        let mut sent = 0;
        for (table, requests) in tables.iter_mut() {
            let Value::Array(requests) = requests else {
                continue;
            };
            let mut held = Vec::new();
            requests.retain(|entry| {
                let write = entry.as_object().and_then(|entry| {
                    let (kind, body) = entry.iter().next()?;
                    let mut body = body.as_object()?.clone();
                    body.insert("TableName".into(), Value::String(table.clone()));
                    let operation = match kind.as_str() {
                        "PutRequest" => "PutItem",
                        "DeleteRequest" => "DeleteItem",
                        _ => return None,
                    };
                    self.write_of(operation, &body, false)
                });
                let Some(write) = write else {
                    sent += 1;
                    return true;
                };
                let charges = write.charges(&write.predicted(), Outcome::Written);
                match self.meter.take(second, &charges) {
                    Ok(()) => {
                        taken.extend(charges);
                        sent += 1;
                        true
                    }
                    Err(Over { charge }) => {
                        first_over.get_or_insert(charge);
                        held.push(entry.clone());
                        false
                    }
                }
            });
            if !held.is_empty() {
                kept_back.insert(table.clone(), Value::Array(held));
            }
        }
        if kept_back.is_empty() {
            return Verdict::send(Pending {
                taken,
                work: Work::Nothing,
            });
        }
        if sent == 0 {
            let over = first_over.expect("an item was kept back");
            return Verdict::Refuse(refusals::throughput_exceeded(&over));
        }
        tables.retain(|_, requests| requests.as_array().is_some_and(|r| !r.is_empty()));
        Verdict::Send {
            body: serde_json::to_vec(&request).ok(),
            pending: Pending {
                taken,
                work: Work::BatchWrite(kept_back),
            },
        }
    }

    fn judge_batch_get(&self, second: i64, mut request: Item) -> Verdict {
        let Some(Value::Object(tables)) = request.get_mut("RequestItems") else {
            return Verdict::send(Pending::nothing());
        };
        let mut reads = Vec::new();
        let mut kept_back = Map::new();
        let mut first_over = None;
        let mut sent = 0;
        for (table, asked) in tables.iter_mut() {
            let Some(asked) = asked.as_object_mut() else {
                continue;
            };
            let consistent = asked.get("ConsistentRead").cloned();
            let Some(Value::Array(keys)) = asked.get_mut("Keys") else {
                continue;
            };
            let mut held = Vec::new();
            keys.retain(|key| {
                let mut get = Map::new();
                get.insert("TableName".into(), Value::String(table.clone()));
                get.insert("Key".into(), key.clone());
                if let Some(consistent) = &consistent {
                    get.insert("ConsistentRead".into(), consistent.clone());
                }
                let Some(mut read) = self.read_of("GetItem", &get) else {
                    sent += 1;
                    return true;
                };
                read.answer = Answered::Batch;
                match self.meter.take(second, std::slice::from_ref(&read.taken)) {
                    Ok(()) => {
                        reads.push(read);
                        sent += 1;
                        true
                    }
                    Err(Over { charge }) => {
                        first_over.get_or_insert(charge);
                        held.push(key.clone());
                        false
                    }
                }
            });
            if !held.is_empty() {
                let mut back = asked.clone();
                back.insert("Keys".into(), Value::Array(held));
                kept_back.insert(table.clone(), Value::Object(back));
            }
        }
        let taken: Vec<Charge> = reads.iter().map(|r| r.taken.clone()).collect();
        if kept_back.is_empty() {
            return Verdict::send(Pending {
                taken,
                work: Work::BatchGet(kept_back, reads),
            });
        }
        if sent == 0 {
            let over = first_over.expect("a key was kept back");
            return Verdict::Refuse(refusals::throughput_exceeded(&over));
        }
        tables.retain(|_, asked| {
            asked
                .get("Keys")
                .and_then(Value::as_array)
                .is_some_and(|k| !k.is_empty())
        });
        Verdict::Send {
            body: serde_json::to_vec(&request).ok(),
            pending: Pending {
                taken,
                work: Work::BatchGet(kept_back, reads),
            },
        }
    }

    /// Learns what a request sent to the engine consumed from its answer (`status`, `body`), and
    /// charges what it did not take when judged, or gives back what it took and did not use.
    /// Returns the body to answer with when the limiter changed it (a batch's unprocessed items).
    pub fn settle(&self, pending: Pending, status: u16, body: &[u8]) -> Option<Vec<u8>> {
        if matches!(pending.work, Work::Nothing) && pending.taken.is_empty() {
            return None;
        }
        let answer: Option<Value> = serde_json::from_slice(body).ok();
        let error = (status != 200).then(|| {
            answer
                .as_ref()
                .and_then(|a| a.get("__type"))
                .and_then(Value::as_str)
                .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned())
                .unwrap_or_default()
        });
        let second = self.second();
        let mut rewritten = None;
        let used: Vec<Charge> = match pending.work {
            Work::Nothing => match error {
                None => pending.taken.clone(),
                Some(_) => Vec::new(),
            },
            Work::Write(writes) => {
                let reasons: Vec<String> = answer
                    .as_ref()
                    .and_then(|a| a.get("CancellationReasons"))
                    .and_then(Value::as_array)
                    .map(|r| {
                        r.iter()
                            .map(|r| r.get("Code").and_then(Value::as_str).unwrap_or("None"))
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let outcome = match error.as_deref() {
                    None => Outcome::Written,
                    Some("ConditionalCheckFailedException" | "TransactionCanceledException") => {
                        Outcome::Refused
                    }
                    Some(_) => Outcome::NotRun,
                };
                writes
                    .iter()
                    .enumerate()
                    .flat_map(|(at, write)| {
                        // A cancelled transaction consumed its parts' table units; a part that
                        // conflicted with another transaction was not run.
                        let outcome = match reasons.get(at).map(String::as_str) {
                            Some("TransactionConflict" | "ThrottlingError") => Outcome::NotRun,
                            _ => outcome,
                        };
                        let new = match (&write.new, outcome) {
                            (New::Updated(_), Outcome::Written) => {
                                New::Known(self.read_item(&write.table, &write.key))
                            }
                            (New::Updated(_), _) => write.predicted(),
                            (other, _) => other.clone(),
                        };
                        write.charges(&new, outcome)
                    })
                    .collect()
            }
            Work::Read(reads) => match error {
                Some(_) => Vec::new(),
                None => reads
                    .iter()
                    .map(|read| read.used(answer.as_ref()))
                    .collect(),
            },
            Work::BatchWrite(kept_back) => {
                if error.is_some() {
                    Vec::new()
                } else {
                    rewritten = with_unprocessed(answer, "UnprocessedItems", kept_back);
                    pending.taken.clone()
                }
            }
            Work::BatchGet(kept_back, reads) => {
                if error.is_some() {
                    Vec::new()
                } else {
                    let used = batch_reads_used(&reads, answer.as_ref());
                    if !kept_back.is_empty() {
                        rewritten = with_unprocessed(answer, "UnprocessedKeys", kept_back);
                    }
                    used
                }
            }
        };
        let (more, less) = difference(&used, &pending.taken);
        self.meter.settle(second, &more, false);
        self.meter.settle(second, &less, true);
        rewritten
    }
}

impl Write {
    /// What the item is taken to become before the engine has run the write: a put's item, none
    /// for a delete, and for an update or a check the item as it stands.
    fn predicted(&self) -> New {
        let standing = || self.old.clone().unwrap_or_else(|| self.key.clone());
        match &self.new {
            New::Updated(assignments) => New::Known(Some(assignments.applied(standing()))),
            New::Checked => New::Known(Some(standing())),
            known => known.clone(),
        }
    }

    /// The units this write consumes at each key when the item becomes `new`: the table's by the
    /// larger of the item before and after; each index one write per entry put or deleted (an
    /// entry whose key changes is both); a write a condition refused, the table's only.
    fn charges(&self, new: &New, outcome: Outcome) -> Vec<Charge> {
        if outcome == Outcome::NotRun {
            return Vec::new();
        }
        let new = match new {
            New::Known(new) => new.as_ref(),
            New::Updated(_) | New::Checked => self.old.as_ref(),
        };
        let size = |item: Option<&Item>| item.map_or(0, item_size);
        let Some(pk) = self.key.get(&self.schema.keys.hash).and_then(key_text) else {
            return Vec::new();
        };
        // A transaction writes each of its items twice (prepare and commit); its index entries
        // are written once, after it completes: "After a transaction completes in DynamoDB, its
        // changes start propagating to global secondary indexes (GSIs), streams, and backups"
        // (Developer Guide, "Amazon DynamoDB Transactions: How it works",
        // https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html).
        let write = |index: Option<&str>, pk: String, bytes: u64| Charge {
            table: self.table.clone(),
            index: index.map(str::to_owned),
            pk,
            kind: Kind::Write,
            halves: write_halves(bytes, self.transactional && index.is_none()),
        };
        let mut charges = vec![write(None, pk, size(self.old.as_ref()).max(size(new)))];
        if outcome == Outcome::Refused || matches!(self.new, New::Checked) {
            return charges;
        }
        for index in &self.schema.indexes {
            let entry = |item: Option<&Item>| {
                let item = item.filter(|item| index.keys.all_in(item))?;
                let pk = key_text(item.get(&index.keys.hash)?)?;
                let sk = index.keys.range.as_ref().and_then(|r| item.get(r)).cloned();
                Some((pk, sk, self.schema.entry_size(index, item)))
            };
            match (entry(self.old.as_ref()), entry(new)) {
                (Some((old_pk, old_sk, old_bytes)), Some((pk, sk, bytes))) => {
                    if old_pk == pk && old_sk == sk {
                        charges.push(write(Some(&index.name), pk, bytes.max(old_bytes)));
                    } else {
                        charges.push(write(Some(&index.name), old_pk, old_bytes));
                        charges.push(write(Some(&index.name), pk, bytes));
                    }
                }
                (Some((pk, _, bytes)), None) | (None, Some((pk, _, bytes))) => {
                    charges.push(write(Some(&index.name), pk, bytes));
                }
                (None, None) => {}
            }
        }
        charges
    }
}

impl Read {
    /// What this read consumed, by the size of what the answer holds.
    fn used(&self, answer: Option<&Value>) -> Charge {
        let bytes: u64 = match (&self.answer, answer) {
            (Answered::Item, Some(answer)) => answer
                .get("Item")
                .and_then(Value::as_object)
                .map_or(0, item_size),
            (Answered::Items, Some(answer)) => answer
                .get("Items")
                .and_then(Value::as_array)
                .map_or(0, |items| {
                    items
                        .iter()
                        .filter_map(Value::as_object)
                        .map(item_size)
                        .sum()
                }),
            (Answered::Part(at), Some(answer)) => answer
                .get("Responses")
                .and_then(|r| r.get(*at))
                .and_then(|r| r.get("Item"))
                .and_then(Value::as_object)
                .map_or(0, item_size),
            _ => 0,
        };
        Charge {
            halves: read_halves(bytes, self.consistent, self.transactional),
            ..self.taken.clone()
        }
    }
}

/// What a batch's reads consumed: each item answered at its own key, the least a read consumes
/// for a key that found nothing.
fn batch_reads_used(reads: &[Read], answer: Option<&Value>) -> Vec<Charge> {
    let mut used: Vec<Charge> = reads.iter().map(|r| r.taken.clone()).collect();
    let Some(responses) = answer
        .and_then(|a| a.get("Responses"))
        .and_then(Value::as_object)
    else {
        return used;
    };
    for (table, items) in responses {
        for item in items.as_array().into_iter().flatten() {
            let Some(item) = item.as_object() else {
                continue;
            };
            let bytes = item_size(item);
            let found = reads.iter().position(|r| {
                &r.table == table
                    && item
                        .values()
                        .any(|v| key_text(v).as_deref() == Some(r.pk.as_str()))
            });
            if let Some(at) = found {
                let read = &reads[at];
                used[at].halves = used[at]
                    .halves
                    .max(read_halves(bytes, read.consistent, false));
            }
        }
    }
    used
}

/// `answer` with `kept_back` (per table) added to its `member` (`UnprocessedItems`,
/// `UnprocessedKeys`), as the body to send.
fn with_unprocessed(
    answer: Option<Value>,
    member: &str,
    kept_back: Map<String, Value>,
) -> Option<Vec<u8>> {
    let mut answer = answer?;
    let unprocessed = answer
        .as_object_mut()?
        .entry(member)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()?;
    for (table, back) in kept_back {
        let empty = match &back {
            Value::Array(_) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        };
        match (unprocessed.entry(table).or_insert(empty), back) {
            (Value::Array(there), Value::Array(back)) => there.extend(back),
            (Value::Object(there), Value::Object(mut back)) => match there.get_mut("Keys") {
                Some(Value::Array(keys)) => {
                    if let Some(Value::Array(more)) = back.remove("Keys") {
                        keys.extend(more);
                    }
                }
                _ => *there = back,
            },
            _ => {}
        }
    }
    serde_json::to_vec(&answer).ok()
}

/// `used` against `taken`, key by key: what to add, and what to give back.
fn difference(used: &[Charge], taken: &[Charge]) -> (Vec<Charge>, Vec<Charge>) {
    type Id<'a> = (&'a str, Option<&'a str>, &'a str, bool);
    let mut net: HashMap<Id<'_>, i128> = HashMap::new();
    for (charges, sign) in [(used, 1i128), (taken, -1)] {
        for c in charges {
            *net.entry((
                c.table.as_str(),
                c.index.as_deref(),
                c.pk.as_str(),
                c.kind == Kind::Write,
            ))
            .or_default() += sign * i128::from(c.halves);
        }
    }
    let mut more = Vec::new();
    let mut less = Vec::new();
    for ((table, index, pk, write), halves) in net {
        let charge = |halves: i128| Charge {
            table: table.to_owned(),
            index: index.map(str::to_owned),
            pk: pk.to_owned(),
            kind: if write { Kind::Write } else { Kind::Read },
            halves: halves.unsigned_abs() as u64,
        };
        if halves > 0 {
            more.push(charge(halves));
        } else if halves < 0 {
            less.push(charge(halves));
        }
    }
    (more, less)
}

/// Whether a put's condition lets it write only an item that is not there:
/// `attribute_not_exists(…)`, not widened by an `OR`.
fn only_creates(request: &Item) -> bool {
    request
        .get("ConditionExpression")
        .and_then(Value::as_str)
        .is_some_and(|condition| {
            condition.contains("attribute_not_exists")
                && !condition.to_ascii_uppercase().contains(" OR ")
        })
}

/// The key of `item`: its table key attributes.
fn schema_key(schema: &Table, item: &Item) -> Option<Item> {
    let mut key = Map::new();
    key.insert(
        schema.keys.hash.clone(),
        item.get(&schema.keys.hash)?.clone(),
    );
    if let Some(range) = &schema.keys.range {
        key.insert(range.clone(), item.get(range)?.clone());
    }
    Some(key)
}
