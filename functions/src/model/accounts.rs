//! The accounts' entities: an account, and the locks that make its email and its username unique.

use super::{
    Domain, Entity, EntityType, Expiry, Field, Held, Item, KeyOf, KeyShape, Lock, Personal,
    PersonalField, SortShape, TableEntity, fields, from_attributes, from_key_and_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Email, Id, Username, keys};

/// An account as every account route answers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub account_id: Id,
    pub email: Email,
    pub username: Username,
    pub display_name: Option<String>,
    pub created_at: i64,
}

/// The stored account (`ACCT#<accountId>`/`PROFILE`): the account, and the subject (the token's
/// `sub`) that created and owns it. The owner is never part of an answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountRow {
    #[serde(flatten)]
    pub account: Account,
    /// Empty for an account no subject owns (made before accounts had owners): only
    /// `accounts:admin` reaches it.
    #[serde(default)]
    pub owner: String,
    /// Whether the account is its owner's one account (made without `accounts:admin`), holding
    /// the owner's lock ([`OwnerLock`]) that its deletion releases.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owners_one: bool,
}

impl AccountRow {
    /// The key of the account `account_id`.
    pub fn key_of(account_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::account(account_id))
    }
}

impl Entity for AccountRow {
    const TYPE: &'static EntityType = &EntityType {
        name: "account",
        version: 1,
        keys: &[KeyShape::new(
            keys::ACCOUNT_PREFIX,
            SortShape::Exactly(keys::PROFILE),
        )],
        lock: None,
        expiry: Expiry::Never,
        personal: &[
            PersonalField::new("email", Personal::Email),
            PersonalField::new("username", Personal::Username),
            PersonalField::new("displayName", Personal::Name),
            PersonalField::new("owner", Personal::Subject),
        ],
        domain: Domain::Accounts,
        display: "Account",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.account.account_id)
    }

    /// Its email's and its username's. The owner lock of a subject's one account is keyed under
    /// the server's key, so the handlers make it (`accounts::owner_lock`), not the model.
    fn locks(&self) -> Vec<TableEntity> {
        let account = &self.account;
        vec![
            TableEntity::EmailLock(EmailLock {
                account_id: account.account_id.clone(),
                value: account.email.clone(),
            }),
            TableEntity::UsernameLock(UsernameLock {
                account_id: account.account_id.clone(),
                value: account.username.clone(),
            }),
        ]
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(AccountRow, serde Account, test account_fields_are_serde_names {
    EMAIL = "email",
    USERNAME = "username",
});

impl AccountRow {
    /// The subject that owns the account: the owner lock's key is a keyed hash of it.
    pub const OWNER: Field<Self> = Field::new("owner");
    /// `true` while the account holds its owner's lock; absent otherwise.
    pub const OWNERS_ONE: Field<Self> = Field::new("ownersOne");
}

#[cfg(test)]
#[test]
fn account_row_fields_are_serde_names() {
    let row = AccountRow {
        account: Account {
            account_id: Id::parse("a").unwrap(),
            email: Email::parse("a@example.com").unwrap(),
            username: Username::parse("a_1").unwrap(),
            display_name: None,
            created_at: 0,
        },
        owner: "s".into(),
        owners_one: true,
    };
    let stored = serde_json::to_value(&row).unwrap();
    for field in [AccountRow::OWNER, AccountRow::OWNERS_ONE] {
        assert!(stored.get(field.name()).is_some(), "{}", field.name());
    }
}

/// A `UNIQ#EMAIL#<email>`/`LOCK` lock: which account holds the email.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmailLock {
    pub account_id: Id,
    pub value: Email,
}

impl Entity for EmailLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "email-lock",
        version: 1,
        keys: &[KeyShape::new(
            keys::EMAIL_LOCK_PREFIX,
            SortShape::Exactly(keys::LOCK),
        )],
        lock: Some(Lock::Of {
            owner: AccountRow::TYPE.name,
            holder: Self::HOLDER.name(),
            value: AccountRow::EMAIL.name(),
        }),
        expiry: Expiry::Never,
        personal: &[PersonalField::new("value", Personal::Email)],
        domain: Domain::Accounts,
        display: "EmailLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.value)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

