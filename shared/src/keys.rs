//! Every entity's keys, each built by exactly one function (the ElectroDB/modyne rule).
//!
//! Handlers never format a key: they call these, with values that [`crate::normalise`] has
//! already validated, so a key's shape is defined once and no user value can put a `#` in it.
//! The table's attribute names live in [`crate::schema`].

use crate::normalise::{CardNumber, Chassis, Depot, Email, Id, Isbn13, Plate, Username};
use sha2::{Digest, Sha256};

/// A table item's primary key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Key {
    pub pk: String,
    pub sk: String,
}

/// One global secondary index's keys on an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexKey {
    pub pk: String,
    pub sk: String,
}

fn same(pk: String) -> Key {
    Key { sk: pk.clone(), pk }
}

// Every key prefix, named once: the functions below build keys with them, and the model's
// registry (`singlet_functions::model`) recognises an item by them.
pub const VEHICLE_PREFIX: &str = "VEHICLE#";
pub const PLATE_PREFIX: &str = "PLATE#";
pub const CHASSIS_PREFIX: &str = "CHASSIS#";
pub const ACCOUNT_PREFIX: &str = "ACCT#";
/// The sort key of an account.
pub const PROFILE: &str = "PROFILE";
pub const EMAIL_LOCK_PREFIX: &str = "UNIQ#EMAIL#";
pub const HANDLE_LOCK_PREFIX: &str = "UNIQ#HANDLE#";
pub const OWNER_LOCK_PREFIX: &str = "UNIQ#OWNER#";
/// The sort key of an email or username lock.
pub const LOCK: &str = "LOCK";
pub const BRANCH_PREFIX: &str = "BRANCH#";
pub const CARD_PREFIX: &str = "CARD#";
pub const BOOK_PREFIX: &str = "BOOK#";
pub const HISTORY_PREFIX: &str = "HISTORY#";
pub const OPEN_PREFIX: &str = "OPEN#";
pub const OVERDUE_PREFIX: &str = "OVERDUE#";
pub const MARKER_PREFIX: &str = "MARKER#";
pub const RESOURCE_PREFIX: &str = "RESOURCE#";
/// The sort key of a resource's present state.
pub const CURRENT: &str = "CURRENT";
pub const IDEMPOTENCY_PREFIX: &str = "IDEMPOTENCY#";
pub const ID_PREFIX: &str = "ID#";
pub const DEPOT_PREFIX: &str = "DEPOT#";
pub const MIGRATION_PREFIX: &str = "MIGRATION#";
pub const OUTBOX_PREFIX: &str = "OUTBOX#";
/// The sort-key prefix of a migration's per-segment checkpoint.
pub const SEGMENT_PREFIX: &str = "SEGMENT#";

// ---- Fleet ----------------------------------------------------------------------------------

pub fn vehicle(vehicle_id: &Id) -> Key {
    same(format!("{VEHICLE_PREFIX}{vehicle_id}"))
}

/// Keyed by the plate without spaces and hyphens (`PLATE#ka19xtr`), so every spelling of one
/// plate meets one lock.
pub fn plate_lock(plate: &Plate) -> Key {
    same(format!("{PLATE_PREFIX}{}", plate.compact()))
}

pub fn chassis_lock(chassis: &Chassis) -> Key {
    same(format!("{CHASSIS_PREFIX}{}", chassis.compact()))
}

/// The plate lock's key under the rule before `plates-compact`: the plate as normalised,
/// separators and all (`PLATE#ka19 xtr`). Read until the migration has re-keyed every lock.
pub fn plate_lock_before_compact(plate: &Plate) -> Key {
    same(format!("{PLATE_PREFIX}{plate}"))
}

/// The chassis lock's key before `plates-compact`, as [`plate_lock_before_compact`].
pub fn chassis_lock_before_compact(chassis: &Chassis) -> Key {
    same(format!("{CHASSIS_PREFIX}{chassis}"))
}

