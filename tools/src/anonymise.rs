//! `export --anonymise`: personal data replaced, one value always by the same replacement, so a
//! copy of production can be debugged on a laptop without anyone's data on it.
//!
//! Each item is read as the entity it is (the model's registry), the personal fields its entity
//! type declares (`EntityType::personal`) replaced, and the item made again from them: a lock keyed by a value
//! (`PLATE#<plate>`, `CARD#<card>`, `UNIQ#EMAIL#<email>`, ...) is re-keyed by the same
//! replacement its owner gets, so every lock still names an owner that holds its value, no two
//! owners share a value (replacements are 64-bit keyed hashes), and every `fsck` rule holds on the
//! copy. The JSON texts an item keeps (an outbox item's event, an idempotency record's response)
//! have the same fields replaced by the same rule (a field is known there by its name, as the
//! entities declare it), and a digest it keeps (an idempotency record's fingerprint) is replaced
//! by a keyed hash of itself. An entity added to the model declares its personal fields (`&[]`
//! for none) or does not compile: nothing here names an entity but the owner lock.
//!
//! Replacements are HMACs under a key made at random for each export, so no one, the exporter
//! included, can test a guess ("is `ada@example.com` in there?") against a copy. Replaced:
//! emails, usernames, patron and display names, card numbers, plates, chassis numbers, branch
//! addresses and phone numbers. Kept: ids, titles, depots, times, and an account's `owner` (a
//! token's opaque subject; its owner lock is keyed by a keyed hash of it already).

use crate::fsck::entity::decode;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;
use singlet_functions::accounts::owner_lock_under;
use singlet_functions::ids::IdKey;
use singlet_functions::loans::mark_overdue::FUNCTION as MARKER;
use singlet_functions::model::{
    self, ENTITY_TYPE, Personal, PersonalField, TableEntity, VERSION, personal_by_name, type_of,
};
use singlet_functions::store::Item;
use singlet_functions::store::bulk::scan_page;
use singlet_shared::normalise::MAX_PLATE_LEN;
use singlet_shared::schema::{PK, SK};
use singlet_shared::{Chassis, Plate};
use std::collections::HashMap;

pub struct Anonymiser {
    key: IdKey,
    /// Each self-owned account's owner (a subject), by account id: an owner lock names its
    /// account, and its key is a keyed hash of that owner ([`Anonymiser::with_owners_of`]).
    owners: HashMap<String, String>,
    /// The key the copy's owner locks are made under: the one `cargo run` uses without
    /// `CURSOR_KEY` (its published local secret), so that the runner and `fsck` find them.
    copy_owners: IdKey,
}

/// `replacement` (letters and digits only) with the separators (spaces, hyphens) of `spelled`
/// where `spelled` has them, after as many letters and digits: every spelling of one plate gets
/// one compact replacement (they share one lock), and two spellings stay two (`AB 12 CD` and
/// `AB-12 CD`, which two vehicles not yet migrated by `plates-compact` may hold under two locks;
/// the copy's own `plates-compact` then finds the same conflict). A spelling with more than 15
/// separators has a shorter compact replacement, so that all of them fit a plate's 32
/// characters ([`Anonymiser::registration`]); past that, separators would be left out.
fn with_separators_of(spelled: &str, replacement: &str) -> String {
    let mut letters = replacement.chars();
    let mut separators_left = MAX_PLATE_LEN.saturating_sub(replacement.chars().count());
    let mut out = String::new();
    for c in spelled.chars() {
        if matches!(c, ' ' | '-') {
            if separators_left > 0 {
                out.push(c);
                separators_left -= 1;
            }
        } else if let Some(letter) = letters.next() {
            out.push(letter);
        }
    }
    out.extend(letters);
    out
}

impl Anonymiser {
    /// An anonymiser with a key of its own, made at random.
    pub fn random() -> Self {
        let key: [u8; 32] = rand::random();
        Self::with_key(&key)
    }

