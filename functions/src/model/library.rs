//! The library's entities: branches, patrons and the locks of their cards, books, and copies.

use super::{
    Domain, Entity, EntityType, Expiry, Field, Held, Item, KeyOf, KeyShape, Lock, Personal,
    PersonalField, SortShape, TableEntity, fields, from_attributes, from_key_and_attributes,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use singlet_shared::keys::{self, CopyStatus};
use singlet_shared::schema::{GSI1, GSI2, Index};
use singlet_shared::{CardNumber, Email, Id, IndexKey, Invalid, Isbn13};

/// A branch (`BRANCH#<branchId>`, listed on GSI1 `BRANCHES`), and the body of the branch routes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    pub branch_id: Id,
    pub name: String,
    pub address: String,
    pub city: String,
    pub phone: String,
    pub opening_hours: String,
}

impl Branch {
    /// The key of the branch `branch_id`.
    pub fn key_of(branch_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::branch(branch_id))
    }
}

impl Entity for Branch {
    const TYPE: &'static EntityType = &EntityType {
        name: "branch",
        version: 1,
        keys: &[KeyShape::alone(keys::BRANCH_PREFIX)],
        lock: None,
        expiry: Expiry::Never,
        personal: &[
            PersonalField::new("address", Personal::Address),
            PersonalField::new("phone", Personal::Phone),
        ],
        domain: Domain::Library,
        display: "Branch",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.branch_id)
    }

    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        vec![(GSI1, keys::branch_listing(&self.branch_id))]
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

/// A patron's membership tier: how many loans they may hold at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Standard,
    Premium,
}

impl Tier {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "standard" => Ok(Tier::Standard),
            "premium" => Ok(Tier::Premium),
            _ => Err(Invalid::Invalid),
        }
    }

    /// The most loans a patron of this tier may hold at once.
    pub fn loan_limit(self) -> u32 {
        match self {
            Tier::Standard => 5,
            Tier::Premium => 10,
        }
    }

    /// Days a loan lasts, and what each renewal adds.
    pub fn loan_period_days(self) -> u32 {
        match self {
            Tier::Standard => 21,
            Tier::Premium => 28,
        }
    }
}

/// A patron (`BRANCH#<branchId>` / `PATRON#<patronId>`, GSI1 `PATRON#<patronId>`), and the body
/// of the patron routes. `loanLimit` and `loanPeriodDays` are the tier's, copied onto the row so
/// that a checkout can guard its update with `activeLoans < loanLimit` alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Patron {
    pub patron_id: Id,
    pub branch_id: Id,
    pub card_number: CardNumber,
    pub first_name: String,
    pub last_name: String,
    pub email: Email,
    pub membership_tier: Tier,
    pub loan_limit: u32,
    pub loan_period_days: u32,
    /// Open loans; a checkout adds one only while it is below `loanLimit`.
    pub active_loans: u32,
    /// ISO-8601 UTC.
    pub created_at: String,
}

impl Patron {
    /// The key of the patron `patron_id`, registered at the branch `branch_id`.
    pub fn key_of(branch_id: &Id, patron_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::patron(branch_id, patron_id))
    }

    /// The lock that keeps its card number unique, naming it.
    pub fn card_lock(&self) -> PatronCard {
        PatronCard {
            card_number: self.card_number.clone(),
            patron_id: self.patron_id.clone(),
        }
    }

    /// Whether the patron may borrow one more book: fewer open loans than the tier's limit (the
    /// condition a checkout's patron part guards its count with).
    pub fn may_borrow(&self) -> bool {
        self.active_loans < self.loan_limit
    }
}

impl Entity for Patron {
    const TYPE: &'static EntityType = &EntityType {
        name: "patron",
        version: 1,
        keys: &[KeyShape::new(
            keys::BRANCH_PREFIX,
            SortShape::Prefix(keys::PATRON_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[
            PersonalField::new("cardNumber", Personal::Card),
            PersonalField::new("firstName", Personal::Name),
            PersonalField::new("lastName", Personal::Name),
            PersonalField::new("email", Personal::Email),
        ],
        domain: Domain::Library,
        display: "Patron",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.branch_id, &self.patron_id)
    }

    fn locks(&self) -> Vec<TableEntity> {
        vec![TableEntity::CardLock(self.card_lock())]
    }

    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        vec![(GSI1, keys::patron_by_id(&self.patron_id))]
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(Patron, serde Patron, test patron_fields_are_serde_names {
    CARD_NUMBER = "cardNumber",
    MEMBERSHIP_TIER = "membershipTier",
    LOAN_LIMIT = "loanLimit",
    LOAN_PERIOD_DAYS = "loanPeriodDays",
    ACTIVE_LOANS = "activeLoans",
});

/// A `CARD#<cardNumber>` lock: which patron holds the card. Also the body of
/// `GET /cards/{cardNumber}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatronCard {
    pub card_number: CardNumber,
    pub patron_id: Id,
}

impl PatronCard {
    /// The key of the lock of the card `card_number`.
    pub fn key_of(card_number: &CardNumber) -> KeyOf<Self> {
        KeyOf::new(keys::card_lock(card_number))
    }
}

impl Entity for PatronCard {
    const TYPE: &'static EntityType = &EntityType {
        name: "card-lock",
        version: 1,
        keys: &[KeyShape::alone(keys::CARD_PREFIX)],
        lock: Some(Lock::Of {
            owner: Patron::TYPE.name,
            holder: Self::HOLDER.name(),
            value: Patron::CARD_NUMBER.name(),
        }),
        expiry: Expiry::Never,
        personal: &[PersonalField::new("cardNumber", Personal::Card)],
        domain: Domain::Library,
        display: "CardLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.card_number)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

/// A book (`BOOK#<isbn13>`), and the body of the book routes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Book {
    /// The 13 digits, whichever form the ISBN was given in.
    pub isbn: Isbn13,
    pub title: String,
    pub author: String,
    pub publisher: String,
    pub publish_year: i64,
    pub genre: String,
    pub description: String,
    pub page_count: i64,
}

impl Book {
    /// The key of the book `isbn`.
    pub fn key_of(isbn: &Isbn13) -> KeyOf<Self> {
        KeyOf::new(keys::book(isbn))
    }
}

impl Entity for Book {
    const TYPE: &'static EntityType = &EntityType {
        name: "book",
        version: 1,
        keys: &[KeyShape::alone(keys::BOOK_PREFIX)],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Library,
        display: "Book",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.isbn)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(Book, serde Book, test book_fields_are_serde_names {
    TITLE = "title",
    AUTHOR = "author",
    PUBLISHER = "publisher",
    PUBLISH_YEAR = "publishYear",
    GENRE = "genre",
    DESCRIPTION = "description",
    PAGE_COUNT = "pageCount",
});

/// A copy's physical condition, as the branch records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    New,
    Good,
    Fair,
    Poor,
}

