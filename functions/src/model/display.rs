//! How an item is named to a person (the local console's table view): its entity in words, and a
//! loan by the state its key and index keys follow, since an open, an overdue and a returned loan
//! sit in different indexes.

use super::Decoded;
use super::loans::LoanStatus;

impl Decoded {
    /// `Vehicle`, `PlateLock`, `OverdueLoan`, ...: the entity, for a person.
    pub fn display_name(&self) -> &'static str {
        match self {
            Decoded::Vehicle(_) => "Vehicle",
            Decoded::PlateLock(_) => "PlateLock",
            Decoded::ChassisLock(_) => "ChassisLock",
            Decoded::Account(_) => "Account",
            Decoded::EmailLock(_) => "EmailLock",
            Decoded::UsernameLock(_) => "UsernameLock",
            Decoded::OwnerLock(_) => "OwnerLock",
            Decoded::Branch(_) => "Branch",
            Decoded::Patron(_) => "Patron",
            Decoded::CardLock(_) => "CardLock",
            Decoded::Book(_) => "Book",
            Decoded::BookAvailability(_) => "BookAvailability",
            Decoded::Copy(_) => "Copy",
            Decoded::Loan(loan) => match loan.status {
                LoanStatus::Open => "Loan",
                LoanStatus::Overdue => "OverdueLoan",
                LoanStatus::Returned => "ReturnedLoan",
            },
            Decoded::MarkerRun(_) => "MarkerRun",
            Decoded::Resource(_) => "CurrentState",
            Decoded::ResourceEvent(_) => "ChangeEvent",
            Decoded::IdempotencyRecord(_) => "IdempotencyRecord",
            Decoded::IdLock(_) => "IdLock",
            Decoded::MigrationCheckpoint(_) => "MigrationCheckpoint",
            Decoded::Outbox(_) => "DomainEvent",
        }
    }
}
