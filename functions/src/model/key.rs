//! A primary key typed by the entity it addresses (modyne's rule that each entity owns its keys).
//!
//! `singlet_shared::keys` spells every key once, as text; this wraps one in the type of the item
//! it is the key of. The store's reads and writes of one entity take a [`KeyOf`] of that entity
//! (`ctx.get::<Vehicle>`, `Update::<Patron>::at`), so handing a patron's key to a book's update,
//! or reading a lock where the vehicle was meant, is a compile error, not a `500` at run time.
//!
//! Keys come from the entity: [`crate::model::Entity::key`] on an entity in hand, or its own
//! `key_of` (`Vehicle::key_of(&id)`) from the inputs its key is made of. A key that arrives as
//! text from elsewhere (a scanned item, the console's delete) becomes typed only through
//! [`KeyOf::checked`], which says no when the text is no key of that entity.
//!
//! A patron's key updates a patron:
//!
//! ```
//! # use singlet_functions::model::library::Patron;
//! # use singlet_functions::store::Update;
//! # use singlet_shared::Id;
//! let (branch, patron) = (Id::parse("b1").unwrap(), Id::parse("p1").unwrap());
//! let _ = Update::<Patron>::at(Patron::key_of(&branch, &patron));
//! ```
//!
//! and never a book:
//!
//! ```compile_fail,E0308
//! # use singlet_functions::model::library::{Book, Patron};
//! # use singlet_functions::store::Update;
//! # use singlet_shared::Id;
//! let (branch, patron) = (Id::parse("b1").unwrap(), Id::parse("p1").unwrap());
//! let _ = Update::<Book>::at(Patron::key_of(&branch, &patron));
//! ```

use super::Entity;
use singlet_shared::Key;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

/// The primary key of an item of `E`.
pub struct KeyOf<E> {
    key: Key,
    entity: PhantomData<fn() -> E>,
}

impl<E: Entity> KeyOf<E> {
    /// `key`, spelled by one of `singlet_shared::keys`' functions for `E`: only the model's own
    /// key functions call this. A key of another shape is a bug the tests catch here.
    pub(crate) fn new(key: Key) -> Self {
        debug_assert!(
            E::TYPE.keys.iter().any(|shape| shape.fits(&key)),
            "{key:?} is no key of a {}",
            E::TYPE.name
        );
        Self {
            key,
            entity: PhantomData,
        }
    }

    /// `key` as a key of `E`, if it has one of `E`'s shapes: for a key that arrives as text (a
    /// scanned item's, an operator's). `None` says it addresses no `E`.
    pub fn checked(key: Key) -> Option<Self> {
        E::TYPE
            .keys
            .iter()
            .any(|shape| shape.fits(&key))
            .then_some(Self {
                key,
                entity: PhantomData,
            })
    }
}

impl<E> KeyOf<E> {
    /// The key's text, for what takes any item's key (a transaction's parts, a log line).
    pub fn into_key(self) -> Key {
        self.key
    }
}

impl<E> Deref for KeyOf<E> {
    type Target = Key;

    fn deref(&self) -> &Key {
        &self.key
    }
}

impl<E> From<KeyOf<E>> for Key {
    fn from(key: KeyOf<E>) -> Key {
        key.key
    }
}

// By hand, not derived: a derive would ask `E` for the trait, and a key is cloned, compared and
// printed whatever its entity is.
impl<E> Clone for KeyOf<E> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            entity: PhantomData,
        }
    }
}

impl<E> PartialEq for KeyOf<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<E> Eq for KeyOf<E> {}

impl<E> fmt::Debug for KeyOf<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.key.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::KeyOf;
    use crate::model::fleet::{PlateLock, Vehicle};
    use crate::model::library::Patron;
    use singlet_shared::{Id, Key, Plate};

    #[test]
    fn a_key_of_text_is_typed_only_as_the_entity_it_addresses() {
        let id = Id::parse("v1").unwrap();
        let vehicle: Key = Vehicle::key_of(&id).into();
        assert_eq!(
            KeyOf::<Vehicle>::checked(vehicle.clone()),
            Some(Vehicle::key_of(&id))
        );
        assert_eq!(KeyOf::<PlateLock>::checked(vehicle.clone()), None);
        assert_eq!(KeyOf::<Patron>::checked(vehicle), None);
        let plate = PlateLock::key_of(&Plate::parse("KA19 XTR").unwrap()).into_key();
        assert_eq!(plate.pk, "PLATE#ka19xtr");
        assert!(KeyOf::<PlateLock>::checked(plate).is_some());
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "is no key of a patron")]
    fn the_model_never_types_another_entitys_key() {
        let _ = KeyOf::<Patron>::new(Vehicle::key_of(&Id::parse("v1").unwrap()).into_key());
    }
}
