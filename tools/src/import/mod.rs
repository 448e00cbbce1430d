//! `cargo run -- import <kind> <file>`: a file of rows, each a create route's body, written as
//! the API would write them (docs/API.md, "Import and export").
//!
//! 1. Every row is read (JSON Lines, or CSV with a header row) and checked by the create route's
//!    own validation (`register_vehicle::validate`, `branch_from`, ...), so a row is refused with
//!    the field codes a `400` would carry.
//! 2. Before anything is written: the branches (and, for copies, the books) the rows name are
//!    read once each, and rows that claim one unique value (a lock's key, or an entity's own key)
//!    twice within the file are found; the second and later are refused naming the first.
//! 3. The rest go in `TransactWriteItems` of many rows: each row's item, its locks and its event's
//!    outbox item (and, as the route does, a `ConditionCheck` on the old rule's key of a plate or
//!    chassis number spelled with separators, free until `plates-compact` has run), plus one
//!    `ConditionCheck` per branch and one count per book and branch, never two actions on one
//!    item, within DynamoDB's 100 actions and 4 MB. A cancelled transaction
//!    names, by its `CancellationReasons`, the rows whose items were there already: a row whose
//!    own item is there was imported by an earlier run; a row whose lock is held by another goes
//!    to the rejects with the holder's id; the others are sent again. A few transactions are in
//!    flight at once, each with a `ClientRequestToken` of this run's, so an attempt that timed out
//!    after it was applied is not taken for an earlier run's rows when it is sent again.
//!
//! A row's id (and its event's) is derived from the row's text and its line under the server's
//! key, and its times are the run's (`--clock` fixes them), so a run killed midway and run again
//! writes every row once, and with `--clock` writes exactly the items one uninterrupted run would.

mod rows;

use crate::progress::Progress;
use crate::throttle::Throttle;
use futures::StreamExt;
use rows::{Row, read_rows};
use serde::Serialize;
use singlet_functions::Ctx;
use singlet_functions::accounts::{self, AccountRow, create_account};
use singlet_functions::error::{ApiError, FieldError};
use singlet_functions::events::outbox::OutboxItem;
use singlet_functions::events::{Event, EventType};
use singlet_functions::fleet::register_vehicle;
use singlet_functions::http::JsonBody;
use singlet_functions::library::{
    self, Book, Branch, add_copy, create_book, create_branch, register_patron,
};
use singlet_functions::model::{Entity, Held};
use singlet_functions::store::capacity;
use singlet_functions::store::item::text;
use singlet_functions::store::{
    AnyEntity, Check, Commit, Condition, Item, Put, TokenCommit, Transaction, lock,
};
use singlet_shared::{Id, Isbn13, Key, keys};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;
use time::OffsetDateTime;

/// DynamoDB's most actions in one `TransactWriteItems`.
pub const MAX_ACTIONS: usize = 100;
/// DynamoDB's most bytes in one `TransactWriteItems` is 4 MB; a transaction is closed well before,
/// since a row's size is estimated from its text.
const MAX_TRANSACTION_BYTES: usize = 3 * 1024 * 1024;
/// Transactions in flight at once, by default: each waits on the engine for most of its time.
pub const IN_FLIGHT: usize = 4;
/// The largest row, as the largest body a route accepts.
const MAX_ROW_BYTES: usize = singlet_functions::http::MAX_BODY_BYTES;
/// The events of imported rows name this actor, as a route's name the token's subject.
pub const ACTOR: &str = "import";
/// The longest `owner` an accounts row may name (a token's `sub`).
const MAX_OWNER_LEN: usize = 256;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Vehicles,
    Accounts,
    Branches,
    Patrons,
    Books,
    Copies,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Vehicles,
        Kind::Accounts,
        Kind::Branches,
        Kind::Patrons,
        Kind::Books,
        Kind::Copies,
    ];

    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                format!("cannot import {name:?}: the kinds are {}", known.join(", "))
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Vehicles => "vehicles",
            Kind::Accounts => "accounts",
            Kind::Branches => "branches",
            Kind::Patrons => "patrons",
            Kind::Books => "books",
            Kind::Copies => "copies",
        }
    }

    /// The fields every row must have: a CSV header without one of them is refused whole.
    pub fn required_columns(self) -> &'static [&'static str] {
        match self {
            Kind::Vehicles => &["plate", "chassis", "depot"],
            Kind::Accounts => &["email", "username", "owner"],
            Kind::Branches => &[
                "branchId",
                "name",
                "address",
                "city",
                "phone",
                "openingHours",
            ],
            Kind::Patrons => &[
                "branchId",
                "cardNumber",
                "firstName",
                "lastName",
                "email",
                "membershipTier",
            ],
            Kind::Books => &[
                "isbn",
                "title",
                "author",
                "publisher",
                "publishYear",
                "genre",
                "description",
                "pageCount",
            ],
            Kind::Copies => &["branchId", "isbn", "condition"],
        }
    }

    /// Columns a CSV gives as text that a JSON body gives as numbers.
    fn integer_columns(self) -> &'static [&'static str] {
        match self {
            Kind::Books => &["publishYear", "pageCount"],
            _ => &[],
        }
    }
}