impl Condition {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "new" => Ok(Condition::New),
            "good" => Ok(Condition::Good),
            "fair" => Ok(Condition::Fair),
            "poor" => Ok(Condition::Poor),
            _ => Err(Invalid::Invalid),
        }
    }
}

/// A copy (`BRANCH#<branchId>` / `COPY#<copyId>`, GSI2 from [`keys::copy_by_book`]), and the
/// body of the copy routes. It carries what a checkout needs to build every key it touches (its
/// branch, its book's ISBN-13), the book's title as it was when the copy was added (for the
/// inventory; a checkout reads the book, so a loan carries the title as corrected last) and the
/// `status` a checkout guards on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Copy {
    pub copy_id: Id,
    pub branch_id: Id,
    pub isbn: Isbn13,
    pub title: String,
    pub condition: Condition,
    #[serde(with = "copy_status")]
    pub status: CopyStatus,
    /// ISO-8601 UTC.
    pub added_at: String,
}

impl Entity for Copy {
    const TYPE: &'static EntityType = &EntityType {
        name: "copy",
        version: 1,
        keys: &[KeyShape::new(
            keys::BRANCH_PREFIX,
            SortShape::Prefix(keys::COPY_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Library,
        display: "Copy",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.branch_id, &self.copy_id)
    }

    /// In the availability index under its status: moving between statuses moves it there.
    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        vec![(
            GSI2,
            keys::copy_by_book(&self.isbn, self.status, &self.branch_id, &self.copy_id),
        )]
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

impl Copy {
    /// The key of the copy `copy_id` at the branch `branch_id`.
    pub fn key_of(branch_id: &Id, copy_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::copy(branch_id, copy_id))
    }

    /// The copy an entry of the availability index names. The index projects keys only, so an
    /// entry is no whole copy: its id is read back out of the entry's sort key, which
    /// [`Entity::index_keys`] made.
    pub fn id_in_availability_entry(entry: &Item) -> Option<&str> {
        let sort_key = entry.get(GSI2.sk)?.as_s().ok()?;
        keys::copy_of_copy_by_book(sort_key)
    }
}

fields!(Copy, serde Copy, test copy_fields_are_serde_names {
    STATUS = "status",
});

/// [`CopyStatus`] as its string: `available`, `checked_out`.
mod copy_status {
    use super::*;

    pub fn serialize<S: Serializer>(status: &CopyStatus, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(status.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<CopyStatus, D::Error> {
        let raw = String::deserialize(from)?;
        CopyStatus::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown copy status {raw:?}")))
    }
}

impl Held for PatronCard {
    const HOLDER: Field<Self> = Field::new("patronId");

    fn holder(&self) -> &Id {
        &self.patron_id
    }
}

#[cfg(test)]
#[test]
fn the_card_holder_is_a_serde_name() {
    assert!(super::serde_fields::<PatronCard>().contains(&PatronCard::HOLDER.name()));
}

/// How many copies of a book a branch has on the shelf (`BOOK#<isbn>`/`AVAILABLE#<branchId>`),
/// kept by the transactions that add, lend and return a copy, so that availability reads counts,
/// never copies. The book is in the key only.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BookAvailability {
    #[serde(skip)]
    pub isbn: Option<Isbn13>,
    pub branch_id: Id,
    pub available_copies: i64,
}

impl BookAvailability {
    /// The key of the count of the book `isbn`'s copies at the branch `branch_id`.
    pub fn key_of(isbn: &Isbn13, branch_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::book_availability(isbn, branch_id))
    }
}

impl Entity for BookAvailability {
    const TYPE: &'static EntityType = &EntityType {
        name: "book-availability",
        version: 1,
        keys: &[KeyShape::new(
            keys::BOOK_PREFIX,
            SortShape::Prefix(keys::AVAILABLE_PREFIX),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Library,
        display: "BookAvailability",
    };

    fn key(&self) -> KeyOf<Self> {
        let isbn = self
            .isbn
            .as_ref()
            .expect("a count read from its item knows its book");
        Self::key_of(isbn, &self.branch_id)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(
            item,
            "book",
            |key| Isbn13::parse(key.pk.strip_prefix(keys::BOOK_PREFIX)?).ok(),
            |isbn, attributes| Self {
                isbn: Some(isbn),
                ..attributes
            },
        )
    }
}

fields!(BookAvailability, serde BookAvailability, test availability_fields_are_serde_names {
    BRANCH_ID = "branchId",
    AVAILABLE_COPIES = "availableCopies",
});