/// The GSI5 partition of one depot's vehicles. A depot is free text, so it may hold `#`, the
/// keys' separator: in the key, `#` is written `%23` (and `%` itself `%25`, so that no two depots
/// share a key), and no value a user gives makes a `#` inside a key. Every other character is
/// kept as folded, so a depot without either keeps the key it always had.
pub fn depot_partition(depot: &Depot) -> String {
    let depot = depot.to_string().replace('%', "%25").replace('#', "%23");
    format!("{DEPOT_PREFIX}{depot}")
}

/// GSI5 on a vehicle: its depot's vehicles, sorted by `<addedAt>#<vehicleId>` (`addedAt` in
/// epoch milliseconds, zero-padded so that string order is time order), read newest first.
pub fn vehicle_by_depot(depot: &Depot, added_at: i64, vehicle_id: &Id) -> IndexKey {
    IndexKey {
        pk: depot_partition(depot),
        sk: format!("{added_at:015}#{vehicle_id}"),
    }
}

// ---- Accounts -------------------------------------------------------------------------------

pub fn account(account_id: &Id) -> Key {
    Key {
        pk: format!("{ACCOUNT_PREFIX}{account_id}"),
        sk: PROFILE.into(),
    }
}

/// Keyed by the address's confusable skeleton ([`Email::skeleton`]), so two addresses that look
/// alike meet one lock.
pub fn email_lock(email: &Email) -> Key {
    Key {
        pk: format!("{EMAIL_LOCK_PREFIX}{}", email.skeleton()),
        sk: LOCK.into(),
    }
}

/// The lock of a subject's one account, keyed by a keyed hash of the subject (never the subject
/// itself, which may be an email).
pub fn owner_lock(owner_pseudonym: &str) -> Key {
    debug_assert!(owner_pseudonym.bytes().all(|b| b.is_ascii_hexdigit()));
    Key {
        pk: format!("{OWNER_LOCK_PREFIX}{owner_pseudonym}"),
        sk: LOCK.into(),
    }
}

pub fn handle_lock(username: &Username) -> Key {
    Key {
        pk: format!("{HANDLE_LOCK_PREFIX}{username}"),
        sk: LOCK.into(),
    }
}

// ---- Library --------------------------------------------------------------------------------

pub fn branch(branch_id: &Id) -> Key {
    same(branch_partition(branch_id))
}

/// The GSI1 partition that lists every branch.
pub const BRANCHES: &str = "BRANCHES";

/// GSI1 on a branch: every branch in one partition, in id order. Branches are few and rarely
/// created, so one partition takes their writes easily.
pub fn branch_listing(branch_id: &Id) -> IndexKey {
    IndexKey {
        pk: BRANCHES.to_owned(),
        sk: branch_id.to_string(),
    }
}

/// The partition that holds a branch, its patrons and its copies.
pub fn branch_partition(branch_id: &Id) -> String {
    format!("{BRANCH_PREFIX}{branch_id}")
}

pub const PATRON_PREFIX: &str = "PATRON#";
pub const COPY_PREFIX: &str = "COPY#";

pub fn patron(branch_id: &Id, patron_id: &Id) -> Key {
    Key {
        pk: branch_partition(branch_id),
        sk: format!("{PATRON_PREFIX}{patron_id}"),
    }
}

/// GSI1 on a patron: find it by id alone.
pub fn patron_by_id(patron_id: &Id) -> IndexKey {
    let key = format!("{PATRON_PREFIX}{patron_id}");
    IndexKey {
        pk: key.clone(),
        sk: key,
    }
}

pub fn card_lock(card_number: &CardNumber) -> Key {
    same(format!("{CARD_PREFIX}{card_number}"))
}

pub fn book(isbn: &Isbn13) -> Key {
    same(format!("{BOOK_PREFIX}{isbn}"))
}

/// The sort-key prefix of a book's per-branch availability counts, in the book's partition.
pub const AVAILABLE_PREFIX: &str = "AVAILABLE#";

/// How many copies of a book a branch has on the shelf: one item per book and branch, in the
/// book's partition, kept by the transactions that change a copy's status.
pub fn book_availability(isbn: &Isbn13, branch_id: &Id) -> Key {
    Key {
        pk: format!("{BOOK_PREFIX}{isbn}"),
        sk: format!("{AVAILABLE_PREFIX}{branch_id}"),
    }
}

