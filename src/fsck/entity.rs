//! What an item is, for the checker: every raw item decoded into the domain's own entity, and the
//! unique values an entity claims with a lock.
//!
//! The classifier reads the item's key shape, decodes the item with the entity's own serde type
//! (`singlet_functions::fleet::Vehicle`, `library::Patron`, ...) and checks that the key the
//! entity would be stored under is the key it was found under. It is the one place the checker
//! tells entities apart: the model registry replaces it.

use serde::de::DeserializeOwned;
use singlet_functions::accounts::{self, AccountRow, UniqueValue};
use singlet_functions::audit::{Event, Resource};
use singlet_functions::fleet::{self, ChassisLock, PlateLock, Vehicle};
use singlet_functions::library::{self, Book, Branch, Copy, Patron, PatronCard};
use singlet_functions::loans::{Checkout, MarkerRun};
use singlet_functions::store::{Item, item};
use singlet_shared::keys::{self, CHECKOUT_PREFIX, COPY_PREFIX, EVENT_PREFIX, PATRON_PREFIX};
use singlet_shared::schema::{PK, SK};
use singlet_shared::{CardNumber, Chassis, Email, Id, Key, Plate, Username};

/// The attribute that names an item's entity type, on items written since the model registry.
pub const ENTITY_TYPE: &str = "_et";

/// Every kind of item singlet stores.
#[derive(Debug, Clone)]
pub enum Entity {
    Vehicle(Vehicle),
    Account(AccountRow),
    Patron(Patron),
    Branch(Branch),
    Book(Book),
    Copy(Copy),
    /// A loan under `CHECKOUT#`: open or overdue.
    ActiveLoan(Checkout),
    /// A loan under `RETURNED#`.
    ReturnedLoan(Checkout),
    Resource(Resource),
    ResourceEvent(Event),
    /// A unique value's lock (plate, chassis, email, username, card).
    Lock(Lock),
    /// `ID#<id>`: the lock of an id derived from an `Idempotency-Key`.
    IdLock,
    IdempotencyRecord,
    /// A domain event waiting to be published.
    Outbox,
    MarkerRun,
}

/// A lock item: which kind of value it locks, and who it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    pub kind: LockKind,
    pub holder: String,
}

/// The unique values that are locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Plate,
    Chassis,
    Email,
    Username,
    Card,
}

impl LockKind {
    /// The lock's attribute that names its holder (the API's own `HOLDER` constants).
    pub fn holder_field(self) -> &'static str {
        match self {
            LockKind::Plate | LockKind::Chassis => fleet::HOLDER,
            LockKind::Email | LockKind::Username => accounts::HOLDER,
            LockKind::Card => library::CARD_HOLDER,
        }
    }

    /// The owner's attribute that holds the locked value.
    pub fn owner_field(self) -> &'static str {
        match self {
            LockKind::Plate => "plate",
            LockKind::Chassis => "chassis",
            LockKind::Email => "email",
            LockKind::Username => "username",
            LockKind::Card => "cardNumber",
        }
    }

    fn of_key(key: &Key) -> Option<LockKind> {
        let same = key.pk == key.sk;
        if same && key.pk.starts_with("PLATE#") {
            Some(LockKind::Plate)
        } else if same && key.pk.starts_with("CHASSIS#") {
            Some(LockKind::Chassis)
        } else if same && key.pk.starts_with("CARD#") {
            Some(LockKind::Card)
        } else if key.sk == "LOCK" && key.pk.starts_with("UNIQ#EMAIL#") {
            Some(LockKind::Email)
        } else if key.sk == "LOCK" && key.pk.starts_with("UNIQ#HANDLE#") {
            Some(LockKind::Username)
        } else {
            None
        }
    }
}

/// A unique value an owner (vehicle, account, patron) holds, and the lock that must name it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub kind: LockKind,
    /// The owner's stored value.
    pub value: String,
    pub owner: Key,
    pub holder: String,
    pub lock: Key,
}

