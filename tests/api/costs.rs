//! What each access pattern costs: every route of the route table run against the engine, the
//! read and write units it consumed on the table and on each index (the `ConsumedCapacity` of
//! every DynamoDB response it got, asked for with `ReturnConsumedCapacity=INDEXES`) equal to the
//! key design's minimum written next to it, their sum equal to what the runner's
//! `x-consumed-capacity` header reports, and `docs/COSTS.md` written from the same figures. A
//! route without a row fails the test.

use crate::fixtures::ISBN;
use crate::harness::mark_overdue;
use crate::harness::{Api, Mode, Reply};
use serde_json::json;
use singlet::console::{self, capture, ops};
use singlet_functions::routes::ROUTES;
use std::collections::BTreeMap;
use std::future::Future;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// On-demand prices, us-east-1, per million request units (AWS price list, November 2024 on).
const PRICE_PER_MILLION_WRITE_UNITS: f64 = 0.625;
const PRICE_PER_MILLION_READ_UNITS: f64 = 0.125;

/// The base table, next to the indexes by their names.
const TABLE: &str = "table";

/// Read and write units on one place (the table or an index): `(place, read, write)`.
type Units = (&'static str, f64, f64);

/// One pattern's measured cost next to its minimum.
struct Row {
    function: &'static str,
    operation: &'static str,
    /// Why the minimum is what it is.
    minimum: &'static str,
    expected: BTreeMap<String, (f64, f64)>,
    measured: BTreeMap<String, (f64, f64)>,
    /// What the runner's header said: read and write units.
    header: (f64, f64),
}

/// A request's reply and the units each of its DynamoDB calls consumed, by table and index.
struct Measured {
    reply: Reply,
    units: BTreeMap<String, (f64, f64)>,
}

/// Runs one request, recording every DynamoDB call it makes (the console's recorder: the
/// handler runs in this task, called directly).
async fn measured(request: impl Future<Output = Reply>) -> Measured {
    let (reply, units) = metered(request).await;
    Measured { reply, units }
}

/// Runs `work`, adding up the units each of its DynamoDB calls consumed, by table and index.
async fn metered<F: Future>(work: F) -> (F::Output, BTreeMap<String, (f64, f64)>) {
    let (output, calls) = capture::recording(work).await;
    let mut units = BTreeMap::new();
    for call in &calls {
        let operation = ops::read(call, false);
        let read = matches!(
            operation.operation.as_str(),
            "GetItem" | "Query" | "Scan" | "BatchGetItem" | "TransactGetItems"
        );
        for capacity in &operation.capacity {
            let places = std::iter::once((TABLE.to_owned(), capacity.table_units.unwrap_or(0.0)))
                .chain(capacity.indexes.iter().cloned());
            for (place, consumed) in places {
                let entry: &mut (f64, f64) = units.entry(place).or_default();
                if read {
                    entry.0 += consumed;
                } else {
                    entry.1 += consumed;
                }
            }
        }
    }
    units.retain(|_, (read, write)| *read != 0.0 || *write != 0.0);
    (output, units)
}

/// `table 1 R + 6 W; GSI1 1 W`
fn describe(units: &BTreeMap<String, (f64, f64)>) -> String {
    let parts: Vec<String> = units
        .iter()
        .map(|(place, (read, write))| {
            let mut figures = Vec::new();
            if *read != 0.0 {
                figures.push(format!("{read} R"));
            }
            if *write != 0.0 {
                figures.push(format!("{write} W"));
            }
            format!("{place} {}", figures.join(" + "))
        })
        .collect();
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join("; ")
    }
}

fn total(units: &BTreeMap<String, (f64, f64)>) -> (f64, f64) {
    units
        .values()
        .fold((0.0, 0.0), |(r, w), (read, write)| (r + read, w + write))
}