/// How a run goes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Write units per second, at most.
    pub max_wcu: Option<f64>,
    /// Write units per second into any one partition key value, at most (`None`: 800).
    pub max_key_wcu: Option<f64>,
    /// The time every row is created at.
    pub at: OffsetDateTime,
    /// Rows per transaction, at most (1: one transaction per row, as the benchmark compares).
    pub rows_per_transaction: usize,
    /// Transactions in flight at once.
    pub in_flight: usize,
    /// A test hook: stop as if killed once this many rows were created, before the rejects file
    /// is written.
    pub stop_after: Option<u64>,
    /// Progress on standard error.
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            max_wcu: None,
            max_key_wcu: None,
            at: OffsetDateTime::now_utc(),
            rows_per_transaction: MAX_ACTIONS,
            in_flight: IN_FLIGHT,
            stop_after: None,
            progress: true,
        }
    }
}

/// What a run did (`--json` prints it).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Rows in the file.
    pub read: u64,
    /// Rows this run created.
    pub created: u64,
    /// Rows in the rejects file.
    pub rejected: u64,
    /// Rows an earlier run of the same file created already.
    pub already_imported: u64,
    /// Where the rejects are (written only when there are some).
    #[serde(skip)]
    pub rejects: PathBuf,
    /// Stopped by `stop_after` before the end.
    #[serde(skip)]
    pub stopped: bool,
    /// The write units the run consumed, as the engine reported them.
    #[serde(skip)]
    pub write_units: f64,
    /// The most write units consumed in any one-second window of the run.
    #[serde(skip)]
    pub peak_wcu_per_second: f64,
    /// The partition key value written most in any one second: kept under `--max-key-wcu`.
    pub hottest_key: Option<singlet_functions::store::pace::HottestKey>,
}

/// One line of the rejects file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Reject {
    pub line: u64,
    pub errors: Vec<RejectError>,
    /// The id of the current holder of the value, for `taken` (and `limit_reached`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// Why a row that is not a body at all was refused; or, for a value an earlier line claims
    /// first though it was not created, that line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct RejectError {
    pub field: String,
    pub code: String,
}

impl Reject {
    fn fields(line: u64, errors: Vec<FieldError>) -> Self {
        Self {
            line,
            errors: errors
                .into_iter()
                .map(|e| RejectError {
                    field: e.field.to_owned(),
                    code: e.code.as_str().to_owned(),
                })
                .collect(),
            holder: None,
            detail: None,
        }
    }

    /// Names another field at fault (once).
    fn also(&mut self, field: &str, code: &str) {
        let error = RejectError {
            field: field.to_owned(),
            code: code.to_owned(),
        };
        if !self.errors.contains(&error) {
            self.errors.push(error);
        }
    }

    /// Whether every field it names is one whose value another holds.
    fn all_taken(&self) -> bool {
        self.errors
            .iter()
            .all(|e| e.code == "taken" || e.code == "limit_reached")
    }

    fn one(line: u64, field: &str, code: &str, holder: Option<String>) -> Self {
        Self {
            line,
            errors: vec![RejectError {
                field: field.to_owned(),
                code: code.to_owned(),
            }],
            holder,
            detail: None,
        }
    }
}

/// The rejects file of `file`: `<file>.rejects.jsonl`.
pub fn rejects_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".rejects.jsonl");
    PathBuf::from(name)
}

/// A unique value a row claims: a lock, or its own key where the client names the entity (a
/// branch's id, a book's ISBN).
struct Claim {
    field: &'static str,
    /// The code a row gets when another holds the value: `taken`, or `limit_reached` for an
    /// account owner's one account.
    code: &'static str,
    key: Key,
    /// The lock's put; `None` when the value is the entity's own key.
    put: Option<Put>,
    /// The check that no lock holds the value at the key an earlier rule made of it (a plate
    /// spelled with separators, before `plates-compact`); its failure is the claim's.
    free_before: Option<Check<AnyEntity>>,
    /// The lock's attribute naming its holder.
    holder: &'static str,
}

/// One valid row, ready to write.
struct Planned {
    line: u64,
    id: String,
    /// The entity's item as it will be written: an existing item equal to it was imported by an
    /// earlier run.
    entity_item: Item,
    entity: Put,
    claims: Vec<Claim>,
    event: Put,
    /// The branch that must exist.
    branch: Option<Id>,
    /// The book and branch whose available copies it adds one to.
    available: Option<(Isbn13, Id)>,
    bytes: usize,
}

impl Planned {
    /// `entity`'s row: its put (only if its key is free), its claims and its event.
    fn new<E: Entity>(row: &Row, id: String, entity: &E, claims: Vec<Claim>, event: Put) -> Self {
        Self {
            line: row.line,
            id,
            entity_item: entity.to_item(),
            entity: Put::new_only(entity).old_on_failure(),
            claims,
            event,
            branch: None,
            available: None,
            // The item, its event (which holds the entity again) and small locks.
            bytes: row.raw.len() * 3 + 2048,
        }
    }