impl Claim {
    /// The lock item the API writes for this claim: what a repair puts. Built from the owner's
    /// stored (already normalised) value, through the API's own lock types.
    pub fn lock_item(&self) -> Result<Item, String> {
        let invalid = |_| format!("the owner's {} no longer parses", self.kind.owner_field());
        let holder = Id::parse(&self.holder).map_err(invalid)?;
        Ok(match self.kind {
            LockKind::Plate => item(
                &self.lock,
                &PlateLock {
                    plate: Plate::parse(&self.value).map_err(invalid)?,
                    vehicle_id: holder,
                },
            ),
            LockKind::Chassis => item(
                &self.lock,
                &ChassisLock {
                    chassis: Chassis::parse(&self.value).map_err(invalid)?,
                    vehicle_id: holder,
                },
            ),
            LockKind::Email => {
                let email = UniqueValue::Email(Email::parse(&self.value).map_err(invalid)?);
                item(&self.lock, &email.lock(&holder))
            }
            LockKind::Username => {
                let username =
                    UniqueValue::Username(Username::parse(&self.value).map_err(invalid)?);
                item(&self.lock, &username.lock(&holder))
            }
            LockKind::Card => item(
                &self.lock,
                &PatronCard {
                    card_number: CardNumber::parse(&self.value).map_err(invalid)?,
                    patron_id: holder,
                },
            ),
        })
    }
}

impl Entity {
    /// The unique values this entity holds, each with its lock, built by the API's own functions.
    pub fn claims(&self) -> Vec<Claim> {
        let claim = |kind, value: &str, owner: &Key, holder: &Id, lock| Claim {
            kind,
            value: value.to_owned(),
            owner: owner.clone(),
            holder: holder.to_string(),
            lock,
        };
        match self {
            Entity::Vehicle(v) => {
                let owner = keys::vehicle(&v.vehicle_id);
                vec![
                    claim(
                        LockKind::Plate,
                        v.plate.as_str(),
                        &owner,
                        &v.vehicle_id,
                        keys::plate_lock(&v.plate),
                    ),
                    claim(
                        LockKind::Chassis,
                        v.chassis.as_str(),
                        &owner,
                        &v.vehicle_id,
                        keys::chassis_lock(&v.chassis),
                    ),
                ]
            }
            Entity::Account(row) => {
                let account = &row.account;
                let owner = keys::account(&account.account_id);
                let email = UniqueValue::Email(account.email.clone());
                let username = UniqueValue::Username(account.username.clone());
                vec![
                    claim(
                        LockKind::Email,
                        email.as_str(),
                        &owner,
                        &account.account_id,
                        email.lock_key(),
                    ),
                    claim(
                        LockKind::Username,
                        username.as_str(),
                        &owner,
                        &account.account_id,
                        username.lock_key(),
                    ),
                ]
            }
            Entity::Patron(p) => vec![claim(
                LockKind::Card,
                p.card_number.as_str(),
                &p.key(),
                &p.patron_id,
                keys::card_lock(&p.card_number),
            )],
            _ => Vec::new(),
        }
    }

    /// A lock, or an item that owns one: neither may ever carry `expiresAt` (it would expire
    /// a unique value out from under its holder).
    pub fn must_not_expire(&self) -> bool {
        matches!(
            self,
            Entity::Lock(_)
                | Entity::IdLock
                | Entity::Vehicle(_)
                | Entity::Account(_)
                | Entity::Patron(_)
        )
    }

    /// An item that must expire: an idempotency record, an outbox item.
    pub fn must_expire(&self) -> bool {
        matches!(self, Entity::IdempotencyRecord | Entity::Outbox)
    }
}

/// The key an item is stored under.
pub fn key_of(item: &Item) -> Key {
    let text = |name| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    Key {
        pk: text(PK),
        sk: text(SK),
    }
}

