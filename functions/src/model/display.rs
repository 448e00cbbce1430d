//! How an item is named to a person (the local console's table view): its entity type's
//! [`display`](super::EntityType::display), and a loan by the state its key and index keys
//! follow, since an open, an overdue and a returned loan sit in different indexes.

use super::TableEntity;
use super::loans::LoanStatus;

impl TableEntity {
    /// `Vehicle`, `PlateLock`, `OverdueLoan`, ...: the entity, for a person.
    pub fn display_name(&self) -> &'static str {
        match self {
            TableEntity::Loan(loan) => match loan.status {
                LoanStatus::Open => "Loan",
                LoanStatus::Overdue => "OverdueLoan",
                LoanStatus::Returned => "ReturnedLoan",
            },
            entity => entity.entity_type().display,
        }
    }
}
