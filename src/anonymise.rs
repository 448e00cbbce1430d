//! `export --anonymise`: personal data replaced, one value always by the same replacement, so a
//! copy of production can be debugged on a laptop without anyone's data on it.
//!
//! Each item is read as the entity it is (the model's registry), its personal fields replaced
//! in the typed entity, and the item made again from it: a lock keyed by a value
//! (`PLATE#<plate>`, `CARD#<card>`, `UNIQ#EMAIL#<email>`, ...) is re-keyed by the same
//! replacement its owner gets, so every lock still names an owner that holds its value, no two
//! owners share a value (replacements are 64-bit keyed hashes), and every `fsck` rule holds on the
//! copy. The JSON texts an item keeps (an outbox item's event, an idempotency record's response)
//! have the same fields replaced by the same rule, and a digest it keeps (an idempotency record's
//! fingerprint) is replaced by a keyed hash of itself.
//!
//! Replacements are HMACs under a key made at random for each export, so no one, the exporter
//! included, can test a guess ("is `ada@example.com` in there?") against a copy. Replaced:
//! emails, usernames, patron and display names, card numbers, plates, chassis numbers, branch
//! addresses and phone numbers. Kept: ids, titles, depots, times, and an account's `owner` (a
//! token's opaque subject; its owner lock is keyed by a keyed hash of it already).

use serde_json::Value;
use singlet_functions::fleet::Vehicle;
use singlet_functions::ids::IdKey;
use singlet_functions::model::{Decoded, ENTITY_TYPE, VERSION, decode, key_of, stored_version};
use singlet_functions::store::Item;
use singlet_shared::{CardNumber, Chassis, Email, Key, Plate, Username, keys};

pub struct Anonymiser {
    key: IdKey,
}

/// A field of an entity or of a JSON text that holds personal data, by what it holds.
#[derive(Debug, Clone, Copy)]
enum Personal {
    Plate,
    Chassis,
    Email,
    Username,
    Name,
    Card,
    Phone,
    Address,
}

impl Personal {
    /// The field a JSON text (an event's `data`, a response body) names it by.
    fn of_field(name: &str) -> Option<Self> {
        Some(match name {
            "plate" => Personal::Plate,
            "chassis" => Personal::Chassis,
            "email" => Personal::Email,
            "username" => Personal::Username,
            "firstName" | "lastName" | "displayName" => Personal::Name,
            "cardNumber" => Personal::Card,
            "phone" => Personal::Phone,
            "address" => Personal::Address,
            _ => return None,
        })
    }
}

/// Which form of a plate or chassis number its replacement is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// Its compact form: one value whatever its separators, as its lock is keyed.
    Compact,
    /// Its spelling, for a vehicle not yet migrated by `plates-compact` and a lock still at the
    /// key its spelling makes: two such vehicles may hold `KA 19` and `KA-19` under two locks,
    /// which one replacement would put at one key (a copy `load` refuses). Such a copy keeps the
    /// two apart, so its own `plates-compact` finds no conflict where the table's does.
    AsSpelled,
}

impl Spelling {
    fn of(item: &Item, entity: &Decoded) -> Self {
        let at = |key: Key| key_of(item).is_some_and(|k| k == key);
        let spelled = match entity {
            Decoded::Vehicle(_) => stored_version(item).unwrap_or(1) < Vehicle::COMPACT_LOCKS_SINCE,
            Decoded::PlateLock(lock) => !at(keys::plate_lock(&lock.plate)),
            Decoded::ChassisLock(lock) => !at(keys::chassis_lock(&lock.chassis)),
            _ => false,
        };
        if spelled {
            Spelling::AsSpelled
        } else {
            Spelling::Compact
        }
    }
}

/// Attributes that hold JSON text with personal data in it.
const JSON_TEXTS: [&str; 2] = ["detail", "body"];