    pub fn with_key(key: &[u8]) -> Self {
        Self {
            key: IdKey::new(key),
            owners: HashMap::new(),
            // As `Ctx::new` derives its owner key from the runner's published secret.
            copy_owners: IdKey::derived_from(singlet_functions::cursor::LOCAL_SECRET.as_bytes()),
        }
    }

    /// This anonymiser, knowing each self-owned account's owner in `client`'s `table` (one scan
    /// of it, before the export's): an owner lock holds only a keyed hash of its subject, under
    /// the API's key, so the copy's lock, keyed by the subject's replacement, is made from its
    /// account's owner.
    pub async fn with_owners_of(mut self, client: &Client, table: &str) -> Result<Self, String> {
        let mut start = None;
        loop {
            let (items, next) = scan_page(client, table, 0, 1, start).await?;
            for item in &items {
                if let Ok(TableEntity::Account(row)) = decode(item)
                    && row.owners_one
                {
                    self.owners
                        .insert(row.account.account_id.to_string(), row.owner);
                }
            }
            match next {
                Some(next) => start = Some(next),
                None => return Ok(self),
            }
        }
    }

    /// 64 bits of a keyed hash of `value`, as 16 hex digits.
    fn hash(&self, kind: Personal, value: &str) -> String {
        self.key.pseudonym(&format!("{kind:?}"), &[value])[..16].to_owned()
    }

    /// The compact replacement of a plate or chassis number `spelled`: `prefix` and 16 hex
    /// digits of a keyed hash of its `compact` form, fewer when its separators need the room
    /// (a plate is at most 32 characters, and every separator is kept: [`with_separators_of`]).
    fn registration(&self, prefix: &str, kind: Personal, spelled: &str, compact: &str) -> String {
        let separators = spelled.chars().filter(|c| matches!(c, ' ' | '-')).count();
        let digits = MAX_PLATE_LEN
            .saturating_sub(separators + prefix.len())
            .clamp(1, 16);
        format!("{prefix}{}", &self.hash(kind, compact)[..digits])
    }