pub fn copy(branch_id: &Id, copy_id: &Id) -> Key {
    Key {
        pk: branch_partition(branch_id),
        sk: format!("{COPY_PREFIX}{copy_id}"),
    }
}

/// A copy's lending status; it leads the copy's GSI2 sort key so that availability is one
/// `begins_with` query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyStatus {
    Available,
    CheckedOut,
}

impl CopyStatus {
    /// Every status, for reading one back from its string.
    pub const ALL: [CopyStatus; 2] = [CopyStatus::Available, CopyStatus::CheckedOut];

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == raw)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CopyStatus::Available => "available",
            CopyStatus::CheckedOut => "checked_out",
        }
    }
}

/// GSI2 on a copy: a book's copies across branches, by status.
pub fn copy_by_book(isbn: &Isbn13, status: CopyStatus, branch_id: &Id, copy_id: &Id) -> IndexKey {
    IndexKey {
        pk: copies_of_book(isbn),
        sk: format!("{}#{branch_id}#{copy_id}", status.as_str()),
    }
}

/// The GSI2 partition of a book's copies, at every branch and in every status.
pub fn copies_of_book(isbn: &Isbn13) -> String {
    format!("{BOOK_PREFIX}{isbn}")
}

/// The GSI2 sort-key prefix of a book's copies in one status, across all branches.
pub fn copies_in_status(status: CopyStatus) -> String {
    format!("{}#", status.as_str())
}

/// The GSI2 sort-key prefix of a book's copies in one status at one branch. The trailing `#`
/// keeps branch `b1` from matching `b10`'s copies (an id never holds a `#`).
pub fn copies_at_branch_in_status(status: CopyStatus, branch_id: &Id) -> String {
    format!("{}#{branch_id}#", status.as_str())
}

/// The copy a copy's GSI2 sort key (`<status>#<branchId>#<copyId>`) names.
pub fn copy_of_copy_by_book(sort_key: &str) -> Option<&str> {
    let mut parts = sort_key.splitn(3, '#');
    let (_status, _branch_id, copy_id) = (parts.next()?, parts.next()?, parts.next()?);
    Some(copy_id)
}

/// The branch a copy's GSI2 sort key (`<status>#<branchId>#<copyId>`) names: availability reads
/// only the index's keys (it projects nothing else) and counts them per branch.
pub fn branch_of_copy_by_book(sort_key: &str) -> Option<&str> {
    let mut parts = sort_key.splitn(3, '#');
    let (_status, branch_id, _copy_id) = (parts.next()?, parts.next()?, parts.next()?);
    Some(branch_id)
}

pub const CHECKOUT_PREFIX: &str = "CHECKOUT#";

pub fn checkout(patron_id: &Id, checkout_id: &Id) -> Key {
    Key {
        pk: format!("{PATRON_PREFIX}{patron_id}"),
        sk: format!("{CHECKOUT_PREFIX}{checkout_id}"),
    }
}

pub const RETURNED_PREFIX: &str = "RETURNED#";

/// A returned loan: moved out of the `CHECKOUT#` range so that listing a patron's active loans
/// reads active loans only, however long the patron's history.
pub fn returned_checkout(patron_id: &Id, checkout_id: &Id) -> Key {
    Key {
        pk: format!("{PATRON_PREFIX}{patron_id}"),
        sk: format!("{RETURNED_PREFIX}{checkout_id}"),
    }
}

pub fn patron_loans_partition(patron_id: &Id) -> String {
    format!("{PATRON_PREFIX}{patron_id}")
}

/// The GSI1 partition of a patron's returned loans.
pub fn loan_history_partition(patron_id: &Id) -> String {
    format!("{HISTORY_PREFIX}{patron_id}")
}

/// The lowest GSI1 sort key in a patron's history of a loan returned at or after
/// `returned_date` (ISO-8601 UTC): the history's key condition starts here, so loans returned
/// before it (expired) are never read.
pub fn loan_history_since(returned_date: &str) -> String {
    returned_date.to_owned()
}

