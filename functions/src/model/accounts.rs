//! The accounts' entities: an account, and the locks that make its email and its username unique.

use super::{
    Entity, EntityType, Field, Held, Item, KeyShape, Lock, SortShape, fields, from_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::{Email, Id, Key, Username, keys};

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
        may_expire: false,
    };

    fn key(&self) -> Key {
        keys::account(&self.account.account_id)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(AccountRow, serde Account, test account_fields_are_serde_names {
    EMAIL = "email",
    USERNAME = "username",
});

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
        may_expire: false,
    };

    fn key(&self) -> Key {
        keys::email_lock(&self.value)
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
        may_expire: false,
    };

    fn key(&self) -> Key {
        keys::handle_lock(&self.value)
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
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
}