/// The entity an item is, or why it is none.
pub fn decode(item: Item) -> Result<Entity, String> {
    let key = key_of(&item);
    if item
        .get(ENTITY_TYPE)
        .and_then(|v| v.as_s().ok())
        .is_some_and(|et| et == "outbox")
    {
        return Ok(Entity::Outbox);
    }
    let (pk, sk) = (key.pk.as_str(), key.sk.as_str());
    let same = pk == sk;
    if let Some(kind) = LockKind::of_key(&key) {
        let holder = item
            .get(kind.holder_field())
            .and_then(|v| v.as_s().ok())
            .filter(|h| Id::parse(h).is_ok())
            .ok_or_else(|| format!("a lock without a valid `{}`", kind.holder_field()))?;
        return Ok(Entity::Lock(Lock {
            kind,
            holder: holder.clone(),
        }));
    }
    if same && pk.starts_with("VEHICLE#") {
        let v: Vehicle = entity(item)?;
        return at_own_key(&key, keys::vehicle(&v.vehicle_id), Entity::Vehicle(v));
    }
    if pk.starts_with("ACCT#") && sk == "PROFILE" {
        let row: AccountRow = entity(item)?;
        let own = keys::account(&row.account.account_id);
        return at_own_key(&key, own, Entity::Account(row));
    }
    if pk.starts_with("BRANCH#") {
        if same {
            let b: Branch = entity(item)?;
            return at_own_key(&key, keys::branch(&b.branch_id), Entity::Branch(b));
        }
        if sk.starts_with(PATRON_PREFIX) {
            let p: Patron = entity(item)?;
            return at_own_key(&key, p.key(), Entity::Patron(p));
        }
        if sk.starts_with(COPY_PREFIX) {
            let c: Copy = entity(item)?;
            let own = keys::copy(&c.branch_id, &c.copy_id);
            return at_own_key(&key, own, Entity::Copy(c));
        }
    }
    if same && pk.starts_with("BOOK#") {
        let b: Book = entity(item)?;
        return at_own_key(&key, keys::book(&b.isbn), Entity::Book(b));
    }
    if pk.starts_with(PATRON_PREFIX) && sk.starts_with(CHECKOUT_PREFIX) {
        let l: Checkout = entity(item)?;
        let own = keys::checkout(&l.patron_id, &l.checkout_id);
        return at_own_key(&key, own, Entity::ActiveLoan(l));
    }
    if pk.starts_with(PATRON_PREFIX) && sk.starts_with(keys::RETURNED_PREFIX) {
        let l: Checkout = entity(item)?;
        let own = keys::returned_checkout(&l.patron_id, &l.checkout_id);
        return at_own_key(&key, own, Entity::ReturnedLoan(l));
    }
    if let Some(resource_id) = pk.strip_prefix("RESOURCE#") {
        let resource_id = Id::parse(resource_id).map_err(|_| "a malformed resource id")?;
        if sk == "CURRENT" {
            let r: Resource = entity(item)?;
            return at_own_key(
                &key,
                keys::resource_current(&r.resource_id),
                Entity::Resource(r),
            );
        }
        if sk.starts_with(EVENT_PREFIX) {
            let e: Event = entity(item)?;
            if e.sequence == 0 || e.sequence > keys::MAX_VERSION {
                return Err("an event sequence out of range".into());
            }
            let own = keys::resource_event(&resource_id, e.sequence);
            return at_own_key(&key, own, Entity::ResourceEvent(e));
        }
    }
    if same && pk.starts_with("IDEMPOTENCY#") {
        return Ok(Entity::IdempotencyRecord);
    }
    if same && pk.starts_with("ID#") {
        return Ok(Entity::IdLock);
    }
    if key == keys::mark_overdue_run() {
        let _: MarkerRun = entity(item)?;
        return Ok(Entity::MarkerRun);
    }
    Err("no entity has this key shape".into())
}

fn entity<T: DeserializeOwned>(item: Item) -> Result<T, String> {
    serde_dynamo::from_item(item).map_err(|e| without_values(&e.to_string()))
}

/// An entity found at the key its own fields make, or an error naming the mismatch.
fn at_own_key(found: &Key, own: Key, entity: Entity) -> Result<Entity, String> {
    if *found == own {
        Ok(entity)
    } else {
        Err("its fields name another key than the one it is stored under".into())
    }
}

/// A decode error without the stored value serde may quote (a name, an email): findings name
/// items by key and say what is wrong, never what a person's data is.
fn without_values(error: &str) -> String {
    if error.starts_with("missing field") || error.starts_with("unknown field") {
        return error.to_owned();
    }
    let kind = error.split(['`', '"']).next().unwrap_or_default();
    kind.trim_end_matches([' ', ':', ',']).to_owned()
}