/// A `UNIQ#HANDLE#<username>`/`LOCK` lock: which account holds the username.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsernameLock {
    pub account_id: Id,
    pub value: Username,
}

impl Entity for UsernameLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "username-lock",
        version: 1,
        keys: &[KeyShape::new(
            keys::HANDLE_LOCK_PREFIX,
            SortShape::Exactly(keys::LOCK),
        )],
        lock: Some(Lock::Of {
            owner: AccountRow::TYPE.name,
            holder: Self::HOLDER.name(),
            value: AccountRow::USERNAME.name(),
        }),
        expiry: Expiry::Never,
        personal: &[PersonalField::new("value", Personal::Username)],
        domain: Domain::Accounts,
        display: "UsernameLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.value)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

impl EmailLock {
    /// The attribute holding the email the lock is of (for a tool that must find it in an item
    /// no entity reads, such as the anonymiser).
    pub const VALUE: Field<Self> = Field::new("value");

    /// The key of the lock of `email`, which every look-alike of it meets.
    pub fn key_of(email: &Email) -> KeyOf<Self> {
        KeyOf::new(keys::email_lock(email))
    }
}

impl UsernameLock {
    /// The attribute holding the username the lock is of.
    pub const VALUE: Field<Self> = Field::new("value");

    /// The key of the lock of `username`.
    pub fn key_of(username: &Username) -> KeyOf<Self> {
        KeyOf::new(keys::handle_lock(username))
    }
}

impl Held for EmailLock {
    const HOLDER: Field<Self> = Field::new("accountId");

    fn holder(&self) -> &Id {
        &self.account_id
    }
}

impl Held for UsernameLock {
    const HOLDER: Field<Self> = Field::new("accountId");

    fn holder(&self) -> &Id {
        &self.account_id
    }
}

#[cfg(test)]
#[test]
fn lock_holders_are_serde_names() {
    use super::serde_fields;
    assert!(serde_fields::<EmailLock>().contains(&EmailLock::HOLDER.name()));
    assert!(serde_fields::<UsernameLock>().contains(&UsernameLock::HOLDER.name()));
    assert!(serde_fields::<EmailLock>().contains(&EmailLock::VALUE.name()));
    assert!(serde_fields::<UsernameLock>().contains(&UsernameLock::VALUE.name()));
}

/// A `UNIQ#OWNER#<pseudonym>`/`LOCK` lock: the one account a subject without `accounts:admin`
/// owns. Keyed by a keyed hash of the subject (a subject can be an email, which stays out of the
/// key); the pseudonym is in the key only.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerLock {
    #[serde(skip)]
    pub pseudonym: String,
    pub account_id: Id,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerLockAttributes {
    account_id: Id,
}

impl OwnerLock {
    /// The key of the lock of the subject whose keyed hash is `pseudonym`.
    pub fn key_of(pseudonym: &str) -> KeyOf<Self> {
        KeyOf::new(keys::owner_lock(pseudonym))
    }
}

impl Entity for OwnerLock {
    const TYPE: &'static EntityType = &EntityType {
        name: "owner-lock",
        version: 1,
        keys: &[KeyShape::new(
            keys::OWNER_LOCK_PREFIX,
            SortShape::Exactly(keys::LOCK),
        )],
        // Its value is a keyed hash of the account's `owner`, not an attribute of the account,
        // so it is no `Lock::Of`: `fsck` recomputes it under the server's key
        // (`accounts::owner_lock_under`) and checks it by rules of its own.
        lock: None,
        expiry: Expiry::Never,
        // Its key is a keyed hash of its account's `owner`, under the server's key: the
        // anonymiser re-keys it from the owner's replacement, as the account's `owner` is.
        personal: &[],
        domain: Domain::Accounts,
        display: "OwnerLock",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::key_of(&self.pseudonym)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_key_and_attributes(
            item,
            "owner",
            |key| Some(key.pk.strip_prefix(keys::OWNER_LOCK_PREFIX)?.to_owned()),
            |pseudonym, OwnerLockAttributes { account_id }| Self {
                pseudonym,
                account_id,
            },
        )
    }
}

impl Held for OwnerLock {
    const HOLDER: Field<Self> = Field::new("accountId");

    fn holder(&self) -> &Id {
        &self.account_id
    }
}