/// Attributes that hold an unkeyed digest of personal data: an idempotency record's
/// `fingerprint` hashes its caller and body, so anyone holding a copy could hash a guess (a
/// subject and an email) and compare. Each is replaced by a keyed hash of itself.
const DIGESTS: [&str; 1] = ["fingerprint"];

impl Anonymiser {
    /// An anonymiser with a key of its own, made at random.
    pub fn random() -> Self {
        let key: [u8; 32] = rand::random();
        Self::with_key(&key)
    }

    pub fn with_key(key: &[u8]) -> Self {
        Self {
            key: IdKey::new(key),
        }
    }

    /// 64 bits of a keyed hash of `value`, as 16 hex digits.
    fn hash(&self, kind: Personal, value: &str) -> String {
        self.key.pseudonym(&format!("{kind:?}"), &[value])[..16].to_owned()
    }

    /// The replacement of `value`, valid as the original was (a plate for a plate), normalised as
    /// the API stores it.
    fn replace(&self, kind: Personal, value: &str) -> String {
        match kind {
            // Plates and chassis numbers are one value whatever their separators.
            Personal::Plate => {
                let compact = Plate::parse(value).map_or(value.to_owned(), |p| p.compact());
                format!("p{}", self.hash(kind, &compact))
            }
            Personal::Chassis => {
                let compact = Chassis::parse(value).map_or(value.to_owned(), |c| c.compact());
                format!("c{}", self.hash(kind, &compact))
            }
            Personal::Email => format!("u{}@example.com", self.hash(kind, value)),
            Personal::Username => format!("u{}", self.hash(kind, value)),
            Personal::Name => format!("Name {}", self.hash(kind, value)),
            Personal::Card => format!("card-{}", self.hash(kind, value)),
            Personal::Phone => {
                let digits: String = self
                    .hash(kind, value)
                    .chars()
                    .map(|c| char::from(b'0' + (c.to_digit(16).expect("hex") % 10) as u8))
                    .take(10)
                    .collect();
                format!("+00 {digits}")
            }
            Personal::Address => format!("{} Example Street", self.hash(kind, value)),
        }
    }

    fn plate(&self, plate: &Plate, spelling: Spelling) -> Plate {
        let replaced = match spelling {
            Spelling::AsSpelled if plate.as_str() != plate.compact() => {
                self.replace_as_spelled(Personal::Plate, plate.as_str())
            }
            _ => self.replace(Personal::Plate, plate.as_str()),
        };
        Plate::parse(&replaced).expect("a valid plate")
    }

    fn chassis(&self, chassis: &Chassis, spelling: Spelling) -> Chassis {
        let replaced = match spelling {
            Spelling::AsSpelled if chassis.as_str() != chassis.compact() => {
                self.replace_as_spelled(Personal::Chassis, chassis.as_str())
            }
            _ => self.replace(Personal::Chassis, chassis.as_str()),
        };
        Chassis::parse(&replaced).expect("a valid chassis")
    }

    /// A plate or chassis number replaced by its spelling, separators and all: for an item
    /// keyed by the rule before `plates-compact` ([`Spelling::AsSpelled`]).
    fn replace_as_spelled(&self, kind: Personal, value: &str) -> String {
        let prefix = match kind {
            Personal::Chassis => "c",
            _ => "p",
        };
        format!(
            "{prefix}{}",
            self.hash(kind, &format!("as spelled: {value}"))
        )
    }

    fn email(&self, email: &Email) -> Email {
        Email::parse(&self.replace(Personal::Email, email.as_str())).expect("a valid email")
    }

    fn username(&self, username: &Username) -> Username {
        Username::parse(&self.replace(Personal::Username, username.as_str()))
            .expect("a valid username")
    }

    fn card(&self, card: &CardNumber) -> CardNumber {
        CardNumber::parse(&self.replace(Personal::Card, card.as_str())).expect("a valid card")
    }

    fn name(&self, name: &str) -> String {
        self.replace(Personal::Name, name)
    }