    fn actions(&self) -> usize {
        let claims: usize = self
            .claims
            .iter()
            .map(|c| usize::from(c.put.is_some()) + usize::from(c.free_before.is_some()))
            .sum();
        2 + claims
    }
}

impl Claim {
    /// A value that is the entity's own key: a branch's id, a book's ISBN.
    fn own_key(field: &'static str, key: Key) -> Self {
        Self {
            field,
            code: "taken",
            key,
            put: None,
            free_before: None,
            holder: field,
        }
    }
}

/// The locks `owner` declares ([`Entity::locks`]), each claimed as the route claims it: a value
/// taken is `taken`, named by the owner's field that holds it; one an earlier rule keyed
/// elsewhere (a plate before `plates-compact`) is checked free there too.
fn declared_locks<E: Entity>(owner: &E) -> Vec<Claim> {
    owner
        .locks()
        .iter()
        .map(|held| {
            let of = held
                .entity_type()
                .lock_of()
                .expect("an owner's lock is of a value");
            Claim {
                field: of.value,
                code: "taken",
                key: held.key(),
                put: Some(lock::claim_any(held)),
                free_before: held.earlier_key().map(lock::free_any_at),
                holder: of.holder,
            }
        })
        .collect()
}

fn lock_claim<L: Held>(field: &'static str, code: &'static str, lock: &L) -> Claim {
    Claim {
        field,
        code,
        key: lock.key().into_key(),
        put: Some(lock::claim(lock)),
        free_before: None,
        holder: L::HOLDER.name(),
    }
}

/// An id derived from a row's kind, line and text under the server's key, shaped as the random
/// (version 4) ids the routes make: the same row on the same line always names the same entity.
fn derived_id(ctx: &Ctx, purpose: &str, kind: Kind, row: &Row) -> String {
    let mut hex = ctx
        .ids
        .pseudonym(purpose, &[kind.name(), &row.line.to_string(), &row.raw]);
    let variant = u8::from_str_radix(&hex[16..17], 16).expect("hex") & 0x3 | 0x8;
    hex.replace_range(12..13, "4");
    hex.replace_range(16..17, &format!("{variant:x}"));
    hex
}

