//! What each access pattern costs: every pattern run against the engine, its consumed read and
//! write units (the runner's `x-consumed-capacity` header, the sum of what every request of the
//! pattern reported with `ReturnConsumedCapacity=INDEXES`) equal to the key design's minimum
//! written next to it, and `docs/COSTS.md` written from the same figures.

use crate::fixtures::ISBN;
use crate::harness::{Api, Mode, Reply};
use serde_json::json;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// On-demand prices, us-east-1, per million request units (AWS price list, November 2024 on).
const PRICE_PER_MILLION_WRITE_UNITS: f64 = 0.625;
const PRICE_PER_MILLION_READ_UNITS: f64 = 0.125;

/// One pattern's measured cost next to its minimum.
struct Row {
    function: &'static str,
    operation: &'static str,
    /// Why the minimum is what it is.
    minimum: &'static str,
    expected: (f64, f64),
    measured: (f64, f64),
}

fn units(reply: &Reply) -> (f64, f64) {
    let header = reply
        .header("x-consumed-capacity")
        .unwrap_or_else(|| panic!("no capacity header: {reply:?}"));
    let mut read = 0.0;
    let mut write = 0.0;
    for part in header.split(';') {
        let (name, value) = part.trim().split_once('=').unwrap();
        let value: f64 = value.parse().unwrap();
        match name {
            "rcu" => read = value,
            "wcu" => write = value,
            _ => {}
        }
    }
    (read, write)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pattern_costs_its_key_designs_minimum() {
    let api = Api::start(Mode::Http).await;
    let mut rows = Vec::new();
    let mut run = |function, operation, minimum, expected: (f64, f64), reply: &Reply| {
        assert!((200..300).contains(&reply.status), "{function}: {reply:?}");
        rows.push(Row {
            function,
            operation,
            minimum,
            expected,
            measured: units(reply),
        });
    };

    // Fleet
    let vehicle = api
        .post(
            "/vehicles",
            json!({"plate": "KA19 XTR", "chassis": "WVW1", "depot": "north"}),
        )
        .await;
    run(
        "register-vehicle",
        "TransactWriteItems: 3 puts",
        "3 items × 2 (transactional writes)",
        (0.0, 6.0),
        &vehicle,
    );
    let id = vehicle.body["vehicleId"].as_str().unwrap().to_owned();
    run(
        "get-vehicle",
        "GetItem, consistent",
        "1 item under 4 KB",
        (1.0, 0.0),
        &api.get(format!("/vehicles/{id}")).await,
    );
    run(
        "find-by-plate",
        "GetItem, consistent (the lock)",
        "1 item under 4 KB",
        (1.0, 0.0),
        &api.get("/plates/ka19%20xtr").await,
    );
    run(
        "find-by-chassis",
        "GetItem, consistent (the lock)",
        "1 item under 4 KB",
        (1.0, 0.0),
        &api.get("/chassis/wvw1").await,
    );
    run(
        "change-plate",
        "GetItem + TransactWriteItems: put, delete, update",
        "1 read; 3 items × 2",
        (1.0, 6.0),
        &api.put(
            format!("/vehicles/{id}/plate"),
            json!({"plate": "KA19 XTZ"}),
        )
        .await,
    );
    run(
        "retire-vehicle",
        "GetItem + TransactWriteItems: 3 deletes",
        "1 read; 3 items × 2",
        (1.0, 6.0),
        &api.delete(format!("/vehicles/{id}")).await,
    );

    // Accounts
    let account = api
        .post(
            "/accounts",
            json!({"email": "ada@example.com", "username": "ada"}),
        )
        .await;
    run(
        "create-account",
        "TransactWriteItems: 3 puts",
        "3 items × 2",
        (0.0, 6.0),
        &account,
    );
    let id = account.body["accountId"].as_str().unwrap().to_owned();
    run(
        "get-account",
        "GetItem, consistent",
        "1 item",
        (1.0, 0.0),
        &api.get(format!("/accounts/{id}")).await,
    );
    run(
        "change-email",
        "GetItem + TransactWriteItems: put, delete, update",
        "1 read; 3 items × 2",
        (1.0, 6.0),
        &api.put(
            format!("/accounts/{id}/email"),
            json!({"email": "ada@lovelace.org"}),
        )
        .await,
    );
    run(
        "change-username",
        "GetItem + TransactWriteItems: put, delete, update",
        "1 read; 3 items × 2",
        (1.0, 6.0),
        &api.put(
            format!("/accounts/{id}/username"),
            json!({"username": "countess"}),
        )
        .await,
    );
    run(
        "delete-account",
        "GetItem + TransactWriteItems: 3 deletes",
        "1 read; 3 items × 2",
        (1.0, 6.0),
        &api.delete(format!("/accounts/{id}")).await,
    );

    // Change & audit log
    run(
        "create-resource",
        "TransactWriteItems: 2 puts",
        "2 items × 2",
        (0.0, 4.0),
        &api.post(
            "/resources",
            json!({"resourceId": "door-7", "status": "closed"}),
        )
        .await,
    );
    run(
        "get-resource",
        "GetItem, consistent",
        "1 item",
        (1.0, 0.0),
        &api.get("/resources/door-7").await,
    );
    run(
        "change-resource",
        "GetItem + TransactWriteItems: update, put",
        "1 read; 2 items × 2",
        (1.0, 4.0),
        &api.call("PATCH", "/resources/door-7")
            .header("if-match", "\"1\"")
            .json(json!({"status": "open", "action": "unlock"}))
            .send()
            .await,
    );
    run(
        "resource-history",
        "Query, consistent",
        "3 small items in one 4 KB read",
        (1.0, 0.0),
        &api.get("/resources/door-7/history").await,
    );

    // Library catalogue
    run("create-branch", "TransactWriteItems: 1 put", "1 item × 2, and its GSI1 entry (the list of branches)", (0.0, 3.0),
        &api.post("/branches", json!({"branchId": "central", "name": "Central", "address": "1 Square",
            "city": "Springfield", "phone": "+44 20 7946 0000", "openingHours": "Mon-Sat 09:00-20:00"})).await);
    run(
        "get-branch",
        "GetItem, consistent",
        "1 item",
        (1.0, 0.0),
        &api.get("/branches/central").await,
    );
    let patron = api
        .post(
            "/branches/central/patrons",
            json!({"cardNumber": "C-1", "firstName": "Ada", "lastName": "Lovelace",
            "email": "ada@example.com", "membershipTier": "premium"}),
        )
        .await;
    run(
        "register-patron",
        "TransactWriteItems: check, 2 puts (+1 GSI1 entry)",
        "3 items × 2, and the index entry",
        (0.0, 7.0),
        &patron,
    );
    let patron_id = patron.body["patronId"].as_str().unwrap().to_owned();
    run(
        "list-patrons",
        "Query, consistent",
        "1 small item",
        (1.0, 0.0),
        &api.get("/branches/central/patrons").await,
    );
    run(
        "get-patron",
        "Query GSI1 (eventually consistent)",
        "1 item, half a unit",
        (0.5, 0.0),
        &api.get(format!("/patrons/{patron_id}")).await,
    );
    run(
        "find-by-card",
        "GetItem, consistent (the lock)",
        "1 item",
        (1.0, 0.0),
        &api.get("/cards/C-1").await,
    );
    run("create-book", "TransactWriteItems: 1 put", "1 item × 2", (0.0, 2.0),
        &api.post("/books", json!({"isbn": ISBN, "title": "Fundamentals of Data Structures", "author": "Ellis Horowitz",
            "publisher": "Computer Science Press", "publishYear": 1976, "genre": "Computer science",
            "description": "Arrays, stacks, queues, lists, trees and graphs.", "pageCount": 564})).await);
    run(
        "get-book",
        "GetItem, consistent",
        "1 item",
        (1.0, 0.0),
        &api.get(format!("/books/{ISBN}")).await,
    );
    let copy = api
        .post(
            "/branches/central/copies",
            json!({"isbn": ISBN, "condition": "good"}),
        )
        .await;
    run(
        "add-copy",
        "GetItem (book) + TransactWriteItems: check, put (+1 GSI2 entry)",
        "1 read; 2 items × 2, and the index entry",
        (1.0, 5.0),
        &copy,
    );
    let copy_id = copy.body["copyId"].as_str().unwrap().to_owned();
    run(
        "list-copies",
        "Query, consistent",
        "1 small item",
        (1.0, 0.0),
        &api.get("/branches/central/copies").await,
    );
    run(
        "book-availability",
        "Query GSI2, keys only",
        "half a unit",
        (0.5, 0.0),
        &api.get(format!("/books/{ISBN}/availability")).await,
    );

    // Loans
    let loan = api
        .post(
            "/checkouts",
            json!({"patronId": patron_id, "branchId": "central", "copyId": copy_id}),
        )
        .await;
    run(
        "checkout-book",
        "Query GSI1 + GetItem, then TransactWriteItems: put, 2 updates",
        "½ + 1 read; 3 items × 2, the loan's GSI1 entry (1), the copy's GSI2 key moving (delete + put, 2), the patron's GSI1 copy (1)",
        (2.5, 10.0),
        &loan,
    );
    let checkout_id = loan.body["checkoutId"].as_str().unwrap().to_owned();
    run(
        "active-checkouts",
        "Query, consistent",
        "1 small item",
        (1.0, 0.0),
        &api.get(format!("/patrons/{patron_id}/checkouts")).await,
    );
    run(
        "renew-checkout",
        "GetItem + UpdateItem",
        "1 read; 1 write, and its GSI1 sort key moving (2)",
        (1.0, 3.0),
        &api.call(
            "POST",
            format!("/patrons/{patron_id}/checkouts/{checkout_id}/renew"),
        )
        .send()
        .await,
    );
    run(
        "find-overdue",
        "Query GSI3 (empty) + GetItem (branch)",
        "½ read of nothing; 1 read (the branch); 1 read (the marker's asOf)",
        (2.5, 0.0),
        &api.get("/branches/central/overdue").await,
    );
    run(
        "return-book",
        "GetItem + TransactWriteItems: delete, put, 2 updates",
        "1 read; 4 items × 2, the loan leaving GSI1 (1), the copy's GSI2 key moving (2), the patron's GSI1 copy (1), the returned loan's history entry in GSI1 (1)",
        (1.0, 13.0),
        &api.call(
            "POST",
            format!("/patrons/{patron_id}/checkouts/{checkout_id}/return"),
        )
        .send()
        .await,
    );

    let mut report = String::from(
        "# What each access pattern costs\n\n\
         Written by `cargo test costs` (`tests/api/costs.rs`) from what each pattern consumed on the \
         embedded engine (`ReturnConsumedCapacity=INDEXES`), asserted equal to the key design's \
         minimum. Prices: DynamoDB on-demand, us-east-1, $0.625 per million write request units and \
         $0.125 per million read request units. Items under 1 KB written and 4 KB read.\n\n\
         | pattern | operation | why | read units | write units | $ per million calls |\n\
         |---|---|---|---|---|---|\n",
    );
    let mut wrong = Vec::new();
    for row in &rows {
        let price = row.measured.0 * PRICE_PER_MILLION_READ_UNITS
            + row.measured.1 * PRICE_PER_MILLION_WRITE_UNITS;
        report.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {price:.3} |\n",
            row.function, row.operation, row.minimum, row.measured.0, row.measured.1
        ));
        if row.measured != row.expected {
            wrong.push(format!(
                "{}: measured {:?}, minimum {:?}",
                row.function, row.measured, row.expected
            ));
        }
    }
    println!("{report}");
    assert!(wrong.is_empty(), "{wrong:#?}");
    std::fs::write(format!("{ROOT}/docs/COSTS.md"), report).unwrap();
}