    /// `item` with its personal data replaced (and its key, when the key holds a value). The
    /// item keeps its attributes and nothing more: its `_et` and `_v` (or their absence) as they
    /// were, and no index key it did not have, so the copy is at the schema version the table is
    /// and a migration left undone is undone in the copy too.
    pub fn item(&self, item: Item) -> Item {
        let mut item = item;
        if let Ok(entity) = decode(&item) {
            let spelling = Spelling::of(&item, &entity);
            if let Some(replaced) = self.entity(entity, spelling) {
                for (name, value) in replaced.to_item() {
                    if item.contains_key(&name) && name != ENTITY_TYPE && name != VERSION {
                        item.insert(name, value);
                    }
                }
            }
        }
        for name in DIGESTS {
            if let Some(digest) = item.get(name).and_then(|v| v.as_s().ok()) {
                let replaced = self.key.pseudonym(name, &[digest]);
                item.insert(name.to_owned(), singlet_functions::store::s(replaced));
            }
        }
        for name in JSON_TEXTS {
            if let Some(text) = item.get(name).and_then(|v| v.as_s().ok())
                && let Ok(mut json) = serde_json::from_str::<Value>(text)
            {
                self.json(&mut json);
                item.insert(
                    name.to_owned(),
                    singlet_functions::store::s(json.to_string()),
                );
            }
        }
        item
    }

    /// The entity with its personal fields replaced; `None` for an entity that holds none.
    fn entity(&self, entity: Decoded, spelling: Spelling) -> Option<Decoded> {
        Some(match entity {
            Decoded::Vehicle(mut vehicle) => {
                vehicle.plate = self.plate(&vehicle.plate, spelling);
                vehicle.chassis = self.chassis(&vehicle.chassis, spelling);
                Decoded::Vehicle(vehicle)
            }
            Decoded::PlateLock(mut lock) => {
                lock.plate = self.plate(&lock.plate, spelling);
                Decoded::PlateLock(lock)
            }
            Decoded::ChassisLock(mut lock) => {
                lock.chassis = self.chassis(&lock.chassis, spelling);
                Decoded::ChassisLock(lock)
            }
            Decoded::Account(mut row) => {
                row.account.email = self.email(&row.account.email);
                row.account.username = self.username(&row.account.username);
                row.account.display_name = row.account.display_name.map(|n| self.name(n.as_str()));
                Decoded::Account(row)
            }
            Decoded::EmailLock(mut lock) => {
                lock.value = self.email(&lock.value);
                Decoded::EmailLock(lock)
            }
            Decoded::UsernameLock(mut lock) => {
                lock.value = self.username(&lock.value);
                Decoded::UsernameLock(lock)
            }
            Decoded::Branch(mut branch) => {
                branch.address = self.replace(Personal::Address, &branch.address);
                branch.phone = self.replace(Personal::Phone, &branch.phone);
                Decoded::Branch(branch)
            }
            Decoded::Patron(mut patron) => {
                patron.card_number = self.card(&patron.card_number);
                patron.first_name = self.name(&patron.first_name);
                patron.last_name = self.name(&patron.last_name);
                patron.email = self.email(&patron.email);
                Decoded::Patron(patron)
            }
            Decoded::CardLock(mut lock) => {
                lock.card_number = self.card(&lock.card_number);
                Decoded::CardLock(lock)
            }
            _ => return None,
        })
    }