/// GSI1 on a returned loan: its patron's history, sorted by `<returnedDate>#<checkoutId>`, so
/// that the newest return is read first (descending). `returned_date` is ISO-8601 UTC.
pub fn returned_loan(patron_id: &Id, checkout_id: &Id, returned_date: &str) -> IndexKey {
    IndexKey {
        pk: loan_history_partition(patron_id),
        sk: format!("{returned_date}#{checkout_id}"),
    }
}

/// How many partitions the open-loans index is spread over. Loans made on one day fall due on
/// one day, so a single key (or a due-day bucket) would take every checkout's write; a hash of
/// the checkout id spreads them, and `mark-overdue` reads each shard with one small query.
pub const OPEN_LOAN_SHARDS: u32 = 16;

/// The open-loans shard a checkout lives in: a stable hash of its id, so it never moves.
pub fn open_loan_shard(checkout_id: &Id) -> u32 {
    let digest = Sha256::digest(checkout_id.as_str().as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) % OPEN_LOAN_SHARDS
}

pub fn open_loans_partition(shard: u32) -> String {
    format!("{OPEN_PREFIX}{shard:02}")
}

/// GSI1 on a checkout while it is open and not yet marked overdue. `due_date` is an ISO-8601 UTC
/// timestamp, so string order is time order.
pub fn open_loan(checkout_id: &Id, due_date: &str) -> IndexKey {
    IndexKey {
        pk: open_loans_partition(open_loan_shard(checkout_id)),
        sk: format!("{due_date}#{checkout_id}"),
    }
}

pub fn overdue_partition(branch_id: &Id) -> String {
    format!("{OVERDUE_PREFIX}{branch_id}")
}

/// GSI3 on a checkout once it is overdue: a branch's overdue loans, oldest due first.
pub fn overdue_loan(branch_id: &Id, checkout_id: &Id, due_date: &str) -> IndexKey {
    IndexKey {
        pk: overdue_partition(branch_id),
        sk: format!("{due_date}#{checkout_id}"),
    }
}

/// The GSI4 partition of every overdue loan, at every branch.
pub const ALL_OVERDUE: &str = "OVERDUE";

/// GSI4 on a checkout once it is overdue, next to its GSI3 keys: the library's overdue loans,
/// oldest due first. Only `mark-overdue` writes into it (at most a run's worth of loans every 15
/// minutes) and returns take loans out, so one partition is enough.
pub fn overdue_anywhere(checkout_id: &Id, due_date: &str) -> IndexKey {
    IndexKey {
        pk: ALL_OVERDUE.to_owned(),
        sk: format!("{due_date}#{checkout_id}"),
    }
}

/// The item that records the last complete `mark-overdue` run: its `time` is the overdue lists'
/// `asOf`.
pub fn mark_overdue_run() -> Key {
    same(format!("{MARKER_PREFIX}mark-overdue"))
}

// ---- Change & audit log ---------------------------------------------------------------------

/// Width of a change event's zero-padded sequence number: string order is numeric order for
/// every version up to [`MAX_VERSION`].
pub const SEQUENCE_WIDTH: usize = 12;

/// The largest version the API accepts or produces.
pub const MAX_VERSION: u64 = 10u64.pow(SEQUENCE_WIDTH as u32) - 1;

// The contract wants string order to be numeric order well beyond 10^6 events.
const _: () = assert!(MAX_VERSION >= 1_000_000);

pub const EVENT_PREFIX: &str = "EVENT#";

pub fn resource_partition(resource_id: &Id) -> String {
    format!("{RESOURCE_PREFIX}{resource_id}")
}

pub fn resource_current(resource_id: &Id) -> Key {
    Key {
        pk: resource_partition(resource_id),
        sk: CURRENT.into(),
    }
}

pub fn resource_event(resource_id: &Id, sequence: u64) -> Key {
    debug_assert!(sequence <= MAX_VERSION);
    Key {
        pk: resource_partition(resource_id),
        sk: format!("{EVENT_PREFIX}{sequence:0width$}", width = SEQUENCE_WIDTH),
    }
}

// ---- Idempotency ----------------------------------------------------------------------------

