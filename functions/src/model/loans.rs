//! The loans' entities: a loan, whose key and index keys follow its status, and the record of
//! the overdue marker's last complete run.

use super::{
    Domain, Entity, EntityType, Expiry, Item, KeyOf, KeyShape, SortShape, fields, from_attributes,
};
use serde::{Deserialize, Serialize};
use singlet_shared::keys;
use singlet_shared::schema::{GSI1, GSI3, GSI4, Index};
use singlet_shared::{Id, IndexKey, Isbn13};

/// Where a loan is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoanStatus {
    Open,
    Overdue,
    Returned,
}

/// A loan, and the response body of every loan route. Dates are ISO-8601 UTC strings.
///
/// Its key and index keys follow its stored status (see `crate::loans` for the lifecycle):
/// - `open`: `PATRON#<patronId>`/`CHECKOUT#<checkoutId>`, in an open-loans shard of GSI1 by due
///   date;
/// - `overdue` (marked by `mark-overdue`): the same key, in its branch's GSI3 partition and in
///   GSI4, by due date;
/// - `returned`: `PATRON#<patronId>`/`RETURNED#<checkoutId>`, in its patron's history (GSI1
///   `HISTORY#<patronId>`, by return date).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkout {
    pub checkout_id: Id,
    pub patron_id: Id,
    /// The patron's home branch: where the patron row (and its loan counter) lives.
    pub patron_branch_id: Id,
    /// The branch the copy was lent from.
    pub branch_id: Id,
    pub copy_id: Id,
    pub isbn: Isbn13,
    pub title: String,
    pub status: LoanStatus,
    pub checked_out_at: String,
    pub due_date: String,
    pub renewal_count: u32,
    /// The tier's loan period when the loan was made: what a renewal adds.
    pub loan_period_days: u32,
    pub returned_date: Option<String>,
    /// A returned loan's end of history: `LoanHistoryDays` after its return, epoch seconds, the
    /// table's TTL attribute. Never on an active loan; never in an answer (see `as_read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl Checkout {
    /// The key of the loan while it is active (open or overdue).
    pub fn active_key(&self) -> KeyOf<Self> {
        Self::active_key_of(&self.patron_id, &self.checkout_id)
    }

    /// The key of the loan `checkout_id` of the patron `patron_id` while it is active.
    pub fn active_key_of(patron_id: &Id, checkout_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::checkout(patron_id, checkout_id))
    }

    /// The key of that loan once returned.
    pub fn returned_key_of(patron_id: &Id, checkout_id: &Id) -> KeyOf<Self> {
        KeyOf::new(keys::returned_checkout(patron_id, checkout_id))
    }

    /// The version from which every returned loan carries `expiresAt`: the return writes it, and
    /// `returned-loans-expire` adds it to loans returned before.
    pub const EXPIRES_SINCE: u32 = 2;

    /// When a loan returned at `returned` leaves its patron's history (its `expiresAt`, epoch
    /// seconds): `history_days` (`LoanHistoryDays`) later.
    pub fn history_ends(returned: time::OffsetDateTime, history_days: i64) -> i64 {
        (returned + time::Duration::days(history_days)).unix_timestamp()
    }
}

impl Entity for Checkout {
    const TYPE: &'static EntityType = &EntityType {
        name: "loan",
        version: Checkout::EXPIRES_SINCE,
        keys: &[
            KeyShape::new(
                keys::PATRON_PREFIX,
                SortShape::Prefix(keys::CHECKOUT_PREFIX),
            ),
            KeyShape::new(
                keys::PATRON_PREFIX,
                SortShape::Prefix(keys::RETURNED_PREFIX),
            ),
        ],
        lock: None,
        // A returned loan expires `LoanHistoryDays` after its return (`expiresAt`, put by the
        // return); an active one never does: its copy and its patron's count depend on it.
        expiry: Expiry::May,
        personal: &[],
        domain: Domain::Library,
        display: "Loan",
    };

    fn key(&self) -> KeyOf<Self> {
        match self.status {
            LoanStatus::Open | LoanStatus::Overdue => self.active_key(),
            LoanStatus::Returned => Self::returned_key_of(&self.patron_id, &self.checkout_id),
        }
    }

    fn index_keys(&self) -> Vec<(Index, IndexKey)> {
        let (checkout_id, due_date) = (&self.checkout_id, &self.due_date);
        match self.status {
            LoanStatus::Open => vec![(GSI1, keys::open_loan(checkout_id, due_date))],
            LoanStatus::Overdue => vec![
                (
                    GSI3,
                    keys::overdue_loan(&self.branch_id, checkout_id, due_date),
                ),
                (GSI4, keys::overdue_anywhere(checkout_id, due_date)),
            ],
            LoanStatus::Returned => {
                let returned_date = self.returned_date.as_deref().unwrap_or_default();
                vec![(
                    GSI1,
                    keys::returned_loan(&self.patron_id, checkout_id, returned_date),
                )]
            }
        }
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(Checkout, serde Checkout, test loan_fields_are_serde_names {
    STATUS = "status",
    EXPIRES_AT = "expiresAt",
    RETURNED_DATE = "returnedDate",
    DUE_DATE = "dueDate",
    RENEWAL_COUNT = "renewalCount",
});

/// The record of the last complete `mark-overdue` run, `MARKER#mark-overdue`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkerRun {
    /// The run's "now": its event's `time`, ISO-8601 UTC.
    pub time: String,
}

impl MarkerRun {
    /// The key of the one marker run item.
    pub fn the_key() -> KeyOf<Self> {
        KeyOf::new(keys::mark_overdue_run())
    }
}

impl Entity for MarkerRun {
    const TYPE: &'static EntityType = &EntityType {
        name: "marker-run",
        version: 1,
        keys: &[KeyShape::alone(keys::MARKER_PREFIX)],
        lock: None,
        expiry: Expiry::Never,
        personal: &[],
        domain: Domain::Library,
        display: "MarkerRun",
    };

    fn key(&self) -> KeyOf<Self> {
        Self::the_key()
    }

    fn from_item(item: &Item) -> Result<Self, String> {
        from_attributes(item)
    }
}

fields!(MarkerRun, serde MarkerRun, test marker_fields_are_serde_names {
    TIME = "time",
});