    /// Replaces, anywhere in `json`, the string value of every personal field.
    fn json(&self, json: &mut Value) {
        match json {
            Value::Object(object) => {
                for (name, value) in object.iter_mut() {
                    match (Personal::of_field(name), value) {
                        (Some(kind), Value::String(text)) => *text = self.replace(kind, text),
                        (_, value) => self.json(value),
                    }
                }
            }
            Value::Array(values) => values.iter_mut().for_each(|value| self.json(value)),
            // An event's `detail` holds its `data` as an object; a response body is JSON text.
            Value::String(text) => {
                if let Ok(mut inner @ (Value::Object(_) | Value::Array(_))) =
                    serde_json::from_str::<Value>(text)
                {
                    self.json(&mut inner);
                    *text = inner.to_string();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_one_replacement_whatever_its_spelling() {
        let anonymiser = Anonymiser::with_key(b"k");
        let a = Plate::parse("KA-19 XTR").unwrap();
        let b = Plate::parse("ka19xtr").unwrap();
        assert_eq!(
            anonymiser.plate(&a, Spelling::Compact).compact(),
            anonymiser.plate(&b, Spelling::Compact).compact()
        );
        assert_ne!(
            anonymiser.replace(Personal::Name, "Ada"),
            anonymiser.replace(Personal::Name, "Bob")
        );
        assert_eq!(
            anonymiser.replace(Personal::Email, "ada@example.com"),
            anonymiser.replace(Personal::Email, "ada@example.com")
        );
        let phone = anonymiser.replace(Personal::Phone, "+91 20 1234");
        assert!(phone.starts_with("+00 ") && phone.len() == 14, "{phone}");
    }

    /// Two vehicles `plates-compact` has not migrated, whose plates differ only by separators,
    /// hold two locks: the copy keeps them at two keys, each naming its vehicle's replaced plate,
    /// and every item keeps its `_v` and its attributes.
    #[test]
    fn vehicles_before_plates_compact_keep_their_locks_apart() {
        use aws_sdk_dynamodb::types::AttributeValue;
        use singlet_functions::model::Entity;
        use singlet_functions::store::s;
        let anonymiser = Anonymiser::with_key(b"k");
        let mut items = Vec::new();
        for (id, plate) in [("v1", "AB 12 CD"), ("v2", "AB-12 CD")] {
            let plate = Plate::parse(plate).unwrap();
            let vehicle = Vehicle {
                vehicle_id: singlet_shared::Id::parse(id).unwrap(),
                plate: plate.clone(),
                chassis: Chassis::parse(&format!("ch-{id}")).unwrap(),
                depot: "north".into(),
                added_at: 1,
            };
            let mut stored = vehicle.to_item();
            stored.insert(VERSION.into(), AttributeValue::N("2".into()));
            let lock = singlet_functions::fleet::PlateLock {
                plate: plate.clone(),
                vehicle_id: vehicle.vehicle_id.clone(),
            };
            let mut stored_lock = lock.to_item();
            let old_key = keys::plate_lock_before_compact(&plate);
            stored_lock.insert("PK".into(), s(old_key.pk));
            stored_lock.insert("SK".into(), s(old_key.sk));
            items.push((stored, stored_lock));
        }
        let mut lock_keys = Vec::new();
        for (vehicle, lock) in items {
            let (vehicle, lock) = (anonymiser.item(vehicle), anonymiser.item(lock));
            assert_eq!(vehicle[VERSION], AttributeValue::N("2".into()));
            assert_eq!(
                vehicle["plate"], lock["plate"],
                "the lock names its vehicle's plate"
            );
            let plate = Plate::parse(vehicle["plate"].as_s().unwrap()).unwrap();
            assert_eq!(
                key_of(&lock).unwrap(),
                keys::plate_lock_before_compact(&plate)
            );
            lock_keys.push(key_of(&lock).unwrap());
        }
        assert_ne!(lock_keys[0], lock_keys[1], "two locks, two keys");
    }

    #[test]
    fn json_texts_are_replaced_field_by_field() {
        let anonymiser = Anonymiser::with_key(b"k");
        let mut json = serde_json::json!({
            "data": {"email": "ada@example.com", "title": "Kept"},
            "list": [{"cardNumber": "c-1"}],
        });
        anonymiser.json(&mut json);
        let text = json.to_string();
        assert!(
            !text.contains("ada@example.com") && !text.contains("c-1"),
            "{text}"
        );
        assert!(text.contains("Kept"), "{text}");
    }
}