    /// The replacement of `value`, valid as the original was (a plate for a plate), normalised as
    /// the API stores it.
    fn replace(&self, kind: Personal, value: &str) -> String {
        match kind {
            // Plates and chassis numbers are one value whatever their separators: the compact
            // form is what is replaced, and the spelling's separators are kept around it.
            Personal::Plate => {
                let compact = Plate::parse(value).map_or(value.to_owned(), |p| p.compact());
                with_separators_of(value, &self.registration("p", kind, value, &compact))
            }
            Personal::Chassis => {
                let compact = Chassis::parse(value).map_or(value.to_owned(), |c| c.compact());
                with_separators_of(value, &self.registration("c", kind, value, &compact))
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
            // No subject at all (an account made before accounts had owners) stays none, and the
            // marker is a function, not a person.
            Personal::Subject if value.is_empty() || value == MARKER => value.to_owned(),
            Personal::Subject => format!("sub-{}", self.hash(kind, value)),
            // Text that is no JSON is kept: only JSON has fields to know personal data by.
            Personal::JsonText => match serde_json::from_str::<Value>(value) {
                Ok(mut json) => {
                    self.json(&mut json);
                    json.to_string()
                }
                Err(_) => value.to_owned(),
            },
            Personal::Digest => self.key.pseudonym("digest", &[value]),
        }
    }

    #[cfg(test)]
    fn plate(&self, plate: &Plate) -> Plate {
        Plate::parse(&self.replace(Personal::Plate, plate.as_str())).expect("a valid plate")
    }

    /// `item` with its personal data replaced (and its key, when the key holds a value). The
    /// item keeps its attributes and nothing more: its `_et` and `_v` (or their absence) as they
    /// were, and no index key it did not have, so the copy is at the schema version the table is
    /// and a migration left undone is undone in the copy too.
    ///
    /// An item the registry cannot read (a vehicle two versions behind, say: `fsck` reports it
    /// undecodable in the copy as in the table) has its attributes replaced by their names, as
    /// a JSON text's fields are, and a key that holds a value replaced by a keyed hash of it.
    pub fn item(&self, item: Item) -> Item {
        let mut item = item;
        // Read as `fsck` reads it: an entity stored under a key its own fields do not make is
        // none. Rebuilt from its fields it would land on another item's key (a misplaced copy of
        // a lock, on the genuine lock's replacement), and `load` would refuse the copy.
        match decode(&item) {
            Ok(entity) => self.entity(entity, &mut item),
            Err(_) => self.undecodable(&mut item),
        }
        item
    }

    /// The personal fields `entity` declares, replaced in `item` (its stored item): the entity
    /// is made again from its replaced fields, so that a key made of a value (a lock's) is made
    /// of the replacement, and the item takes its attributes, no more.
    fn entity(&self, entity: TableEntity, item: &mut Item) {
        let personal = entity.entity_type().personal;
        if personal.is_empty() && !matches!(entity, TableEntity::OwnerLock(_)) {
            return;
        }
        // A lock still at the key the rule before `plates-compact` made of its spelling stays
        // at such a key.
        let before_compact = entity
            .earlier_key()
            .is_some_and(|key| model::key_of(item) == Some(key));
        let mut fields = entity.to_item();
        self.replace_fields(personal, &mut fields);
        let Ok(replaced) = model::decode(&fields) else {
            // A replacement the entity does not take: nothing of the item is kept by value.
            return self.undecodable(item);
        };
        let replaced = self.owner_lock(replaced);
        let mut replaced_item = replaced.to_item();
        if before_compact && let Some(key) = replaced.earlier_key() {
            replaced_item.extend(singlet_functions::store::item::key_item(&key));
        }
        for (name, value) in replaced_item {
            if item.contains_key(&name) && name != ENTITY_TYPE && name != VERSION {
                item.insert(name, value);
            }
        }
    }

    /// Each of `personal` that `item` holds as text, replaced.
    fn replace_fields(&self, personal: &[PersonalField], item: &mut Item) {
        for field in personal {
            if let Some(AttributeValue::S(text)) = item.get_mut(field.name) {
                *text = self.replace(field.holds, text);
            }
        }
    }

    /// An item no entity reads: the personal attributes its type declares (its `_et`, or its
    /// key's shape), or, of no known type, any attribute an entity declares personal by that
    /// name; and its key when the key holds a value (`PLATE#…`, `UNIQ#EMAIL#…`).
    fn undecodable(&self, item: &mut Item) {
        let declared = type_of(item).map_or(&[][..], |entity_type| entity_type.personal);
        for (name, value) in item.iter_mut() {
            let kind = declared
                .iter()
                .find(|field| field.name == name)
                .map(|field| field.holds)
                .or_else(|| personal_by_name(name));
            if let (Some(kind), AttributeValue::S(text)) = (kind, &value) {
                *value = AttributeValue::S(self.replace(kind, text));
            }
        }
        for name in [PK, SK] {
            if let Some(AttributeValue::S(key)) = item.get(name)
                && model::value_keyed(key).is_some()
                && let Some((prefix, value)) = key.rsplit_once('#')
            {
                let replaced = format!("{prefix}#{}", self.key.pseudonym("key", &[value]));
                item.insert(name.to_owned(), AttributeValue::S(replaced));
            }
        }
    }

    /// An owner lock keyed as the copy's runner keys it, by its owner's replacement (its key is a
    /// keyed hash of the owner, under the server's key). A lock whose account is not its owner's
    /// one account (an orphan, which `fsck` reports) gets a key of the export's own: it stays an
    /// orphan in the copy. Any other entity as it is.
    fn owner_lock(&self, entity: TableEntity) -> TableEntity {
        let TableEntity::OwnerLock(mut lock) = entity else {
            return entity;
        };
        lock.pseudonym = match self.owners.get(lock.account_id.as_str()) {
            Some(owner) => {
                let owner = self.replace(Personal::Subject, owner);
                owner_lock_under(&self.copy_owners, &owner, &lock.account_id).pseudonym
            }
            None => self.key.pseudonym("owner lock", &[&lock.pseudonym]),
        };
        TableEntity::OwnerLock(lock)
    }

    /// Replaces, anywhere in `json`, the string value of every personal field.
    fn json(&self, json: &mut Value) {
        match json {
            Value::Object(object) => {
                for (name, value) in object.iter_mut() {
                    match (personal_by_name(name), value) {
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
    use singlet_shared::keys;

    #[test]
    fn one_value_one_replacement_whatever_its_spelling() {
        let anonymiser = Anonymiser::with_key(b"k");
        let a = Plate::parse("KA-19 XTR").unwrap();
        let b = Plate::parse("ka19xtr").unwrap();
        assert_eq!(
            anonymiser.plate(&a).compact(),
            anonymiser.plate(&b).compact()
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
        use singlet_functions::fleet::{PlateLock, Vehicle};
        use singlet_functions::model::{Entity, key_of};
        use singlet_functions::store::s;
        let anonymiser = Anonymiser::with_key(b"k");
        let vehicle = |id: &str, plate: &Plate| Vehicle {
            vehicle_id: singlet_shared::Id::parse(id).unwrap(),
            plate: plate.clone(),
            chassis: Chassis::parse(&format!("ch-{id}")).unwrap(),
            depot: "north".into(),
            added_at: 1,
        };
        let mut pairs = Vec::new();
        for (id, plate) in [("v1", "AB 12 CD"), ("v2", "AB-12 CD")] {
            let plate = Plate::parse(plate).unwrap();
            let mut stored = vehicle(id, &plate).to_item();
            stored.insert(VERSION.into(), AttributeValue::N("2".into()));
            let mut lock = PlateLock {
                plate: plate.clone(),
                vehicle_id: singlet_shared::Id::parse(id).unwrap(),
            }
            .to_item();
            let old_key = keys::plate_lock_before_compact(&plate);
            lock.insert("PK".into(), s(old_key.pk));
            lock.insert("SK".into(), s(old_key.sk));
            pairs.push((stored, lock, true));
        }
        // A version-2 vehicle whose plate was changed since: its new lock is compact.
        let plate = Plate::parse("XY 34").unwrap();
        let mut stored = vehicle("v3", &plate).to_item();
        stored.insert(VERSION.into(), AttributeValue::N("2".into()));
        let lock = PlateLock {
            plate: plate.clone(),
            vehicle_id: singlet_shared::Id::parse("v3").unwrap(),
        }
        .to_item();
        pairs.push((stored, lock, false));
        let mut lock_keys = Vec::new();
        for (vehicle, lock, before_compact) in pairs {
            let (vehicle, lock) = (anonymiser.item(vehicle), anonymiser.item(lock));
            assert_eq!(vehicle[VERSION], AttributeValue::N("2".into()));
            assert_eq!(
                vehicle["plate"], lock["plate"],
                "the lock names its vehicle's plate"
            );
            let plate = Plate::parse(vehicle["plate"].as_s().unwrap()).unwrap();
            let expected = if before_compact {
                keys::plate_lock_before_compact(&plate)
            } else {
                keys::plate_lock(&plate)
            };
            assert_eq!(key_of(&lock).unwrap(), expected);
            lock_keys.push(key_of(&lock).unwrap());
        }
        assert_ne!(lock_keys[0], lock_keys[1], "two locks, two keys");
    }

    #[test]
    fn separators_are_kept_around_one_compact_replacement() {
        let anonymiser = Anonymiser::with_key(b"k");
        let spellings = ["AB 12 CD", "AB-12 CD", "ab12cd", "-AB12CD", "A B 1 2 C D"];
        let replaced: Vec<String> = spellings
            .iter()
            .map(|p| anonymiser.replace(Personal::Plate, &Plate::parse(p).unwrap().to_string()))
            .collect();
        let compact: Vec<String> = replaced
            .iter()
            .map(|p| Plate::parse(p).unwrap().compact())
            .collect();
        assert!(compact.iter().all(|c| *c == compact[0]), "{compact:?}");
        let distinct: std::collections::HashSet<&String> = replaced.iter().collect();
        assert_eq!(distinct.len(), spellings.len(), "{replaced:?}");
        // The longest spellings a plate may have stay plates, and stay apart.
        let long: Vec<String> = [30, 20, 16, 15]
            .into_iter()
            .map(|hyphens| format!("a{}b", "-".repeat(hyphens)))
            .collect();
        let replaced: Vec<String> = long
            .iter()
            .map(|plate| anonymiser.replace(Personal::Plate, plate))
            .collect();
        for plate in &replaced {
            assert!(Plate::parse(plate).is_ok(), "{plate}");
            assert!(plate.chars().count() <= MAX_PLATE_LEN, "{plate}");
        }
        let distinct: std::collections::HashSet<&String> = replaced.iter().collect();
        assert_eq!(distinct.len(), long.len(), "{replaced:?}");
    }

    /// An item no entity reads (a vehicle two versions behind) keeps no personal data either.
    #[test]
    fn an_undecodable_item_keeps_no_personal_data() {
        use singlet_functions::store::s;
        let anonymiser = Anonymiser::with_key(b"k");
        let vehicle = Item::from([
            ("PK".into(), s("VEHICLE#v1")),
            ("SK".into(), s("VEHICLE#v1")),
            ("vehicleId".into(), s("v1")),
            ("plate".into(), s("KA19XTR")),
            ("chassis".into(), s("WDB123")),
            ("depot".into(), s("north")),
            ("addedAt".into(), AttributeValue::N("1".into())),
            (ENTITY_TYPE.into(), s("vehicle")),
            (VERSION.into(), AttributeValue::N("1".into())),
        ]);
        assert!(decode(&vehicle).is_err(), "two versions behind");
        let copy = anonymiser.item(vehicle);
        let text = format!("{copy:?}");
        assert!(
            !text.contains("KA19XTR") && !text.contains("WDB123"),
            "{text}"
        );
        assert_eq!(copy["depot"], s("north"));
        let lock = Item::from([
            ("PK".into(), s("CARD#c-1")),
            ("SK".into(), s("CARD#c-1")),
            ("unexpected".into(), s("x")),
        ]);
        let copy = anonymiser.item(lock);
        assert!(!format!("{copy:?}").contains("c-1"), "{copy:?}");
        assert!(copy["PK"].as_s().unwrap().starts_with("CARD#"));
    }

    /// A lock stored under a key its own fields do not make (a copy of a genuine lock at another
    /// value's key) is read as `fsck` reads it, undecodable: its key is hashed apart instead of
    /// rebuilt from its fields onto the genuine lock's new key, which `load` would refuse.
    #[test]
    fn a_misplaced_lock_keeps_a_key_of_its_own() {
        use singlet_functions::accounts::EmailLock;
        use singlet_functions::model::{Entity, key_of};
        use singlet_functions::store::s;
        use singlet_shared::Email;
        let anonymiser = Anonymiser::with_key(b"k");
        let genuine = EmailLock {
            account_id: singlet_shared::Id::parse("a1").unwrap(),
            value: Email::parse("ada@example.com").unwrap(),
        }
        .to_item();
        let mut misplaced = genuine.clone();
        misplaced.insert("PK".into(), s("UNIQ#EMAIL#nobody@example.com"));
        assert!(decode(&misplaced).is_err(), "fsck reads no entity there");
        let (genuine, misplaced) = (anonymiser.item(genuine), anonymiser.item(misplaced));
        assert_ne!(key_of(&genuine), key_of(&misplaced));
        let text = format!("{misplaced:?}");
        assert!(
            !text.contains("ada@") && !text.contains("nobody@"),
            "{text}"
        );
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