#[test]
fn every_pattern_costs_its_key_designs_minimum() {
    // Every route's request in one body nests the handlers' futures deeper than a test thread's
    // 2 MiB stack holds in a debug build: the body runs where stacks are larger.
    const STACK: usize = 32 << 20;
    let run = std::thread::Builder::new().stack_size(STACK).spawn(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_stack_size(STACK)
            .enable_all()
            .build()
            .unwrap()
            .block_on(every_pattern())
    });
    if let Err(panic) = run.unwrap().join() {
        std::panic::resume_unwind(panic);
    }
}

async fn every_pattern() {
    if crate::harness::skip_on_external_engine(crate::harness::CAPACITY_NOT_DYNAMODBS) {
        return;
    }
    let api = Api::start(Mode::Direct).await;
    let api = api.with_ctx(console::instrument(api.ctx.clone()));
    let mut rows = Vec::new();
    let mut run = |function, operation, minimum, expected: &[Units], measured: &Measured| {
        let reply = &measured.reply;
        assert!((200..300).contains(&reply.status), "{function}: {reply:?}");
        rows.push(Row {
            function,
            operation,
            minimum,
            expected: expected
                .iter()
                .map(|(place, read, write)| ((*place).to_owned(), (*read, *write)))
                .collect(),
            measured: measured.units.clone(),
            header: reply.consumed(),
        });
    };

    // Fleet
    let vehicle = measured(api.post(
        "/vehicles",
        json!({"plate": "KA19XTR", "chassis": "WVW1", "depot": "north"}),
    ))
    .await;
    run(
        "register-vehicle",
        "TransactWriteItems: 4 puts",
        "4 items × 2 (transactional writes): the vehicle, its locks, its event's outbox item; the vehicle's depot index entry (1); its locks and the outbox item are in no index",
        &[(TABLE, 0.0, 8.0), ("GSI5", 0.0, 1.0)],
        &vehicle,
    );
    run(
        "register-vehicle",
        "TransactWriteItems: 4 puts, 2 checks (plate and chassis spelled with separators)",
        "as above, and each value's key under the rule before `plates-compact` (`PLATE#ka 20 xtr`) checked free × 2, where a vehicle registered before the compact rule holds it until the migration has run (docs/guide/migrations.md, \"Before `plates-compact` has run\")",
        &[(TABLE, 0.0, 12.0), ("GSI5", 0.0, 1.0)],
        &measured(api.post(
            "/vehicles",
            json!({"plate": "KA 20 XTR", "chassis": "WVW 2", "depot": "south"}),
        ))
        .await,
    );
    let id = vehicle.reply.body["vehicleId"].as_str().unwrap().to_owned();
    run(
        "get-vehicle",
        "GetItem, consistent",
        "1 item under 4 KB",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/vehicles/{id}"))).await,
    );
    run(
        "find-by-plate",
        "GetItem, consistent (the lock)",
        "1 item under 4 KB",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/plates/ka19%20xtr")).await,
    );
    run(
        "depot-vehicles",
        "Query GSI5 (eventually consistent), descending",
        "1 vehicle, half a unit; the index projects the vehicle, so nothing more is read",
        &[("GSI5", 0.5, 0.0)],
        &measured(api.get("/depots/North/vehicles")).await,
    );
    run(
        "find-by-chassis",
        "GetItem, consistent (the lock)",
        "1 item under 4 KB",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/chassis/wvw1")).await,
    );
    run(
        "change-plate",
        "GetItem + TransactWriteItems: 2 puts, delete, update",
        "1 read; 3 items × 2, and the event's outbox item × 2; the vehicle's depot index entry rewritten with its new plate (1)",
        &[(TABLE, 1.0, 8.0), ("GSI5", 0.0, 1.0)],
        &measured(api.put(format!("/vehicles/{id}/plate"), json!({"plate": "KA19XTZ"}))).await,
    );
    run(
        "change-plate",
        "GetItem + TransactWriteItems: 2 puts, check, delete, update (a plate spelled with separators)",
        "as above, and the new plate's key under the rule before `plates-compact` checked free × 2",
        &[(TABLE, 1.0, 10.0), ("GSI5", 0.0, 1.0)],
        &measured(api.put(
            format!("/vehicles/{id}/plate"),
            json!({"plate": "KA 19 XTY"}),
        ))
        .await,
    );
    run(
        "retire-vehicle",
        "GetItem + Query (its outbox) + TransactWriteItems: 3 deletes, put, a delete per outbox item",
        "1 read; its outbox items still in the table (one per change in its last day, here 3: \
         registered, two plate changes) read by one Query (1) and deleted × 2, since they hold its \
         plates; 3 items × 2, and the event's outbox item × 2; the vehicle's depot index entry \
         going (1)",
        &[(TABLE, 2.0, 14.0), ("GSI5", 0.0, 1.0)],
        &measured(api.delete(format!("/vehicles/{id}"))).await,
    );

    // Accounts
    let account = measured(api.post(
        "/accounts",
        json!({"email": "ada@example.com", "username": "ada"}),
    ))
    .await;
    run(
        "create-account",
        "TransactWriteItems: 4 puts",
        "4 items × 2: the account, its locks, its event's outbox item; none in an index",
        &[(TABLE, 0.0, 8.0)],
        &account,
    );
    let id = account.reply.body["accountId"].as_str().unwrap().to_owned();
    run(
        "get-account",
        "GetItem, consistent",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/accounts/{id}"))).await,
    );
    run(
        "check-email",
        "GetItem, consistent (the lock, held)",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/emails/ada@example.com")).await,
    );
    run(
        "check-username",
        "GetItem, consistent (the lock, free)",
        "1 read, even of no item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/usernames/babbage")).await,
    );
    run(
        "change-email",
        "GetItem + TransactWriteItems: 2 puts, delete, update",
        "1 read; 3 items × 2, and the event's outbox item × 2",
        &[(TABLE, 1.0, 8.0)],
        &measured(api.put(
            format!("/accounts/{id}/email"),
            json!({"email": "ada@lovelace.org"}),
        ))
        .await,
    );
    run(
        "change-username",
        "GetItem + TransactWriteItems: 2 puts, delete, update",
        "1 read; 3 items × 2, and the event's outbox item × 2",
        &[(TABLE, 1.0, 8.0)],
        &measured(api.put(
            format!("/accounts/{id}/username"),
            json!({"username": "countess"}),
        ))
        .await,
    );
    run(
        "delete-account",
        "GetItem + Query (its outbox) + TransactWriteItems: 3 deletes, put, a delete per outbox item",
        "1 read; its outbox items still in the table (here 3: created, email and username \
         changed) read by one Query (1) and deleted × 2, since they hold its emails and usernames; \
         3 items × 2, and the event's outbox item × 2",
        &[(TABLE, 2.0, 14.0)],
        &measured(api.delete(format!("/accounts/{id}"))).await,
    );

    // Change & audit log
    run(
        "create-resource",
        "TransactWriteItems: 3 puts",
        "2 items × 2, and the event's outbox item × 2",
        &[(TABLE, 0.0, 6.0)],
        &measured(api.post(
            "/resources",
            json!({"resourceId": "door-7", "status": "closed"}),
        ))
        .await,
    );
    run(
        "get-resource",
        "GetItem, consistent",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/resources/door-7")).await,
    );
    run(
        "change-resource",
        "GetItem + TransactWriteItems: update, 2 puts",
        "1 read; 2 items × 2, and the event's outbox item × 2",
        &[(TABLE, 1.0, 6.0)],
        &measured(
            api.call("PATCH", "/resources/door-7")
                .header("if-match", "\"1\"")
                .json(json!({"status": "open", "action": "unlock"}))
                .send(),
        )
        .await,
    );
    run(
        "resource-history",
        "Query, consistent",
        "3 small items in one 4 KB read",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/resources/door-7/history")).await,
    );

    // Library catalogue
    run(
        "create-branch",
        "TransactWriteItems: 2 puts",
        "1 item × 2, and its GSI1 entry (the list of branches); the event's outbox item × 2",
        &[(TABLE, 0.0, 4.0), ("GSI1", 0.0, 1.0)],
        &measured(api.post(
            "/branches",
            json!({"branchId": "central", "name": "Central", "address": "1 Square",
                "city": "Springfield", "phone": "+44 20 7946 0000",
                "openingHours": "Mon-Sat 09:00-20:00"}),
        ))
        .await,
    );
    run(
        "list-branches",
        "Query GSI1 (eventually consistent)",
        "1 small entry, half a unit",
        &[("GSI1", 0.5, 0.0)],
        &measured(api.get("/branches")).await,
    );
    run(
        "get-branch",
        "GetItem, consistent",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/branches/central")).await,
    );
    let patron = measured(api.post(
        "/branches/central/patrons",
        json!({"cardNumber": "C-1", "firstName": "Ada", "lastName": "Lovelace",
            "email": "ada@example.com", "membershipTier": "premium"}),
    ))
    .await;
    run(
        "register-patron",
        "TransactWriteItems: check, 3 puts (+1 GSI1 entry)",
        "3 items × 2 (the branch checked, the patron and its card lock put), and the patron's \
         GSI1 entry (by id); the event's outbox item × 2",
        &[(TABLE, 0.0, 8.0), ("GSI1", 0.0, 1.0)],
        &patron,
    );
    let patron_id = patron.reply.body["patronId"].as_str().unwrap().to_owned();
    run(
        "list-patrons",
        "Query, consistent",
        "1 small item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/branches/central/patrons")).await,
    );
    run(
        "get-patron",
        "Query GSI1 (eventually consistent)",
        "1 item, half a unit",
        &[("GSI1", 0.5, 0.0)],
        &measured(api.get(format!("/patrons/{patron_id}"))).await,
    );
    run(
        "find-by-card",
        "GetItem, consistent (the lock)",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/cards/C-1")).await,
    );
    run(
        "reissue-card",
        "Query GSI1 + TransactWriteItems: 2 puts, delete, update",
        "½ read (the patron by id); 3 items × 2 (new lock, old lock, patron), and the patron's \
         GSI1 copy rewritten (1); the event's outbox item × 2",
        &[(TABLE, 0.0, 8.0), ("GSI1", 0.5, 1.0)],
        &measured(api.put(
            format!("/patrons/{patron_id}/card"),
            json!({"cardNumber": "C-2"}),
        ))
        .await,
    );
    run(
        "change-tier",
        "Query GSI1 + TransactWriteItems: update, put",
        "½ read (the patron by id); the patron × 2, its GSI1 copy rewritten (1), the event's outbox item × 2. A transaction, not an UpdateItem: the event names the caller (`actor`), which the row does not hold, so it is written with the change (3 W more)",
        &[(TABLE, 0.0, 4.0), ("GSI1", 0.5, 1.0)],
        &measured(api.put(
            format!("/patrons/{patron_id}/tier"),
            json!({"membershipTier": "standard"}),
        ))
        .await,
    );
    run(
        "create-book",
        "TransactWriteItems: 2 puts",
        "1 item × 2, and the event's outbox item × 2; a book is in no index",
        &[(TABLE, 0.0, 4.0)],
        &measured(api.post(
            "/books",
            json!({"isbn": ISBN, "title": "Fundamentals of Data Structures",
                "author": "Ellis Horowitz", "publisher": "Computer Science Press",
                "publishYear": 1976, "genre": "Computer science",
                "description": "Arrays, stacks, queues, lists, trees and graphs.",
                "pageCount": 564}),
        ))
        .await,
    );
    run(
        "get-book",
        "GetItem, consistent",
        "1 item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/books/{ISBN}"))).await,
    );
    run(
        "correct-book",
        "GetItem + TransactWriteItems: update, put",
        "1 read (the book, whole, for its event); the book × 2 and the event's outbox item × 2. A transaction, not an UpdateItem: the event names the caller and holds the whole book, which a stream record of the update would not (1 R + 3 W more)",
        &[(TABLE, 1.0, 4.0)],
        &measured(
            api.call("PATCH", format!("/books/{ISBN}"))
                .json(json!({"pageCount": 565}))
                .send(),
        )
        .await,
    );
    let copy = measured(api.post(
        "/branches/central/copies",
        json!({"isbn": ISBN, "condition": "good"}),
    ))
    .await;
    run(
        "add-copy",
        "GetItem (book) + TransactWriteItems: check, 2 puts (+1 GSI2 entry), update (the count)",
        "1 read; 4 items × 2 (the branch checked, the copy, the branch's count of the book's \
         available copies, the event's outbox item), and the copy's GSI2 entry (by book)",
        &[(TABLE, 1.0, 8.0), ("GSI2", 0.0, 1.0)],
        &copy,
    );
    let copy_id = copy.reply.body["copyId"].as_str().unwrap().to_owned();
    run(
        "list-copies",
        "Query, consistent",
        "1 small item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get("/branches/central/copies")).await,
    );
    run(
        "book-availability",
        "Query, consistent: the book's partition (the book and its per-branch counts)",
        "1 unit, whatever the number of copies (while the book and its counts fit in 4 KB)",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/books/{ISBN}/availability"))).await,
    );
    run(
        "available-copies",
        "Query GSI2, keys only, one branch's available range",
        "1 entry, half a unit",
        &[("GSI2", 0.5, 0.0)],
        &measured(api.get(format!("/branches/central/books/{ISBN}/copies"))).await,
    );

    // Loans
    let loan = measured(api.post(
        "/checkouts",
        json!({"patronId": patron_id, "branchId": "central", "copyId": copy_id}),
    ))
    .await;
    run(
        "checkout-book",
        "Query GSI1 + 2 GetItems, then TransactWriteItems: 2 puts, 3 updates",
        "½ read (the patron by id) + 1 (the copy) + 1 (its book: the title as corrected last); \
         5 items × 2 (the loan, the copy, the patron, the branch's count of the book's \
         available copies, the event's outbox item), the loan's GSI1 entry (1), the copy's GSI2 \
         key moving (delete + put, 2), the patron's GSI1 copy (1)",
        &[(TABLE, 2.0, 10.0), ("GSI1", 0.5, 2.0), ("GSI2", 0.0, 2.0)],
        &loan,
    );
    let checkout_id = loan.reply.body["checkoutId"].as_str().unwrap().to_owned();
    run(
        "active-checkouts",
        "Query, consistent",
        "1 small item",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/patrons/{patron_id}/checkouts"))).await,
    );
    run(
        "get-checkout",
        "GetItem, consistent (the active loan)",
        "1 item; a returned loan would take a second read, whose `expiresAt` is checked on the \
         item read (past its history's end it is `404`; `GetItem` takes no filter, and the check \
         costs nothing more)",
        &[(TABLE, 1.0, 0.0)],
        &measured(api.get(format!("/patrons/{patron_id}/checkouts/{checkout_id}"))).await,
    );
    run(
        "renew-checkout",
        "GetItem + TransactWriteItems: update, put",
        "1 read; the loan × 2, its GSI1 sort key moving (2), the event's outbox item × 2. A transaction, not an UpdateItem: the event names the caller, which the loan does not hold (3 W more)",
        &[(TABLE, 1.0, 4.0), ("GSI1", 0.0, 2.0)],
        &measured(
            api.call(
                "POST",
                format!("/patrons/{patron_id}/checkouts/{checkout_id}/renew"),
            )
            .send(),
        )
        .await,
    );
    run(
        "find-overdue",
        "Query GSI3 (empty) + GetItem (branch) + GetItem (asOf)",
        "½ read of nothing; 1 read (the branch, as the page is empty); 1 read (the marker's asOf)",
        &[(TABLE, 2.0, 0.0), ("GSI3", 0.5, 0.0)],
        &measured(api.get("/branches/central/overdue")).await,
    );
    run(
        "find-all-overdue",
        "Query GSI4 (empty) + GetItem (asOf)",
        "½ read of nothing; 1 read (the marker's asOf); no owner to look for",
        &[(TABLE, 1.0, 0.0), ("GSI4", 0.5, 0.0)],
        &measured(api.get("/overdue")).await,
    );
    run(
        "return-book",
        "GetItem + TransactWriteItems: delete, 2 puts, 3 updates",
        "1 read; 6 items × 2 (the count of the book's available copies and the event's outbox \
         item included), the loan leaving GSI1 (1), the copy's GSI2 key moving (2), the \
         patron's GSI1 copy (1), the returned loan's history entry in GSI1 (1); the returned \
         loan's `expiresAt` (`LoanHistoryDays` on) is one attribute of it, no unit more",
        &[(TABLE, 1.0, 12.0), ("GSI1", 0.0, 3.0), ("GSI2", 0.0, 2.0)],
        &measured(
            api.call(
                "POST",
                format!("/patrons/{patron_id}/checkouts/{checkout_id}/return"),
            )
            .send(),
        )
        .await,
    );
    run(
        "loan-history",
        "Query GSI1 (eventually consistent)",
        "1 returned loan, half a unit. The key condition starts at the oldest return still kept \
         (now − `LoanHistoryDays`), so expired loans TTL has not deleted yet are never read; \
         the filter on `expiresAt` (billed for every item it reads, kept or not) reads \
         nothing the key condition did not",
        &[("GSI1", 0.5, 0.0)],
        &measured(api.get(format!("/patrons/{patron_id}/history"))).await,
    );
    run(
        "remove-patron",
        "Query GSI1 + Query (its outbox) + TransactWriteItems: 2 deletes, put, a delete per outbox item",
        "½ read (the patron by id); its outbox items still in the table (here 3) read by one Query \
         (1) and deleted × 2, since they hold its name, email and cards; 2 items × 2 (the patron, \
         its card lock), and the patron's GSI1 entry going (1); the event's outbox item × 2",
        &[(TABLE, 1.0, 12.0), ("GSI1", 0.5, 1.0)],
        &measured(api.delete(format!("/patrons/{patron_id}"))).await,
    );

    // The marker, moving one loan: its event (`LoanOverdue`) is that loan's own stream record,
    // so it writes no outbox item and a marked loan costs what it cost before events.
    let patron_id = api
        .post(
            "/branches/central/patrons",
            json!({"cardNumber": "C-9", "firstName": "Ada", "lastName": "Lovelace",
                "email": "ada@example.com", "membershipTier": "standard"}),
        )
        .await
        .body["patronId"]
        .as_str()
        .unwrap()
        .to_owned();
    let copy = api
        .post(
            "/branches/central/copies",
            json!({"isbn": ISBN, "condition": "good"}),
        )
        .await;
    let lent = api
        .post(
            "/checkouts",
            json!({"patronId": patron_id, "branchId": "central", "copyId": copy.body["copyId"]}),
        )
        .await;
    assert_eq!(lent.status, 201, "{lent:?}");
    let later = singlet_functions::clock::now() + singlet_functions::clock::days(60);
    let (report, units) = metered(mark_overdue(&api.ctx, later, 100, || true)).await;
    assert_eq!(report.unwrap().marked, 1);
    let expected: BTreeMap<String, (f64, f64)> = [
        (TABLE, (0.0, 2.0)),
        ("GSI1", (8.0, 1.0)),
        ("GSI3", (0.0, 1.0)),
        ("GSI4", (0.0, 1.0)),
    ]
    .into_iter()
    .map(|(place, units)| (place.to_owned(), units))
    .collect();
    rows.push(Row {
        function: "mark-overdue",
        operation: "16 × Query GSI1 (one per open-loans shard) + UpdateItem per loan due + UpdateItem (asOf)",
        minimum: "16 empty-or-small shard reads, ½ each; per marked loan 1 write, out of GSI1 \
                  (1), into GSI3 (1) and GSI4 (1); 1 write recording the run. Its `LoanOverdue` \
                  is the loan's own stream record: no outbox item, so a marked loan costs no \
                  more than before events",
        header: total(&units),
        expected,
        measured: units,
    });

    let unmeasured: Vec<&str> = ROUTES
        .iter()
        .map(|route| route.function)
        .filter(|function| !rows.iter().any(|row| row.function == *function))
        .collect();
    assert!(
        unmeasured.is_empty(),
        "routes with no row in the costs: {unmeasured:?}"
    );

    let mut report = String::from(
        "# What each access pattern costs\n\n\
         Written by `cargo test costs` (`tests/api/costs.rs`) from what each pattern consumed on the \
         embedded engine (`ReturnConsumedCapacity=INDEXES`), per table and index, asserted equal \
         to the key design's minimum. R: read units, W: write units. Prices: DynamoDB on-demand, \
         us-east-1, $0.625 per million write request units and $0.125 per million read request \
         units. Items under 1 KB written and 4 KB read.\n\n\
         Every pattern that changes something writes its domain event as one outbox item in the \
         same `TransactWriteItems` (2 W for an item under 1 KB); the publisher's reads of the \
         stream cost nothing (Lambda reads DynamoDB Streams for free). `change-tier`, \
         `correct-book` and `renew-checkout` were one `UpdateItem`: each is now a transaction \
         (update + outbox item), since its event names the caller (`actor`) and, for a book, holds \
         the whole book, which the item's own stream record would not say; they are rare staff or \
         patron actions. `mark-overdue` is the one change whose event comes from the item's own \
         stream record (`open` → `overdue`, actor `mark-overdue`), so the marker, which moves \
         every loan that falls due, costs per marked loan what it cost before events. A route \
         that deletes an entity with personal data (`retire-vehicle`, `delete-account`, \
         `remove-patron`) deletes its outbox items still in the table with it, 2 W each, rather \
         than leave its plates, emails or name there for the day they would take to expire.\n\n\
         Retention: DynamoDB's TTL deletes an expired item (a returned loan `LoanHistoryDays` \
         after its return, an outbox item or idempotency record a day after it was written) \
         with no write units. What it does cost: each deletion is a stream record, one \
         `publish-events` invocation per batch of deleted returned loans (the mapping's filter \
         lets no other deletion through), one S3 `PutObject` per archived loan and its storage \
         (Glacier Instant Retrieval after 30 days). Every read that can meet an expired item \
         (a patron's history, one loan, an `Idempotency-Key`'s record) leaves it out; the rows \
         below say what that costs.\n\n\
         | pattern | operation | why | read units | write units | on the table and each index | $ per million calls |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut wrong = Vec::new();
    for row in &rows {
        let (read, write) = total(&row.measured);
        let price = read * PRICE_PER_MILLION_READ_UNITS + write * PRICE_PER_MILLION_WRITE_UNITS;
        report.push_str(&format!(
            "| `{}` | {} | {} | {read} | {write} | {} | {price:.3} |\n",
            row.function,
            row.operation,
            row.minimum,
            describe(&row.measured)
        ));
        if row.measured != row.expected {
            wrong.push(format!(
                "{}: measured {}, minimum {}",
                row.function,
                describe(&row.measured),
                describe(&row.expected)
            ));
        }
        if row.header != (read, write) {
            wrong.push(format!(
                "{}: the header says {:?}, the responses {:?}",
                row.function,
                row.header,
                (read, write)
            ));
        }
    }
    println!("{report}");
    assert!(wrong.is_empty(), "{wrong:#?}");
    std::fs::write(format!("{ROOT}/docs/COSTS.md"), report).unwrap();
}