/// The record of one `Idempotency-Key` on `route`, under the id it derives from the route, the
/// caller and the key (`functions::ids`): so the route that deletes the entity that id names
/// finds the record too. The route leads, so IAM can allow each function its own records only.
pub fn idempotency_record(route: &str, derived_id: &Id) -> Key {
    same(format!("{IDEMPOTENCY_PREFIX}{route}#{derived_id}"))
}

/// The lock of an id derived from an `Idempotency-Key`, put with the entity and never deleted:
/// a derived id is held by one entity at most, once, whatever becomes of the key's record.
pub fn id_lock(id: &Id) -> Key {
    same(format!("{ID_PREFIX}{id}"))
}

// ---- Domain events --------------------------------------------------------------------------

/// An outbox item: one event about one subject (`vehicle`, `<vehicleId>`). A subject's events
/// share a partition, so its stream records come in the order they were written. `subject_id` is
/// an id or an ISBN-13 (validated before it names a subject) and `event_id` a UUID: none holds a
/// `#`.
pub fn outbox(subject_type: &str, subject_id: &str, event_id: &str) -> Key {
    Key {
        pk: outbox_partition(subject_type, subject_id),
        sk: format!("{EVENT_PREFIX}{event_id}"),
    }
}

/// The partition of one subject's outbox items: `OUTBOX#<subjectType>#<subjectId>`.
pub fn outbox_partition(subject_type: &str, subject_id: &str) -> String {
    format!("{OUTBOX_PREFIX}{subject_type}#{subject_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(s: &str) -> Id {
        Id::parse(s).unwrap()
    }

    #[test]
    fn a_depot_makes_no_hash_inside_its_key() {
        let key = |depot: &str| depot_partition(&Depot::parse(depot).unwrap());
        assert_eq!(key(" North "), "DEPOT#north");
        assert_eq!(key("München"), "DEPOT#münchen");
        assert_eq!(key("Yard #2"), "DEPOT#yard %232");
        assert_eq!(key("100%"), "DEPOT#100%25");
        // One to one: a depot spelled as another's encoding keeps a key of its own.
        assert_ne!(key("a%23b"), key("a#b"));
        assert!(!key("a#b#c")[DEPOT_PREFIX.len()..].contains('#'));
    }

    #[test]
    fn keys_have_the_seeded_shapes() {
        assert_eq!(
            vehicle(&id("v1")),
            Key {
                pk: "VEHICLE#v1".into(),
                sk: "VEHICLE#v1".into()
            }
        );
        let plate = Plate::parse(" KA19  xtr").unwrap();
        assert_eq!(plate_lock(&plate).pk, "PLATE#ka19xtr");
        assert_eq!(
            chassis_lock(&Chassis::parse("WVW1").unwrap()).sk,
            "CHASSIS#wvw1"
        );
        assert_eq!(
            account(&id("a1")),
            Key {
                pk: "ACCT#a1".into(),
                sk: "PROFILE".into()
            }
        );
        let email = Email::parse("Ada@Example.com").unwrap();
        assert_eq!(
            email_lock(&email),
            Key {
                // The confusable skeleton: `m` reads as `rn` (docs/guide/accounts.md).
                pk: "UNIQ#EMAIL#ada@exarnple.corn".into(),
                sk: "LOCK".into()
            }
        );
        assert_eq!(
            handle_lock(&Username::parse("Ada").unwrap()).pk,
            "UNIQ#HANDLE#ada"
        );
        assert_eq!(
            patron(&id("b1"), &id("p1")),
            Key {
                pk: "BRANCH#b1".into(),
                sk: "PATRON#p1".into()
            }
        );
        assert_eq!(copy(&id("b1"), &id("c1")).sk, "COPY#c1");
        let isbn = Isbn13::parse("0-306-40615-2").unwrap();
        assert_eq!(book(&isbn).pk, "BOOK#9780306406157");
        assert_eq!(
            copy_by_book(&isbn, CopyStatus::Available, &id("b1"), &id("c1")).sk,
            "available#b1#c1"
        );
        assert_eq!(
            checkout(&id("p1"), &id("k1")),
            Key {
                pk: "PATRON#p1".into(),
                sk: "CHECKOUT#k1".into()
            }
        );
        assert_eq!(
            overdue_loan(&id("b1"), &id("k1"), "2026-01-01T00:00:00Z"),
            IndexKey {
                pk: "OVERDUE#b1".into(),
                sk: "2026-01-01T00:00:00Z#k1".into()
            }
        );
        assert_eq!(card_lock(&CardNumber::parse("C-1").unwrap()).pk, "CARD#c-1");
        assert_eq!(
            branch_listing(&id("b1")),
            IndexKey {
                pk: "BRANCHES".into(),
                sk: "b1".into()
            }
        );
        assert_eq!(
            overdue_anywhere(&id("k1"), "2026-01-01T00:00:00Z"),
            IndexKey {
                pk: "OVERDUE".into(),
                sk: "2026-01-01T00:00:00Z#k1".into()
            }
        );
        assert_eq!(
            returned_loan(&id("p1"), &id("k1"), "2026-01-02T00:00:00Z"),
            IndexKey {
                pk: "HISTORY#p1".into(),
                sk: "2026-01-02T00:00:00Z#k1".into()
            }
        );
        assert_eq!(
            mark_overdue_run(),
            Key {
                pk: "MARKER#mark-overdue".into(),
                sk: "MARKER#mark-overdue".into()
            }
        );
        assert_eq!(resource_event(&id("r"), 7).sk, "EVENT#000000000007");
        assert_eq!(resource_current(&id("r")).sk, "CURRENT");
    }

    #[test]
    fn a_copy_index_key_names_its_branch() {
        let isbn = Isbn13::parse("9780306406157").unwrap();
        for status in CopyStatus::ALL {
            let key = copy_by_book(&isbn, status, &id("b-1"), &id("c_1"));
            assert!(key.sk.starts_with(&copies_in_status(status)));
            assert_eq!(branch_of_copy_by_book(&key.sk), Some("b-1"));
            assert_eq!(copy_of_copy_by_book(&key.sk), Some("c_1"));
            assert!(
                key.sk
                    .starts_with(&copies_at_branch_in_status(status, &id("b-1")))
            );
            assert!(
                !key.sk
                    .starts_with(&copies_at_branch_in_status(status, &id("b")))
            );
            assert_eq!(CopyStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(branch_of_copy_by_book("available#b1"), None);
        assert_eq!(CopyStatus::parse("lost"), None);
    }

    #[test]
    fn the_sequence_width_holds_the_largest_version() {
        let widest = resource_event(&id("r"), MAX_VERSION).sk;
        assert_eq!(widest.len(), EVENT_PREFIX.len() + SEQUENCE_WIDTH);
        // One more digit would no longer fit: MAX_VERSION is exactly the widest padded number.
        assert_eq!(format!("{}", MAX_VERSION + 1).len(), SEQUENCE_WIDTH + 1);
    }

    #[test]
    fn shards_cover_the_range() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..2000 {
            seen.insert(open_loan_shard(&id(&format!("k{i}"))));
        }
        assert_eq!(seen.len() as u32, OPEN_LOAN_SHARDS);
        assert_eq!(
            open_loan(&id("k1"), "d").pk,
            open_loans_partition(open_loan_shard(&id("k1")))
        );
    }

    proptest! {
        #[test]
        fn sequence_order_is_numeric_order(a in 0..=MAX_VERSION, b in 0..=MAX_VERSION) {
            let (ka, kb) = (resource_event(&id("r"), a).sk, resource_event(&id("r"), b).sk);
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn no_value_adds_a_separator(raw in "[A-Za-z0-9_-]{1,64}") {
            let key = vehicle(&id(&raw));
            prop_assert_eq!(key.pk.matches('#').count(), 1);
            let key = patron(&id(&raw), &id(&raw));
            prop_assert_eq!(key.sk.matches('#').count(), 1);
        }

        #[test]
        fn every_id_is_accepted_or_refused_never_mangled(raw in "\\PC{0,70}") {
            if let Ok(parsed) = Id::parse(&raw) {
                prop_assert_eq!(parsed.as_str(), raw.as_str());
                prop_assert!(!vehicle(&parsed).pk[8..].contains('#'));
            }
        }
    }
}
