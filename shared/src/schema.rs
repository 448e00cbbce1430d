//! The table's one definition: attribute names, key schema, indexes and TTL. The local runner
//! creates the table from this, and a test checks that `template.yaml` declares the same.

pub const PK: &str = "PK";
pub const SK: &str = "SK";

/// Every item's entity type (`vehicle`, `plate-lock`, ...) and schema version (a number; an item
/// without one is version 1): docs/API.md, "The table over time".
pub const ENTITY_TYPE: &str = "_et";
pub const VERSION: &str = "_v";

/// Epoch seconds after which DynamoDB's TTL may delete an item: every idempotency record and
/// outbox item carries it, a returned loan too; whether a type must, may or never does is the
/// model's `EntityType::expiry`.
pub const TTL_ATTRIBUTE: &str = "expiresAt";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Projection {
    All,
    KeysOnly,
}

#[derive(Debug, Clone, Copy)]
pub struct Index {
    pub name: &'static str,
    pub pk: &'static str,
    pub sk: &'static str,
    pub projection: Projection,
}

/// GSI1, overloaded: a patron by id, every branch (`BRANCHES`), the sharded open-loans index that
/// `mark-overdue` reads, and a patron's returned loans by return date (`HISTORY#<patronId>`).
pub const GSI1: Index = Index {
    name: "GSI1",
    pk: "GSI1PK",
    sk: "GSI1SK",
    projection: Projection::All,
};
/// GSI2: a book's copies by status and branch. Availability only counts keys, so only keys are
/// projected: moving a copy between statuses writes the smallest index entry possible.
pub const GSI2: Index = Index {
    name: "GSI2",
    pk: "GSI2PK",
    sk: "GSI2SK",
    projection: Projection::KeysOnly,
};
/// GSI3, sparse: a branch's overdue loans, oldest due first.
pub const GSI3: Index = Index {
    name: "GSI3",
    pk: "GSI3PK",
    sk: "GSI3SK",
    projection: Projection::All,
};

/// GSI4, sparse: every branch's overdue loans in one partition (`OVERDUE`), oldest due first.
pub const GSI4: Index = Index {
    name: "GSI4",
    pk: "GSI4PK",
    sk: "GSI4SK",
    projection: Projection::All,
};

/// GSI5, the depot index: a depot's vehicles, newest first (`GET /depots/{depot}/vehicles`).
/// Added after vehicles existed: the migration `vehicles-by-depot` writes its keys on the
/// vehicles registered before it.
pub const GSI5: Index = Index {
    name: "GSI5",
    pk: "GSI5PK",
    sk: "GSI5SK",
    projection: Projection::All,
};

pub const INDEXES: [Index; 5] = [GSI1, GSI2, GSI3, GSI4, GSI5];

/// Every key attribute of the table and its indexes; all are strings.
pub fn key_attributes() -> Vec<&'static str> {
    let mut names = vec![PK, SK];
    for index in INDEXES {
        names.extend([index.pk, index.sk]);
    }
    names
}

pub const DEFAULT_TABLE_NAME: &str = "singlet";