fn hyphenated(hex: &str) -> String {
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The reads a row's plan needs: the branches and books the file names.
#[derive(Default)]
struct Known {
    branches: HashMap<String, bool>,
    books: HashMap<String, Option<Book>>,
}

/// A row checked as its create route checks it, and planned; `Err` is its reject.
fn plan(
    ctx: &Ctx,
    kind: Kind,
    row: &Row,
    known: &Known,
    options: &Options,
) -> Result<Planned, Reject> {
    let fields = row.fields.as_ref().map_err(|detail| Reject {
        line: row.line,
        errors: Vec::new(),
        holder: None,
        detail: Some(detail.clone()),
    })?;
    if row.raw.len() > MAX_ROW_BYTES {
        return Err(Reject {
            detail: Some(format!("the row is over {MAX_ROW_BYTES} bytes")),
            ..Reject::fields(row.line, Vec::new())
        });
    }
    let body = JsonBody::from_object(fields.clone());
    let invalid = |error: ApiError| match error {
        ApiError::BadRequest { errors, .. } => Reject::fields(row.line, errors),
        other => Reject {
            detail: Some(format!("{other:?}")),
            ..Reject::fields(row.line, Vec::new())
        },
    };
    let id = derived_id(ctx, "import id", kind, row);
    let entity_id = Id::parse(&id).expect("hex is an id");
    let event_id = hyphenated(&derived_id(ctx, "import event", kind, row));
    let at = options.at;
    let millis = (at.unix_timestamp_nanos() / 1_000_000) as i64;
    let event = |event: Event| Put::new_only(&OutboxItem::at(ACTOR, event, &event_id, at));
    let branch_of = || body.required("branchId", Id::parse);
    let missing_branch = |branch_id: &Id| {
        (!known
            .branches
            .get(branch_id.as_str())
            .copied()
            .unwrap_or(false))
        .then(|| Reject::one(row.line, "branchId", "not_found", None))
    };

    let planned = match kind {
        Kind::Vehicles => {
            let vehicle = register_vehicle::validate(&body)
                .map_err(invalid)?
                .vehicle(entity_id, millis);
            // As the route: a value registered under the old rule is taken in this spelling too.
            let claims = declared_locks(&vehicle);
            let event = event(Event::new(EventType::VehicleRegistered, &id, &vehicle));
            Planned::new(row, id, &vehicle, claims, event)
        }
        Kind::Accounts => {
            let (valid, owner) = match (
                create_account::validate(&body),
                body.text("owner", MAX_OWNER_LEN),
            ) {
                (Ok(valid), Ok(owner)) => (valid, owner),
                (valid, owner) => {
                    let mut errors = match valid {
                        Err(ApiError::BadRequest { errors, .. }) => errors,
                        _ => Vec::new(),
                    };
                    errors.extend(owner.err());
                    return Err(Reject::fields(row.line, errors));
                }
            };
            let account = valid.account(entity_id.clone(), millis);
            let row_item = AccountRow {
                account,
                owner,
                owners_one: true,
            };
            let mut claims = declared_locks(&row_item);
            // The owner's one account, as the route makes it for a subject without
            // `accounts:admin`: a second row of one owner is `owner` `limit_reached`.
            claims.push(lock_claim(
                "owner",
                "limit_reached",
                &accounts::owner_lock(ctx, &row_item.owner, &entity_id),
            ));
            let event = event(Event::new(
                EventType::AccountCreated,
                &id,
                &row_item.account,
            ));
            Planned::new(row, id, &row_item, claims, event)
        }
        Kind::Branches => {
            let branch = create_branch::branch_from(&body).map_err(invalid)?;
            let event = event(Event::new(
                EventType::BranchCreated,
                &branch.branch_id,
                &branch,
            ));
            let claims = vec![Claim::own_key("branchId", branch.key().into_key())];
            Planned::new(row, branch.branch_id.to_string(), &branch, claims, event)
        }
        Kind::Books => {
            let book = create_book::book_from(&body, at.year()).map_err(invalid)?;
            let event = event(Event::new(EventType::BookAdded, &book.isbn, &book));
            let claims = vec![Claim::own_key("isbn", book.key().into_key())];
            Planned::new(row, book.isbn.to_string(), &book, claims, event)
        }
        Kind::Patrons => {
            let patron = register_patron::validate(&body, branch_of())
                .map_err(invalid)?
                .patron(entity_id, at);
            if let Some(reject) = missing_branch(&patron.branch_id) {
                return Err(reject);
            }
            let claims = declared_locks(&patron);
            let event = event(Event::new(EventType::PatronRegistered, &id, &patron));
            Planned {
                branch: Some(patron.branch_id.clone()),
                ..Planned::new(row, id, &patron, claims, event)
            }
        }
        Kind::Copies => {
            let valid = add_copy::validate(&body, branch_of()).map_err(invalid)?;
            if let Some(reject) = missing_branch(&valid.branch_id) {
                return Err(reject);
            }
            let Some(Some(book)) = known.books.get(valid.isbn.as_str()) else {
                return Err(Reject::one(row.line, "isbn", "not_found", None));
            };
            let copy = valid.copy(book, entity_id, at);
            let event = event(Event::new(EventType::CopyAdded, &id, &copy));
            Planned {
                branch: Some(copy.branch_id.clone()),
                available: Some((copy.isbn.clone(), copy.branch_id.clone())),
                ..Planned::new(row, id, &copy, Vec::new(), event)
            }
        }
    };
    Ok(planned)
}

/// Reads, once each, the branches and books the rows name.
async fn read_known(ctx: &Ctx, kind: Kind, rows: &[Row]) -> Result<Known, String> {
    let mut known = Known::default();
    if !matches!(kind, Kind::Patrons | Kind::Copies) {
        return Ok(known);
    }
    let named = |field: &str| -> HashSet<String> {
        rows.iter()
            .filter_map(|row| {
                row.fields
                    .as_ref()
                    .ok()?
                    .get(field)?
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    };
    for raw in named("branchId") {
        let Ok(branch_id) = Id::parse(&raw) else {
            continue;
        };
        let exists = ctx
            .get_item(&keys::branch(&branch_id))
            .await
            .map_err(|e| format!("cannot read branch {branch_id}: {e:?}"))?
            .is_some();
        known.branches.insert(raw, exists);
    }
    if kind == Kind::Copies {
        let isbns: HashSet<Isbn13> = named("isbn")
            .iter()
            .filter_map(|raw| Isbn13::parse(raw).ok())
            .collect();
        for isbn in isbns {
            let book = ctx
                .get::<Book>(&Book::key_of(&isbn))
                .await
                .map_err(|e| format!("cannot read book {isbn}: {e:?}"))?;
            known.books.insert(isbn.to_string(), book);
        }
    }
    Ok(known)
}

/// The part of a transaction an action is: which row (by its place in the batch) and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Entity(usize),
    Claim(usize, usize),
    Event(usize),
    /// The check that the batch's `n`th branch exists.
    Branch(usize),
    Available(usize),
}

/// How a row of a batch ended.
enum Ended {
    Created,
    AlreadyImported,
    Rejected(Reject),
}

/// A row refused because an earlier row of the file claimed its value names that row as the
/// holder; if that row was refused too when written, the holder is who the earlier row's refusal
/// names for the same field (someone in the table holds the value), or none, the reject then
/// saying which line claims the value first: an id that was never created is no holder.
fn name_the_holders(
    rejects: &mut [Reject],
    claimed_in_file: &[(usize, String, &'static str)],
    line_ids: &HashMap<u64, String>,
) {
    let refused_when_written: HashMap<&str, &Reject> = rejects
        .iter()
        .filter_map(|reject| Some((line_ids.get(&reject.line)?.as_str(), reject)))
        .collect();
    let holders: Vec<(usize, Option<String>, Option<String>)> = claimed_in_file
        .iter()
        .filter_map(|(at, first_row, field)| {
            let refused = refused_when_written.get(first_row.as_str())?;
            let same_field = refused.errors.iter().any(|e| e.field == *field);
            // Refused for something else, the earlier row still claims the value first: fixed
            // and run again, it is created and holds it.
            let detail = (!same_field).then(|| {
                format!(
                    "line {} claims the {field} first, and was refused for another field",
                    refused.line
                )
            });
            Some((*at, refused.holder.clone().filter(|_| same_field), detail))
        })
        .collect();
    for (at, holder, detail) in holders {
        rejects[at].holder = holder;
        rejects[at].detail = detail;
    }
}

/// The rows of a file, read and found to be at least one ([`read`]), not yet checked.
pub struct Rows {
    file: PathBuf,
    kind: Kind,
    rows: Vec<Row>,
}

impl Rows {
    /// How many rows the file holds.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Never: [`read`] refuses a file without rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// Reads `file` as rows of `kind`, writing nothing: `Err` when it is neither JSON Lines nor CSV
/// with the columns `kind` needs, or when it holds no row at all (empty, blank lines only, or a
/// CSV header alone). An import of nothing is not what anyone asks for: most often the file is
/// the wrong one, or the step that made it failed; `0` ("did what it was asked") would let a
/// script go on as if the rows were in the table.
pub fn read(file: &Path, kind: Kind) -> Result<Rows, String> {
    let rows = read_rows(file, kind)?;
    if rows.is_empty() {
        return Err(format!(
            "{} holds no rows: nothing was read and nothing was written",
            file.display()
        ));
    }
    Ok(Rows {
        file: file.to_owned(),
        kind,
        rows,
    })
}

/// Refuses, before anything is written, a rejects file of `file` ([`rejects_path`]) that would
/// not be written: one that is a symbolic or hard link (never written through: a link planted
/// beside the import file would have its target overwritten) or not a regular file. A rejects file that
/// cannot be written would otherwise stop an import that has created its rows, and exit `2`
/// would not mean "nothing written".
pub fn check_rejects_path(file: &Path) -> Result<(), String> {
    let rejects = rejects_path(file);
    match std::fs::symlink_metadata(&rejects) {
        Ok(found) if found.file_type().is_symlink() => Err(format!(
            "{} is a symbolic link: the rejects file is never written through a link (its \
             target would be overwritten); remove it: nothing was written",
            rejects.display()
        )),
        Ok(found) if !found.is_file() => Err(format!(
            "{} is in the way of the rejects file: it is not a file",
            rejects.display()
        )),
        #[cfg(unix)]
        Ok(found) if std::os::unix::fs::MetadataExt::nlink(&found) > 1 => Err(format!(
            "{} has other names (hard links): the rejects file is never written through a link \
             (the file they name would be overwritten); remove it: nothing was written",
            rejects.display()
        )),
        _ => Ok(()),
    }
}

/// Imports `file` as rows of `kind` into the table of `ctx`.
pub async fn run(ctx: &Ctx, kind: Kind, file: &Path, options: &Options) -> Result<Summary, String> {
    write(ctx, read(file, kind)?, options).await
}

/// Imports `rows` ([`read`]) into the table of `ctx`.
pub async fn write(ctx: &Ctx, rows: Rows, options: &Options) -> Result<Summary, String> {
    let Rows { file, kind, rows } = rows;
    let file = file.as_path();
    let known = read_known(ctx, kind, &rows).await?;
    let mut summary = Summary {
        read: rows.len() as u64,
        rejects: rejects_path(file),
        ..Summary::default()
    };
    let mut rejects: Vec<Reject> = Vec::new();
    let mut planned: Vec<Planned> = Vec::new();
    // The first row to claim each value: a later row claiming it again is refused naming it.
    let mut claimed: HashMap<(String, String), String> = HashMap::new();
    // Those refusals (their place in `rejects`, the first row's id, the field): the first row
    // may itself be refused when written, and then it is not the holder.
    let mut claimed_in_file: Vec<(usize, String, &'static str)> = Vec::new();
    for row in &rows {
        let row_plan = match plan(ctx, kind, row, &known, options) {
            Ok(row_plan) => row_plan,
            Err(reject) => {
                rejects.push(reject);
                continue;
            }
        };
        // Every value of the row an earlier row claims, as the route names every taken field;
        // the holder named is the first's.
        let mut duplicate: Option<(Reject, String, &'static str)> = None;
        for claim in &row_plan.claims {
            let Some(holder) = claimed.get(&(claim.key.pk.clone(), claim.key.sk.clone())) else {
                continue;
            };
            match &mut duplicate {
                None => {
                    let reject =
                        Reject::one(row.line, claim.field, claim.code, Some(holder.clone()));
                    duplicate = Some((reject, holder.clone(), claim.field));
                }
                Some((reject, _, _)) => reject.also(claim.field, claim.code),
            }
        }
        if let Some((reject, holder, field)) = duplicate {
            claimed_in_file.push((rejects.len(), holder, field));
            rejects.push(reject);
            continue;
        }
        for claim in &row_plan.claims {
            claimed.insert(
                (claim.key.pk.clone(), claim.key.sk.clone()),
                row_plan.id.clone(),
            );
        }
        planned.push(row_plan);
    }

    let max_key_wcu = options
        .max_key_wcu
        .unwrap_or(singlet_functions::store::pace::DEFAULT_MAX_KEY_WCU);
    if options.progress && !planned.is_empty() {
        // Said before the first write: how long this takes on AWS, and what would be faster.
        let mut work = crate::warm::Work::default();
        for row in &planned {
            work.add(batch_keys(std::slice::from_ref(row)));
        }
        eprintln!(
            "{}",
            work.said(
                &format!(
                    "import {} ({} row{})",
                    kind.name(),
                    planned.len(),
                    if planned.len() == 1 { "" } else { "s" }
                ),
                options.max_wcu,
                max_key_wcu
            )
        );
    }
    let throttle = Throttle::new(options.max_wcu).with_max_key_wcu(max_key_wcu);
    let run = format!("{:032x}", rand::random::<u128>());
    let run = &run;
    // Learned from the writes themselves: the most one action has consumed (the most, not the
    // last, so that a cheaper transaction does not let the next one pass the limit).
    let units_per_action = std::sync::Mutex::new(2.0_f64);
    // Under a write limit, no transaction bigger than the limit allows in a second (each action
    // of a transaction costs 2 units a KB): the throttle would let it through whole and then
    // hold the next for its share of time, a burst DynamoDB's own limit might refuse.
    let rows_per_transaction = match options.max_wcu {
        Some(max) => {
            let per_row = planned.iter().map(Planned::actions).max().unwrap_or(1) as f64;
            let fits = (max / (2.0 * per_row)).floor() as usize;
            options.rows_per_transaction.min(fits.max(1))
        }
        None => options.rows_per_transaction,
    };
    let line_ids: HashMap<u64, String> = planned.iter().map(|p| (p.line, p.id.clone())).collect();
    let planned = interleaved(planned, |row| {
        singlet_functions::model::key_of(&row.entity_item)
            .map(|key| key.pk)
            .unwrap_or_default()
    });
    let batches = batches(planned, rows_per_transaction);
    let mut written = futures::stream::iter(batches)
        .map(|batch| {
            let (throttle, units_per_action, run) = (&throttle, &units_per_action, run);
            async move {
                let actions = batch_actions(&batch) as f64;
                let estimate = *units_per_action.lock().unwrap() * actions;
                let admission = throttle.admit_keys(estimate, &batch_keys(&batch)).await;
                let (ended, units) = write_batch(ctx, run, &batch).await?;
                throttle.settle(admission, units);
                if units > 0.0 {
                    let mut per_action = units_per_action.lock().unwrap();
                    *per_action = per_action.max(units / actions);
                }
                Ok::<_, String>((ended, units))
            }
        })
        .buffered(options.in_flight.max(1));
    let progress = Progress::new(options.progress);
    let counts = |summary: &Summary, rejected: usize| {
        format!(
            "import {}: read {}, created {}, rejected {rejected}, already imported {}",
            kind.name(),
            summary.read,
            summary.created,
            summary.already_imported
        )
    };
    while let Some(written) = written.next().await {
        let (ended, units) = written.inspect_err(|_| progress.interrupt())?;
        summary.write_units += units;
        summary.peak_wcu_per_second = throttle.peak();
        summary.hottest_key = throttle.hottest_key();
        for end in ended {
            match end {
                Ended::Created => summary.created += 1,
                Ended::AlreadyImported => summary.already_imported += 1,
                Ended::Rejected(reject) => rejects.push(reject),
            }
        }
        progress.count(|| counts(&summary, rejects.len()));
        if options
            .stop_after
            .is_some_and(|limit| summary.created >= limit)
        {
            // As if killed: the transactions in flight are dropped, whether or not the engine
            // applied them, and no rejects file is written.
            progress.interrupt();
            summary.stopped = true;
            summary.rejected = rejects.len() as u64;
            return Ok(summary);
        }
    }
    progress.finish(&counts(&summary, rejects.len()));
    name_the_holders(&mut rejects, &claimed_in_file, &line_ids);
    rejects.sort_by_key(|reject| reject.line);
    summary.rejected = rejects.len() as u64;
    write_rejects(&summary.rejects, &rejects)?;
    Ok(summary)
}

/// The planned rows in transactions: in file order, as many rows to each as fit in DynamoDB's
/// limits (and `rows_per_transaction`), counting one branch check and one count per book and
/// branch once per transaction.
/// The rows in turn by partition key: one of each key's rows, then the next of each, and so on,
/// each key's rows in file order. A file sorted by branch (or by book) would otherwise write one
/// partition key after another, each held to `--max-key-wcu` while the table waits; AWS's advice
/// for bulk loads is to spread the writes over the keys ("Best practices for designing partition
/// keys to distribute your workload": "Distributing write activity efficiently during data
/// upload", <https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-data-upload.html>).
/// What each row writes does not depend on the order: its id is its line's, its refusals were
/// judged in file order before this.
fn interleaved<T>(planned: Vec<T>, partition_key: impl Fn(&T) -> String) -> Vec<T> {
    let rows = planned.len();
    let mut order: HashMap<String, usize> = HashMap::new();
    let mut by_key: Vec<std::collections::VecDeque<T>> = Vec::new();
    for row in planned {
        let at = *order.entry(partition_key(&row)).or_insert_with(|| {
            by_key.push(std::collections::VecDeque::new());
            by_key.len() - 1
        });
        by_key[at].push_back(row);
    }
    let mut turns = Vec::with_capacity(rows);
    while turns.len() < rows {
        for rows in &mut by_key {
            turns.extend(rows.pop_front());
        }
    }
    turns
}

fn batches(planned: Vec<Planned>, rows_per_transaction: usize) -> Vec<Vec<Planned>> {
    let mut batches: Vec<Vec<Planned>> = Vec::new();
    let mut batch: Vec<Planned> = Vec::new();
    let mut bytes = 0;
    for row in planned {
        batch.push(row);
        bytes += batch.last().expect("pushed").bytes;
        if batch.len() > 1
            && (batch_actions(&batch) > MAX_ACTIONS
                || bytes > MAX_TRANSACTION_BYTES
                || batch.len() > rows_per_transaction.max(1))
        {
            let row = batch.pop().expect("pushed");
            bytes = row.bytes;
            batches.push(std::mem::replace(&mut batch, vec![row]));
        }
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

/// The actions of one transaction of `batch`.
/// The partition keys a batch's transaction writes under, with the units expected on each (two
/// a table item, as a transaction's writes are; one an index entry): what the per-key budget
/// paces.
fn batch_keys(batch: &[Planned]) -> Vec<(singlet_functions::store::pace::KeyRef, f64)> {
    use singlet_functions::store::pace::{KeyRef, units_per_key};
    let mut keys = Vec::new();
    let mut branches = HashSet::new();
    for row in batch {
        keys.extend(row.entity.keys_written());
        for claim in &row.claims {
            if let Some(put) = &claim.put {
                keys.extend(put.keys_written());
            }
        }
        keys.extend(row.event.keys_written());
        if let Some(branch) = &row.branch
            && branches.insert(branch)
        {
            keys.push(KeyRef::table(keys::branch(branch).pk));
        }
        if let Some((isbn, branch)) = &row.available {
            keys.push(KeyRef::table(keys::book_availability(isbn, branch).pk));
        }
    }
    units_per_key(keys, true)
}

fn batch_actions(batch: &[Planned]) -> usize {
    let branches: HashSet<&Id> = batch.iter().filter_map(|row| row.branch.as_ref()).collect();
    let counts: HashSet<&(Isbn13, Id)> = batch
        .iter()
        .filter_map(|row| row.available.as_ref())
        .collect();
    batch.iter().map(Planned::actions).sum::<usize>() + branches.len() + counts.len()
}

/// The rejects, one JSON object a line; a file left by an earlier run is removed when there are
/// none.
fn write_rejects(path: &Path, rejects: &[Reject]) -> Result<(), String> {
    if rejects.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("cannot remove {}: {e}", path.display()))
            }
            _ => Ok(()),
        };
    }
    let text: String = rejects
        .iter()
        .map(|reject| serde_json::to_string(reject).expect("JSON") + "\n")
        .collect();
    crate::files::write_private_file(path, text)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes `batch` in one transaction, sending it again without the rows whose items were there
/// already until the rest is written. Answers each row's end, in the batch's order, and the write
/// units consumed.
///
/// Each transaction carries a `ClientRequestToken` made from `run` (this run's own) and its rows:
/// an attempt that timed out after the engine applied it, sent again (by the SDK or here), is
/// answered as done, not cancelled by its own items, so this run counts its rows as created. A
/// later run has another token, and finds them imported already.
async fn write_batch(ctx: &Ctx, run: &str, batch: &[Planned]) -> Result<(Vec<Ended>, f64), String> {
    let mut ends: Vec<Option<Ended>> = batch.iter().map(|_| None).collect();
    let mut units = 0.0;
    let mut unavailable = 0;
    loop {
        let open: Vec<usize> = (0..batch.len()).filter(|i| ends[*i].is_none()).collect();
        if open.is_empty() {
            break;
        }
        let (transaction, branches) = transaction(batch, &open);
        let ids: Vec<&str> = open.iter().map(|i| batch[*i].id.as_str()).collect();
        let token = ctx
            .ids
            .pseudonym("import transaction", &[&[run][..], &ids].concat());
        let (commit, consumed) =
            capacity::metered(transaction.commit_with_token(ctx, Some(token))).await;
        units += consumed.write_units;
        let commit = commit.map(|commit| match commit {
            TokenCommit::Committed(commit) => Ok(commit),
            TokenCommit::TokenReused => Err("two transactions of one run had one token"),
        });
        let cancelled = match commit {
            Ok(Err(bug)) => return Err(bug.into()),
            Ok(Ok(Commit::Done)) => {
                for i in open {
                    ends[i] = Some(Ended::Created);
                }
                break;
            }
            Ok(Ok(Commit::Cancelled(cancelled))) => cancelled,
            // A throttle (a hot key, the embedded engine's per-key limits too) is back-pressure.
            Err(ApiError::Unavailable | ApiError::Throttled) if unavailable < 5 => {
                unavailable += 1;
                tokio::time::sleep(Duration::from_millis(200 << unavailable)).await;
                continue;
            }
            Err(e) => return Err(format!("the engine refused a write: {e:?}")),
        };
        for (slot, old) in &cancelled.failed {
            let old = old.as_ref();
            match *slot {
                // An event's id is the row's own: only a row written before has it.
                Slot::Event(i) => {
                    ends[i].get_or_insert(Ended::AlreadyImported);
                }
                Slot::Entity(i) => {
                    let row = &batch[i];
                    let same = old.is_none_or(|old| *old == row.entity_item);
                    if ends[i].is_none() {
                        ends[i] = Some(match row.claims.iter().find(|c| c.put.is_none()) {
                            // A client-named entity held by another row than this one.
                            Some(claim) if !same => Ended::Rejected(Reject::one(
                                row.line,
                                claim.field,
                                claim.code,
                                Some(row.id.clone()),
                            )),
                            _ => Ended::AlreadyImported,
                        });
                    }
                }
                Slot::Claim(i, c) => {
                    let (row, claim) = (&batch[i], &batch[i].claims[c]);
                    let holder = old.map(|old| text(old, claim.holder).to_owned());
                    // The row's own entity failed too when an earlier run wrote both: decided.
                    match &mut ends[i] {
                        None => {
                            ends[i] = Some(Ended::Rejected(Reject::one(
                                row.line,
                                claim.field,
                                claim.code,
                                holder,
                            )));
                        }
                        // Another of its values is taken too: named as well, as the route does.
                        Some(Ended::Rejected(reject)) if reject.all_taken() => {
                            reject.also(claim.field, claim.code);
                        }
                        Some(_) => {}
                    }
                }
                Slot::Branch(b) => {
                    // Removed since it was read: its rows are refused as the route would.
                    for i in &open {
                        if batch[*i].branch.as_ref() == Some(&branches[b]) && ends[*i].is_none() {
                            ends[*i] = Some(Ended::Rejected(Reject::one(
                                batch[*i].line,
                                "branchId",
                                "not_found",
                                None,
                            )));
                        }
                    }
                }
                Slot::Available(_) => {}
            }
        }
    }
    Ok((
        ends.into_iter()
            .map(|end| end.expect("every row ended"))
            .collect(),
        units,
    ))
}

/// The transaction of the `open` rows of `batch`, and the branches its checks are of (by
/// `Slot::Branch`'s number).
fn transaction(batch: &[Planned], open: &[usize]) -> (Transaction<Slot>, Vec<Id>) {
    let mut transaction = Transaction::new();
    let mut branches: Vec<Id> = Vec::new();
    let mut counts: BTreeMap<(String, String), (Isbn13, Id, i64)> = BTreeMap::new();
    for &i in open {
        let row = &batch[i];
        transaction = transaction.put(Slot::Entity(i), row.entity.clone());
        for (c, claim) in row.claims.iter().enumerate() {
            if let Some(put) = &claim.put {
                transaction = transaction.put(Slot::Claim(i, c), put.clone());
            }
            transaction = transaction.check_if_some(Slot::Claim(i, c), claim.free_before.clone());
        }
        transaction = transaction.put(Slot::Event(i), row.event.clone());
        if let Some(branch) = &row.branch
            && !branches.contains(branch)
        {
            branches.push(branch.clone());
        }
        if let Some((isbn, branch)) = &row.available {
            counts
                .entry((isbn.to_string(), branch.to_string()))
                .or_insert_with(|| (isbn.clone(), branch.clone(), 0))
                .2 += 1;
        }
    }
    for (b, branch) in branches.iter().enumerate() {
        transaction = transaction.check(
            Slot::Branch(b),
            Check::<Branch>::at(Branch::key_of(branch), Condition::exists()),
        );
    }
    // One count per book and branch, by the number of the batch's copies of it there.
    for (n, (isbn, branch, copies)) in counts.into_values().enumerate() {
        transaction = transaction.update(
            Slot::Available(n),
            library::count_available(&isbn, &branch, copies),
        );
    }
    (transaction, branches)
}

#[cfg(test)]
mod interleaving_tests {
    use super::interleaved;

    #[test]
    fn rows_are_written_in_turn_by_partition_key_each_keys_in_file_order() {
        let rows = vec!["a1", "a2", "a3", "b1", "c1", "c2"];
        let turns = interleaved(rows, |row| row[..1].to_owned());
        assert_eq!(turns, vec!["a1", "b1", "c1", "a2", "c2", "a3"]);
    }
}
