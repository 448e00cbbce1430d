//! The library catalogue: docs/API.md, "Library" (branches, patrons, cards, books, copies,
//! availability).

use crate::both;
use crate::fixtures::{
    self, ISBN, ISBN10, add_copy, book_body, branch, branch_body, create_book, patron_body,
    register_patron,
};
use crate::harness::{Api, Item, Mode, Reply, n, s};
use serde_json::{Value, json};
use std::collections::BTreeSet;

fn with_sk_prefix<'a>(items: &'a [Item], pk: &str, prefix: &str) -> Vec<&'a Item> {
    items
        .iter()
        .filter(|i| s(i, "PK") == pk && s(i, "SK").starts_with(prefix))
        .collect()
}

/// Every page of a list, walked with `nextCursor`.
async fn walk(api: &Api, path: &str, limit: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let url = match &cursor {
            None => format!("{path}?limit={limit}"),
            Some(c) => format!("{path}?limit={limit}&cursor={c}"),
        };
        let page = api.get(url).await;
        assert_eq!(page.status, 200, "{page:?}");
        let batch = page.body["items"].as_array().unwrap();
        assert!(batch.len() <= limit);
        items.extend(batch.iter().cloned());
        match page.body["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                assert_eq!(page.body["nextCursor"], Value::Null);
                return items;
            }
        }
    }
    panic!("the list never ended");
}

both!(
    create_branch_writes_one_item_and_reads_back,
    create_branch_names_every_bad_field,
    create_branch_is_idempotent,
    register_patron_writes_the_patron_and_its_card_lock,
    register_patron_names_every_bad_field,
    register_patron_at_a_missing_branch_is_404_and_writes_nothing,
    a_card_number_is_held_by_one_patron,
    register_patron_is_idempotent,
    list_patrons_pages_each_patron_once_and_refuses_foreign_cursors,
    lists_of_a_missing_branch_are_404_of_an_empty_branch_empty,
    reads_of_missing_things_are_404,
    both_isbn_forms_are_one_book,
    create_book_names_every_bad_field,
    add_copy_checks_the_branch_and_the_book,
    list_copies_pages_the_inventory,
    availability_counts_available_copies_per_branch,
    branches_are_listed_in_id_order,
    available_copies_lists_one_branchs_shelf,
    reissue_card_moves_the_lock_in_one_transaction,
    change_tier_sets_the_tiers_numbers,
    remove_patron_takes_the_patron_and_its_card,
    correct_book_sets_the_fields_given,
    the_readme_examples,
);

async fn create_branch_writes_one_item_and_reads_back(api: Api) {
    let mut body = branch_body("central");
    body["name"] = json!("  Central Library  ");
    body["colour"] = json!("red");
    let reply = api.post("/branches", body).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.header("location"), Some("/branches/central"));
    assert_eq!(
        reply.body,
        json!({
            "branchId": "central",
            "name": "  Central Library  ",
            "address": "1 Library Square",
            "city": "Springfield",
            "phone": "+44 20 7946 0000",
            "openingHours": "Mon-Sat 09:00-20:00",
        })
    );
    let item = api.item("BRANCH#central", "BRANCH#central").await.unwrap();
    // Free text is stored exactly as sent, its spaces included.
    assert_eq!(s(&item, "name"), "  Central Library  ");
    assert_eq!(s(&item, "openingHours"), "Mon-Sat 09:00-20:00");
    assert_eq!(api.items().await.len(), 1);

    let read = api.get("/branches/central").await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, reply.body);

    let mut again = branch_body("central");
    again["name"] = json!("Another");
    api.post("/branches", again)
        .await
        .assert_problem(409, &[("branchId", "taken")]);
    assert_eq!(
        api.get("/branches/central").await.body["name"],
        "  Central Library  ",
        "a refused creation changes nothing"
    );
    assert_eq!(api.items().await.len(), 1);
}

async fn create_branch_names_every_bad_field(api: Api) {
    api.post("/branches", json!({})).await.assert_problem(
        400,
        &[
            ("address", "required"),
            ("branchId", "required"),
            ("city", "required"),
            ("name", "required"),
            ("openingHours", "required"),
            ("phone", "required"),
        ],
    );
    api.post(
        "/branches",
        json!({
            "branchId": "a#b",
            "name": "   ",
            "address": "x".repeat(201),
            "city": 7,
            "phone": "x".repeat(41),
            "openingHours": "ok",
        }),
    )
    .await
    .assert_problem(
        400,
        &[
            ("address", "too_long"),
            ("branchId", "invalid"),
            ("city", "invalid"),
            ("name", "required"),
            ("phone", "too_long"),
        ],
    );
    let mut long_id = branch_body(&"b".repeat(65));
    long_id["openingHours"] = json!("09:00\u{0}");
    api.post("/branches", long_id).await.assert_problem(
        400,
        &[("branchId", "too_long"), ("openingHours", "invalid")],
    );
    assert!(api.items().await.is_empty(), "nothing is written");
}

async fn create_branch_is_idempotent(api: Api) {
    let send = |body: Value, key: &'static str| {
        let api = api.clone();
        async move {
            api.call("POST", "/branches")
                .json(body)
                .header("idempotency-key", key)
                .send()
                .await
        }
    };
    let first = send(branch_body("north"), "create-north-1").await;
    assert_eq!(first.status, 201, "{first:?}");
    let retry = send(branch_body("north"), "create-north-1").await;
    assert_eq!(retry.status, 201, "a retry is not a 409: {retry:?}");
    assert_eq!(retry.body, first.body);
    assert_eq!(retry.header("location"), Some("/branches/north"));
    send(branch_body("south"), "create-north-1")
        .await
        .assert_problem(422, &[]);
    // Another key for the same branch is a new request: the branch is taken.
    send(branch_body("north"), "create-north-2")
        .await
        .assert_problem(409, &[("branchId", "taken")]);
    send(branch_body("north"), "not a key!")
        .await
        .assert_problem(400, &[("Idempotency-Key", "invalid")]);
    let items = api.items().await;
    assert_eq!(items.len(), 2, "the branch and one idempotency record");
    assert_eq!(with_sk_prefix(&items, "BRANCH#north", "BRANCH#").len(), 1);
    assert!(api.item("BRANCH#south", "BRANCH#south").await.is_none());
}

async fn register_patron_writes_the_patron_and_its_card_lock(api: Api) {
    branch(&api, "central").await;
    let reply = api
        .post(
            "/branches/central/patrons",
            patron_body("C-0001", "premium"),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let id = reply.body["patronId"].as_str().unwrap().to_owned();
    assert_eq!(
        reply.header("location"),
        Some(format!("/patrons/{id}").as_str())
    );
    let created_at = reply.body["createdAt"].as_str().unwrap().to_owned();
    assert!(
        time::OffsetDateTime::parse(&created_at, &time::format_description::well_known::Rfc3339)
            .is_ok()
            && created_at.ends_with('Z'),
        "{created_at}"
    );
    assert_eq!(
        reply.body,
        json!({
            "patronId": id,
            "branchId": "central",
            "cardNumber": "c-0001",
            "firstName": "Ada",
            "lastName": "Lovelace",
            "email": "ada@example.com",
            "membershipTier": "premium",
            "loanLimit": 10,
            "loanPeriodDays": 28,
            "activeLoans": 0,
            "createdAt": created_at,
        })
    );

    let row = api
        .item("BRANCH#central", &format!("PATRON#{id}"))
        .await
        .unwrap();
    assert_eq!(s(&row, "GSI1PK"), format!("PATRON#{id}"));
    assert_eq!(s(&row, "GSI1SK"), format!("PATRON#{id}"));
    assert_eq!(s(&row, "cardNumber"), "c-0001", "normalised");
    assert_eq!(n(&row, "activeLoans"), 0);
    assert_eq!(n(&row, "loanLimit"), 10);
    let lock = api.item("CARD#c-0001", "CARD#c-0001").await.unwrap();
    assert_eq!(s(&lock, "patronId"), id);
    assert_eq!(api.items().await.len(), 3);

    let read = api.get(format!("/patrons/{id}")).await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.body, reply.body);
    let card = api.get("/cards/C-0001").await;
    assert_eq!(card.status, 200);
    assert_eq!(card.body, json!({"cardNumber": "c-0001", "patronId": id}));
    assert_eq!(
        api.get("/cards/%EF%BC%A3-0001").await.body,
        card.body,
        "Ｃ-0001"
    );

    // The standard tier's limits.
    let standard = register_patron(&api, "central", "C-0002", "standard").await;
    assert_eq!(standard.body["membershipTier"], "standard");
    assert_eq!(standard.body["loanLimit"], 5);
    assert_eq!(standard.body["loanPeriodDays"], 21);
    assert_eq!(standard.body["activeLoans"], 0);
}

async fn register_patron_names_every_bad_field(api: Api) {
    branch(&api, "central").await;
    api.post("/branches/central/patrons", json!({}))
        .await
        .assert_problem(
            400,
            &[
                ("cardNumber", "required"),
                ("email", "required"),
                ("firstName", "required"),
                ("lastName", "required"),
                ("membershipTier", "required"),
            ],
        );
    api.post(
        "/branches/central/patrons",
        json!({
            "cardNumber": "CARD#1",
            "firstName": "x".repeat(101),
            "lastName": "",
            "email": "not-an-email",
            "membershipTier": "gold",
        }),
    )
    .await
    .assert_problem(
        400,
        &[
            ("cardNumber", "invalid"),
            ("email", "invalid"),
            ("firstName", "too_long"),
            ("lastName", "required"),
            ("membershipTier", "invalid"),
        ],
    );
    // The path is validated with the body, and every fault is named at once.
    api.post(
        "/branches/bad%20id/patrons",
        json!({"cardNumber": "C1", "firstName": "A", "lastName": "B", "email": "a@b.co", "membershipTier": "Premium"}),
    )
    .await
    .assert_problem(400, &[("branchId", "invalid"), ("membershipTier", "invalid")]);
    assert_eq!(api.items().await.len(), 1, "nothing but the branch");
}

async fn register_patron_at_a_missing_branch_is_404_and_writes_nothing(api: Api) {
    let reply = register_patron(&api, "nowhere", "C-0001", "standard").await;
    reply.assert_problem(404, &[]);
    assert_eq!(reply.body["detail"], "branch not found");
    assert!(api.items().await.is_empty(), "no patron and no card lock");
    // The card is still free.
    branch(&api, "central").await;
    assert_eq!(
        register_patron(&api, "central", "C-0001", "standard")
            .await
            .status,
        201
    );
}

async fn a_card_number_is_held_by_one_patron(api: Api) {
    branch(&api, "central").await;
    branch(&api, "north").await;
    let holder = fixtures::patron(&api, "central", "C-0001", "standard").await;
    register_patron(&api, "central", "C-0001", "standard")
        .await
        .assert_problem(409, &[("cardNumber", "taken")]);
    let other = register_patron(&api, "north", "C-0001", "standard").await;
    other.assert_problem(409, &[("cardNumber", "taken")]);
    assert_eq!(other.body["detail"], "cardNumber is already registered");
    // A missing branch is named before a taken card.
    register_patron(&api, "nowhere", "C-0001", "standard")
        .await
        .assert_problem(404, &[]);
    // Card numbers are normalised (NFKC, lower case, trimmed) before they become keys.
    for spelling in ["c-0001", " C-0001 ", "Ｃ-０００１"] {
        register_patron(&api, "north", spelling, "standard")
            .await
            .assert_problem(409, &[("cardNumber", "taken")]);
    }
    assert_eq!(
        register_patron(&api, "north", "C-0002", "standard")
            .await
            .status,
        201
    );

    let items = api.items().await;
    let cards: Vec<&Item> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("CARD#"))
        .collect();
    assert_eq!(cards.len(), 2);
    assert_eq!(
        s(
            &api.item("CARD#c-0001", "CARD#c-0001").await.unwrap(),
            "patronId"
        ),
        holder
    );
    assert_eq!(with_sk_prefix(&items, "BRANCH#central", "PATRON#").len(), 1);
    assert_eq!(with_sk_prefix(&items, "BRANCH#north", "PATRON#").len(), 1);
}

async fn register_patron_is_idempotent(api: Api) {
    branch(&api, "central").await;
    branch(&api, "north").await;
    let send = |branch_id: &'static str, card: &'static str, key: &'static str| {
        let api = api.clone();
        async move {
            api.call("POST", format!("/branches/{branch_id}/patrons"))
                .json(patron_body(card, "standard"))
                .header("idempotency-key", key)
                .send()
                .await
        }
    };
    let first = send("central", "C-1", "reg-1").await;
    assert_eq!(first.status, 201, "{first:?}");
    let retry = send("central", "C-1", "reg-1").await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert_eq!(
        retry.body, first.body,
        "the same patron, the same createdAt"
    );
    assert_eq!(retry.header("location"), first.header("location"));
    // The same key with another body, or at another branch, is another request.
    send("central", "C-2", "reg-1")
        .await
        .assert_problem(422, &[]);
    send("north", "C-1", "reg-1").await.assert_problem(422, &[]);
    // The id is derived from the key: another key, another patron.
    let second = send("central", "C-3", "reg-2").await;
    assert_eq!(second.status, 201, "{second:?}");
    assert_ne!(second.body["patronId"], first.body["patronId"]);

    let items = api.items().await;
    assert_eq!(with_sk_prefix(&items, "BRANCH#central", "PATRON#").len(), 2);
    assert_eq!(
        items
            .iter()
            .filter(|i| s(i, "PK").starts_with("CARD#"))
            .count(),
        2
    );
    assert!(api.item("CARD#c-2", "CARD#c-2").await.is_none());
}

async fn list_patrons_pages_each_patron_once_and_refuses_foreign_cursors(api: Api) {
    branch(&api, "central").await;
    branch(&api, "north").await;
    let mut expected = BTreeSet::new();
    for i in 0..7 {
        expected.insert(fixtures::patron(&api, "central", &format!("C-{i}"), "standard").await);
    }
    fixtures::patron(&api, "north", "N-1", "standard").await;
    // A copy shares the branch's partition and is never listed as a patron.
    assert_eq!(create_book(&api, ISBN).await.status, 201);
    assert_eq!(add_copy(&api, "central", ISBN).await.status, 201);

    let seen = walk(&api, "/branches/central/patrons", 3).await;
    let ids: Vec<String> = seen
        .iter()
        .map(|p| {
            assert_eq!(p["branchId"], "central", "only this branch's patrons");
            assert!(p.get("copyId").is_none(), "never a copy");
            assert!(p.get("GSI1PK").is_none() && p.get("PK").is_none());
            p["patronId"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 7, "each patron once: {ids:?}");
    assert_eq!(ids.iter().cloned().collect::<BTreeSet<_>>(), expected);

    // One page of everything; the default limit is 25.
    let all = api.get("/branches/central/patrons").await;
    assert_eq!(all.body["items"].as_array().unwrap().len(), 7);
    assert_eq!(all.body["nextCursor"], Value::Null);

    let first = api.get("/branches/central/patrons?limit=2").await;
    let cursor = first.body["nextCursor"].as_str().unwrap().to_owned();
    let next = api
        .get(format!("/branches/central/patrons?limit=2&cursor={cursor}"))
        .await;
    assert_eq!(next.status, 200);
    // Another branch's list, another route's list, an edited or a truncated cursor: 400.
    let mut edited: Vec<char> = cursor.chars().collect();
    edited[4] = if edited[4] == 'A' { 'B' } else { 'A' };
    let edited: String = edited.into_iter().collect();
    for path in [
        format!("/branches/north/patrons?cursor={cursor}"),
        format!("/branches/central/copies?cursor={cursor}"),
        format!("/branches/central/patrons?cursor={edited}"),
        format!(
            "/branches/central/patrons?cursor={}",
            &cursor[..cursor.len() - 3]
        ),
        "/branches/central/patrons?cursor=".to_owned(),
        "/branches/central/patrons?cursor=bm90LWEtY3Vyc29y".to_owned(),
    ] {
        api.get(&path)
            .await
            .assert_problem(400, &[("cursor", "invalid")]);
    }
    for limit in ["0", "101", "x", "-1"] {
        api.get(format!("/branches/central/patrons?limit={limit}"))
            .await
            .assert_problem(400, &[("limit", "invalid")]);
    }
    let north = api.get("/branches/north/patrons").await;
    assert_eq!(north.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(north.body["items"][0]["cardNumber"], "n-1");
}

async fn lists_of_a_missing_branch_are_404_of_an_empty_branch_empty(api: Api) {
    for path in ["/branches/nowhere/patrons", "/branches/nowhere/copies"] {
        let reply = api.get(path).await;
        reply.assert_problem(404, &[]);
        assert_eq!(reply.body["detail"], "branch not found");
    }
    branch(&api, "empty").await;
    for path in ["/branches/empty/patrons", "/branches/empty/copies"] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.body, json!({"items": [], "nextCursor": null}));
    }
    api.get("/branches/a%23b/patrons")
        .await
        .assert_problem(400, &[("branchId", "invalid")]);
}

async fn reads_of_missing_things_are_404(api: Api) {
    for path in [
        "/branches/nope",
        "/patrons/nope",
        "/cards/nope",
        "/books/9780306406157",
        "/books/0306406152/availability",
    ] {
        api.get(path).await.assert_problem(404, &[]);
    }
    api.get("/branches/a%23b")
        .await
        .assert_problem(400, &[("branchId", "invalid")]);
    api.get(format!("/patrons/{}", "p".repeat(65)))
        .await
        .assert_problem(400, &[("patronId", "too_long")]);
    api.get("/cards/CARD%231")
        .await
        .assert_problem(400, &[("cardNumber", "invalid")]);
    api.get("/books/978-0-306-40615-8")
        .await
        .assert_problem(400, &[("isbn", "invalid")]);
    api.get("/books/0-306-40615-3/availability")
        .await
        .assert_problem(400, &[("isbn", "invalid")]);
}

async fn both_isbn_forms_are_one_book(api: Api) {
    let reply = create_book(&api, ISBN10).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert_eq!(reply.header("location"), Some("/books/9780306406157"));
    // The book as sent, its ISBN-10 as the ISBN-13 it is.
    assert_eq!(reply.body, book_body(ISBN));
    let item = api
        .item("BOOK#9780306406157", "BOOK#9780306406157")
        .await
        .unwrap();
    assert_eq!(s(&item, "isbn"), ISBN);
    assert_eq!(n(&item, "pageCount"), 564);

    for taken in [
        "978-0-306-40615-7",
        "9780306406157",
        "0306406152",
        "0 306 40615 2",
    ] {
        create_book(&api, taken)
            .await
            .assert_problem(409, &[("isbn", "taken")]);
    }
    for path in [
        "/books/0-306-40615-2",
        "/books/978-0-306-40615-7",
        "/books/9780306406157",
        "/books/0306406152",
        "/books/978%200%20306%2040615%207",
    ] {
        let read = api.get(path).await;
        assert_eq!(read.status, 200, "{path}: {read:?}");
        assert_eq!(read.body, reply.body);
    }
    // An ISBN-10 whose check digit is X.
    let x = create_book(&api, "0-8044-2957-X").await;
    assert_eq!(x.status, 201, "{x:?}");
    assert_eq!(x.body["isbn"], "9780804429573");
    assert_eq!(api.get("/books/080442957x").await.status, 200);
    assert_eq!(api.items().await.len(), 2);
}

async fn create_book_names_every_bad_field(api: Api) {
    for wrong_check_digit in ["0-306-40615-3", "978-0-306-40615-8"] {
        create_book(&api, wrong_check_digit)
            .await
            .assert_problem(400, &[("isbn", "invalid")]);
    }
    api.post("/books", json!({})).await.assert_problem(
        400,
        &[
            ("author", "required"),
            ("description", "required"),
            ("genre", "required"),
            ("isbn", "required"),
            ("pageCount", "required"),
            ("publishYear", "required"),
            ("publisher", "required"),
            ("title", "required"),
        ],
    );
    api.post(
        "/books",
        json!({
            "isbn": "12345",
            "title": "t".repeat(301),
            "author": "",
            "publisher": ["p"],
            "publishYear": 1200,
            "genre": "g",
            "description": "d".repeat(4001),
            "pageCount": 0,
        }),
    )
    .await
    .assert_problem(
        400,
        &[
            ("author", "required"),
            ("description", "too_long"),
            ("isbn", "invalid"),
            ("pageCount", "invalid"),
            ("publishYear", "invalid"),
            ("publisher", "invalid"),
            ("title", "too_long"),
        ],
    );
    let mut body = book_body(ISBN);
    body["publishYear"] = json!("1976");
    body["pageCount"] = json!(12.5);
    api.post("/books", body)
        .await
        .assert_problem(400, &[("pageCount", "invalid"), ("publishYear", "invalid")]);
    let mut future = book_body(ISBN);
    future["publishYear"] = json!(3000);
    api.post("/books", future)
        .await
        .assert_problem(400, &[("publishYear", "invalid")]);
    assert!(api.items().await.is_empty());
}

async fn add_copy_checks_the_branch_and_the_book(api: Api) {
    branch(&api, "central").await;
    let reply = add_copy(&api, "central", ISBN10).await;
    reply.assert_problem(404, &[]);
    assert_eq!(reply.body["detail"], "book not found");
    create_book(&api, ISBN).await;
    let reply = add_copy(&api, "nowhere", ISBN).await;
    reply.assert_problem(404, &[]);
    assert_eq!(reply.body["detail"], "branch not found");
    let reply = add_copy(&api, "nowhere", "9780804429573").await;
    reply.assert_problem(404, &[]);
    assert_eq!(reply.body["detail"], "branch and book not found");
    assert_eq!(api.items().await.len(), 2, "no copy was written");

    let reply = api
        .post(
            "/branches/central/copies",
            json!({"isbn": "0-306-40615-2", "condition": "new"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{reply:?}");
    let id = reply.body["copyId"].as_str().unwrap().to_owned();
    let added_at = reply.body["addedAt"].as_str().unwrap().to_owned();
    assert_eq!(
        reply.body,
        json!({
            "copyId": id,
            "branchId": "central",
            "isbn": ISBN,
            "title": "Fundamentals of Data Structures",
            "condition": "new",
            "status": "available",
            "addedAt": added_at,
        })
    );
    assert!(
        added_at.ends_with('Z') && added_at.len() == 20,
        "{added_at}"
    );
    let item = api
        .item("BRANCH#central", &format!("COPY#{id}"))
        .await
        .unwrap();
    assert_eq!(s(&item, "GSI2PK"), "BOOK#9780306406157");
    assert_eq!(s(&item, "GSI2SK"), format!("available#central#{id}"));
    assert_eq!(s(&item, "status"), "available");
    assert_eq!(s(&item, "isbn"), ISBN);
    assert_eq!(s(&item, "branchId"), "central");
    // The branch, the book, the copy, and the branch's count of the book's available copies.
    assert_eq!(api.items().await.len(), 4);
    let count = api
        .item("BOOK#9780306406157", "AVAILABLE#central")
        .await
        .unwrap();
    assert_eq!(n(&count, "availableCopies"), 1);

    api.post("/branches/central/copies", json!({}))
        .await
        .assert_problem(400, &[("condition", "required"), ("isbn", "required")]);
    api.post(
        "/branches/central/copies",
        json!({"isbn": "0-306-40615-3", "condition": "mint"}),
    )
    .await
    .assert_problem(400, &[("condition", "invalid"), ("isbn", "invalid")]);

    // Idempotent: one copy for any number of retries.
    let send = |condition: &'static str| {
        let api = api.clone();
        async move {
            api.call("POST", "/branches/central/copies")
                .json(json!({"isbn": ISBN, "condition": condition}))
                .header("idempotency-key", "copy-1")
                .send()
                .await
        }
    };
    let first = send("fair").await;
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(
        first.header("location"),
        None,
        "there is no route for one copy"
    );
    assert_eq!(send("fair").await.body, first.body);
    send("poor").await.assert_problem(422, &[]);
    let copies = with_sk_prefix(&api.items().await, "BRANCH#central", "COPY#").len();
    assert_eq!(copies, 2);
}

async fn list_copies_pages_the_inventory(api: Api) {
    branch(&api, "central").await;
    branch(&api, "north").await;
    create_book(&api, ISBN).await;
    create_book(&api, "9780804429573").await;
    let mut expected = BTreeSet::new();
    for i in 0..5 {
        let isbn = if i % 2 == 0 { ISBN } else { "9780804429573" };
        let reply = add_copy(&api, "central", isbn).await;
        expected.insert(reply.body["copyId"].as_str().unwrap().to_owned());
    }
    add_copy(&api, "north", ISBN).await;
    fixtures::patron(&api, "central", "C-1", "standard").await;

    let seen = walk(&api, "/branches/central/copies", 2).await;
    let ids: Vec<String> = seen
        .iter()
        .map(|c| {
            assert_eq!(c["branchId"], "central");
            assert_eq!(c["status"], "available");
            assert_eq!(c["condition"], "good");
            c["copyId"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 5, "each copy once, never a patron: {ids:?}");
    assert_eq!(ids.into_iter().collect::<BTreeSet<_>>(), expected);

    let first = api.get("/branches/central/copies?limit=1").await;
    let cursor = first.body["nextCursor"].as_str().unwrap();
    api.get(format!("/branches/north/copies?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get(format!("/branches/central/patrons?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
}

async fn availability_counts_available_copies_per_branch(api: Api) {
    for b in ["b-east", "a-west", "c-none"] {
        branch(&api, b).await;
    }
    create_book(&api, ISBN10).await;
    create_book(&api, "9780804429573").await;
    let none = api.get("/books/9780306406157/availability").await;
    assert_eq!(none.status, 200, "{none:?}");
    assert_eq!(none.body, json!({"isbn": ISBN, "branches": []}));

    let mut east = Vec::new();
    for _ in 0..3 {
        east.push(add_copy(&api, "b-east", ISBN).await.body["copyId"].clone());
    }
    add_copy(&api, "a-west", ISBN10).await;
    add_copy(&api, "c-none", "9780804429573").await;
    let expected = json!({
        "isbn": ISBN,
        "branches": [
            {"branchId": "a-west", "availableCopies": 1},
            {"branchId": "b-east", "availableCopies": 3},
        ],
    });
    for path in [
        "/books/9780306406157/availability",
        "/books/0-306-40615-2/availability",
        "/books/978-0-306-40615-7/availability",
    ] {
        let reply = api.get(path).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.body, expected, "{path}");
    }

    // A copy lent out no longer counts: the checkout's transaction takes it off the count.
    let lent = east[0].as_str().unwrap();
    let reader = fixtures::patron(&api, "b-east", "c-lend", "standard").await;
    let loan = fixtures::checkout(&api, &reader, "b-east", lent).await;
    assert_eq!(loan.status, 201, "{loan:?}");
    let reply = api.get("/books/0306406152/availability").await;
    assert_eq!(
        reply.body["branches"][1],
        json!({"branchId": "b-east", "availableCopies": 2})
    );
    let other = api.get("/books/9780804429573/availability").await;
    assert_eq!(
        other.body["branches"],
        json!([{"branchId": "c-none", "availableCopies": 1}])
    );
    // The inventory still lists the lent copy, with its status.
    let inventory = api.get("/branches/b-east/copies").await;
    let statuses: Vec<&str> = inventory.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 3);
    assert_eq!(statuses.iter().filter(|s| **s == "checked_out").count(), 1);
}

/// The curl examples of the guide's library catalogue (`docs/guide/library.md`), request for
/// request.
async fn the_readme_examples(api: Api) {
    let branch = api.post("/branches", branch_body("central")).await;
    assert_eq!(branch.status, 201);
    assert_eq!(api.get("/branches/central").await.body, branch.body);

    let patron = api
        .post(
            "/branches/central/patrons",
            json!({"cardNumber": "C-000123", "firstName": "Ada", "lastName": "Lovelace",
                   "email": "ada@example.com", "membershipTier": "premium"}),
        )
        .await;
    assert_eq!(patron.status, 201);
    let id = patron.body["patronId"].as_str().unwrap();
    assert_eq!(patron.body["loanLimit"], 10);
    assert_eq!(
        api.get("/cards/C-000123").await.body,
        json!({"cardNumber": "c-000123", "patronId": id})
    );
    assert_eq!(api.get(format!("/patrons/{id}")).await.body, patron.body);
    let patrons = api.get("/branches/central/patrons?limit=10").await;
    assert_eq!(patrons.body["items"], json!([patron.body]));
    assert_eq!(patrons.body["nextCursor"], Value::Null);
    assert_eq!(
        api.get("/branches").await.body,
        json!({"items": [branch.body], "nextCursor": null})
    );
    let reissued = api
        .put(
            format!("/patrons/{id}/card"),
            json!({"cardNumber": "C-000124"}),
        )
        .await;
    assert_eq!(reissued.body["cardNumber"], "c-000124");
    let tier = api
        .put(
            format!("/patrons/{id}/tier"),
            json!({"membershipTier": "standard"}),
        )
        .await;
    assert_eq!(tier.body["loanLimit"], 5);
    assert_eq!(api.delete(format!("/patrons/{id}")).await.status, 204);

    let created = create_book(&api, ISBN10).await;
    assert_eq!(created.body["isbn"], ISBN);
    assert_eq!(api.get("/books/978-0-306-40615-7").await.body, created.body);
    let added = api
        .post(
            "/branches/central/copies",
            json!({"isbn": "9780306406157", "condition": "good"}),
        )
        .await;
    assert_eq!(added.body["status"], "available");
    assert_eq!(
        api.get("/branches/central/copies").await.body["items"],
        json!([added.body])
    );
    assert_eq!(
        api.get("/books/0306406152/availability").await.body,
        json!({"isbn": ISBN, "branches": [{"branchId": "central", "availableCopies": 1}]})
    );
    assert_eq!(
        api.get("/branches/central/books/0306406152/copies")
            .await
            .body,
        json!({"items": [{"copyId": added.body["copyId"], "branchId": "central", "isbn": ISBN,
                          "status": "available"}], "nextCursor": null})
    );
    let corrected = api
        .call("PATCH", "/books/9780306406157")
        .json(json!({"title": "Fundamentals of Data Structures in Pascal"}))
        .send()
        .await;
    assert_eq!(
        corrected.body["title"],
        "Fundamentals of Data Structures in Pascal"
    );
}

/// 32 concurrent registrations of one card number, each at its own branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_card_raced_by_32_registrations_has_one_holder() {
    let api = Api::start(Mode::Http).await;
    for i in 0..32 {
        branch(&api, &format!("branch-{i}")).await;
    }
    let replies = futures::future::join_all((0..32).map(|i| {
        let api = api.clone();
        async move { register_patron(&api, &format!("branch-{i}"), "C-RACE", "standard").await }
    }))
    .await;
    let created: Vec<&Reply> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "{replies:?}");
    for reply in replies.iter().filter(|r| r.status != 201) {
        reply.assert_problem(409, &[("cardNumber", "taken")]);
    }
    let winner = &created[0].body;
    let items = api.items().await;
    let cards: Vec<&Item> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("CARD#"))
        .collect();
    assert_eq!(cards.len(), 1);
    assert_eq!(
        s(cards[0], "patronId"),
        winner["patronId"].as_str().unwrap()
    );
    let patrons: Vec<&Item> = items
        .iter()
        .filter(|i| s(i, "SK").starts_with("PATRON#"))
        .collect();
    assert_eq!(patrons.len(), 1, "no patron without its card");
    assert_eq!(s(patrons[0], "patronId"), s(cards[0], "patronId"));
    assert_eq!(
        s(patrons[0], "PK"),
        format!("BRANCH#{}", winner["branchId"].as_str().unwrap())
    );
    assert_eq!(s(patrons[0], "cardNumber"), "c-race");
}

/// Availability reads counts, not copies: its cost is the same with one copy as with forty, and
/// the counts follow every add, checkout and return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_costs_the_same_whatever_the_number_of_copies() {
    let api = Api::start(Mode::Direct).await;
    branch(&api, "central").await;
    branch(&api, "east").await;
    create_book(&api, ISBN10).await;
    add_copy(&api, "central", ISBN).await;
    let one = api.get(format!("/books/{ISBN}/availability")).await;
    for _ in 0..20 {
        add_copy(&api, "central", ISBN).await;
        add_copy(&api, "east", ISBN).await;
    }
    let many = api.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(
        many.body["branches"],
        json!([{"branchId": "central", "availableCopies": 21}, {"branchId": "east", "availableCopies": 20}])
    );
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(
            one.consumed(),
            many.consumed(),
            "the same cost at 1 and 41 copies"
        );
        assert_eq!(many.consumed(), (1.0, 0.0));
    }
    // A checkout takes one off its branch's count, a return puts it back.
    let reader = fixtures::patron(&api, "east", "c-east", "standard").await;
    let copies = api.get("/branches/east/copies").await;
    let copy = copies.body["items"][0]["copyId"]
        .as_str()
        .unwrap()
        .to_owned();
    let loan = fixtures::checkout(&api, &reader, "east", &copy).await;
    assert_eq!(loan.status, 201, "{loan:?}");
    let counted = api.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(counted.body["branches"][1]["availableCopies"], 19);
    let back = api
        .post(
            format!(
                "/patrons/{reader}/checkouts/{}/return",
                loan.body["checkoutId"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(back.status, 200, "{back:?}");
    let counted = api.get(format!("/books/{ISBN}/availability")).await;
    assert_eq!(counted.body["branches"][1]["availableCopies"], 20);
}

async fn branches_are_listed_in_id_order(api: Api) {
    assert_eq!(
        api.get("/branches").await.body,
        json!({"items": [], "nextCursor": null}),
        "no branch is an empty list"
    );
    for b in ["north", "central", "east"] {
        branch(&api, b).await;
    }
    create_book(&api, ISBN).await;
    fixtures::patron(&api, "central", "C-1", "standard").await;
    let branches = walk(&api, "/branches", 2).await;
    let ids: Vec<&str> = branches
        .iter()
        .map(|b| b["branchId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["central", "east", "north"],
        "branches only, in id order"
    );
    assert_eq!(branches[0], api.get("/branches/central").await.body);
    let row = api.item("BRANCH#east", "BRANCH#east").await.unwrap();
    assert_eq!((s(&row, "GSI1PK"), s(&row, "GSI1SK")), ("BRANCHES", "east"));

    let first = api.get("/branches?limit=1").await;
    assert_eq!(first.body["items"][0]["branchId"], "central");
    let cursor = first.body["nextCursor"].as_str().unwrap();
    let next = api.get(format!("/branches?limit=1&cursor={cursor}")).await;
    assert_eq!(next.body["items"][0]["branchId"], "east");
    api.get(format!("/branches/central/patrons?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get("/branches?cursor=bm90LWEtY3Vyc29y")
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get("/branches?limit=101")
        .await
        .assert_problem(400, &[("limit", "invalid")]);
    // One Query of the index: half a read unit for a page of a few branches.
    let branches = api.get("/branches").await;
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(branches.consumed(), (0.5, 0.0));
    }
}

/// Only this book's copies, only at this branch (not at `b10` for `b1`), only on the shelf.
async fn available_copies_lists_one_branchs_shelf(api: Api) {
    for b in ["b1", "b10"] {
        branch(&api, b).await;
    }
    create_book(&api, ISBN).await;
    create_book(&api, "9780804429573").await;
    let empty = api.get(format!("/branches/b1/books/{ISBN10}/copies")).await;
    assert_eq!(empty.status, 200, "{empty:?}");
    assert_eq!(empty.body, json!({"items": [], "nextCursor": null}));

    let mut shelf = BTreeSet::new();
    for _ in 0..3 {
        let reply = add_copy(&api, "b1", ISBN).await;
        shelf.insert(reply.body["copyId"].as_str().unwrap().to_owned());
    }
    let lent = add_copy(&api, "b1", ISBN).await.body["copyId"]
        .as_str()
        .unwrap()
        .to_owned();
    add_copy(&api, "b10", ISBN).await;
    add_copy(&api, "b1", "9780804429573").await;
    let patron = fixtures::patron(&api, "b1", "C-1", "standard").await;
    let loan = api
        .post(
            "/checkouts",
            json!({"patronId": patron, "branchId": "b1", "copyId": lent}),
        )
        .await;
    assert_eq!(loan.status, 201, "{loan:?}");

    let copies = walk(&api, &format!("/branches/b1/books/{ISBN10}/copies"), 2).await;
    let mut seen = BTreeSet::new();
    for c in &copies {
        let id = c["copyId"].as_str().unwrap().to_owned();
        assert_eq!(
            *c,
            json!({"copyId": id, "branchId": "b1", "isbn": ISBN, "status": "available"})
        );
        seen.insert(id);
    }
    assert_eq!(copies.len(), 3);
    assert_eq!(
        seen, shelf,
        "the lent copy and other branches' are not listed"
    );

    // The lent copy is back on the shelf once returned.
    let returned = api
        .post(
            format!(
                "/patrons/{patron}/checkouts/{}/return",
                loan.body["checkoutId"].as_str().unwrap()
            ),
            json!({}),
        )
        .await;
    assert_eq!(returned.status, 200);
    let page = api.get(format!("/branches/b1/books/{ISBN}/copies")).await;
    assert_eq!(page.body["items"].as_array().unwrap().len(), 4);
    assert_eq!(page.body["nextCursor"], Value::Null);
    // One Query on the keys-only index: half a read unit.
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(page.consumed(), (0.5, 0.0));
    }

    // Cursors are bound to the book and the branch.
    let first = api
        .get(format!("/branches/b1/books/{ISBN}/copies?limit=1"))
        .await;
    let cursor = first.body["nextCursor"].as_str().unwrap();
    api.get(format!("/branches/b10/books/{ISBN}/copies?cursor={cursor}"))
        .await
        .assert_problem(400, &[("cursor", "invalid")]);
    api.get(format!(
        "/branches/b1/books/9780804429573/copies?cursor={cursor}"
    ))
    .await
    .assert_problem(400, &[("cursor", "invalid")]);

    let missing = |path: String, detail: &'static str| {
        let api = api.clone();
        async move {
            let reply = api.get(path).await;
            reply.assert_problem(404, &[]);
            assert_eq!(reply.body["detail"], detail);
        }
    };
    missing(
        format!("/branches/nowhere/books/{ISBN}/copies"),
        "branch not found",
    )
    .await;
    missing(
        "/branches/b1/books/9780441013593/copies".into(),
        "book not found",
    )
    .await;
    missing(
        "/branches/nowhere/books/9780441013593/copies".into(),
        "branch and book not found",
    )
    .await;
    api.get("/branches/a%23b/books/0-306-40615-3/copies")
        .await
        .assert_problem(400, &[("branchId", "invalid"), ("isbn", "invalid")]);
}

async fn reissue_card_moves_the_lock_in_one_transaction(api: Api) {
    branch(&api, "central").await;
    let id = fixtures::patron(&api, "central", "C-1", "standard").await;
    let other = fixtures::patron(&api, "central", "C-9", "standard").await;
    let reissue = |patron: String, card: &'static str| {
        let api = api.clone();
        async move {
            api.put(
                format!("/patrons/{patron}/card"),
                json!({"cardNumber": card}),
            )
            .await
        }
    };

    let reply = reissue(id.clone(), " C-2 ").await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["cardNumber"], "c-2");
    assert_eq!(reply.body, api.get(format!("/patrons/{id}")).await.body);
    assert_eq!(reply.body["firstName"], "Ada");
    let row = api
        .item("BRANCH#central", &format!("PATRON#{id}"))
        .await
        .unwrap();
    assert_eq!(s(&row, "cardNumber"), "c-2");
    assert_eq!(
        s(&api.item("CARD#c-2", "CARD#c-2").await.unwrap(), "patronId"),
        id
    );
    assert!(
        api.item("CARD#c-1", "CARD#c-1").await.is_none(),
        "the old card is free at once"
    );
    assert_eq!(
        api.get("/cards/c-2").await.body,
        json!({"cardNumber": "c-2", "patronId": id})
    );
    api.get("/cards/C-1").await.assert_problem(404, &[]);

    // The card the patron holds already: nothing changes.
    let same = reissue(id.clone(), "C-2").await;
    assert_eq!(same.status, 200);
    assert_eq!(same.body, reply.body);
    // Another patron's card, in any spelling: 409, and nothing changes.
    for card in ["C-9", "c-9", "Ｃ-９"] {
        reissue(id.clone(), card)
            .await
            .assert_problem(409, &[("cardNumber", "taken")]);
    }
    assert_eq!(
        s(&api.item("CARD#c-9", "CARD#c-9").await.unwrap(), "patronId"),
        other
    );
    assert_eq!(
        s(&api.item("CARD#c-2", "CARD#c-2").await.unwrap(), "patronId"),
        id
    );
    // The freed card can be registered again.
    assert_eq!(
        register_patron(&api, "central", "C-1", "standard")
            .await
            .status,
        201
    );

    reissue("nobody".into(), "C-3")
        .await
        .assert_problem(404, &[]);
    reissue(id.clone(), "CARD#3")
        .await
        .assert_problem(400, &[("cardNumber", "invalid")]);
    api.put(format!("/patrons/{id}/card"), json!({}))
        .await
        .assert_problem(400, &[("cardNumber", "required")]);
    api.put("/patrons/a%23b/card", json!({"cardNumber": ""}))
        .await
        .assert_problem(400, &[("cardNumber", "required"), ("patronId", "invalid")]);
    let cards = api.items_with_pk_prefix("CARD#").await;
    assert_eq!(cards.len(), 3, "one lock per patron, none left behind");
}

async fn change_tier_sets_the_tiers_numbers(api: Api) {
    branch(&api, "central").await;
    let id = fixtures::patron(&api, "central", "C-1", "standard").await;
    let reply = api
        .put(
            format!("/patrons/{id}/tier"),
            json!({"membershipTier": "premium"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.body["membershipTier"], "premium");
    assert_eq!(reply.body["loanLimit"], 10);
    assert_eq!(reply.body["loanPeriodDays"], 28);
    assert_eq!(reply.body["activeLoans"], 0);
    assert_eq!(reply.body, api.get(format!("/patrons/{id}")).await.body);
    let row = api
        .item("BRANCH#central", &format!("PATRON#{id}"))
        .await
        .unwrap();
    assert_eq!(s(&row, "membershipTier"), "premium");
    assert_eq!(n(&row, "loanLimit"), 10);
    assert_eq!(n(&row, "loanPeriodDays"), 28);
    let back = api
        .put(
            format!("/patrons/{id}/tier"),
            json!({"membershipTier": "standard"}),
        )
        .await;
    assert_eq!(
        (
            back.body["loanLimit"].clone(),
            back.body["loanPeriodDays"].clone()
        ),
        (json!(5), json!(21))
    );

    api.put("/patrons/nobody/tier", json!({"membershipTier": "premium"}))
        .await
        .assert_problem(404, &[]);
    for bad in [
        json!({"membershipTier": "gold"}),
        json!({"membershipTier": "Premium"}),
        json!({"membershipTier": 2}),
    ] {
        api.put(format!("/patrons/{id}/tier"), bad)
            .await
            .assert_problem(400, &[("membershipTier", "invalid")]);
    }
    api.put(format!("/patrons/{id}/tier"), json!({}))
        .await
        .assert_problem(400, &[("membershipTier", "required")]);
    assert!(
        api.items_with_pk_prefix("BRANCH#nobody").await.is_empty(),
        "a tier change never creates a patron"
    );
    assert_eq!(
        api.items().await.len(),
        3,
        "the branch, the patron and its card"
    );
}

async fn remove_patron_takes_the_patron_and_its_card(api: Api) {
    branch(&api, "central").await;
    let id = fixtures::patron(&api, "central", "C-1", "standard").await;
    let keep = fixtures::patron(&api, "central", "C-2", "standard").await;
    let reply = api.delete(format!("/patrons/{id}")).await;
    assert_eq!(reply.status, 204, "{reply:?}");
    assert_eq!(reply.body, Value::Null);
    // Its registration's outbox item (its name, email and card) goes with it; the removal's own
    // names its id alone. The other patron's stays.
    let left = api.outbox_of("patron", &id).await;
    assert_eq!(left.len(), 1, "{left:?}");
    // Read as the event it is: a substring test for the card number `c-1` would also find it in
    // a random event id (`…a06c-1b15…`), as it once did.
    let event: Value = serde_json::from_str(s(&left[0], "detail")).unwrap();
    assert_eq!(event["type"], "PatronRemoved", "{event}");
    assert_eq!(event["data"], json!({ "patronId": id }), "{event}");
    assert_eq!(api.outbox_of("patron", &keep).await.len(), 1);
    assert!(
        api.item("BRANCH#central", &format!("PATRON#{id}"))
            .await
            .is_none()
    );
    assert!(api.item("CARD#c-1", "CARD#c-1").await.is_none());
    api.get(format!("/patrons/{id}"))
        .await
        .assert_problem(404, &[]);
    api.get("/cards/C-1").await.assert_problem(404, &[]);
    api.delete(format!("/patrons/{id}"))
        .await
        .assert_problem(404, &[]);
    api.delete("/patrons/a%23b")
        .await
        .assert_problem(400, &[("patronId", "invalid")]);
    // The card number is free at once; the other patron is untouched.
    assert_eq!(
        register_patron(&api, "central", "c-1", "standard")
            .await
            .status,
        201
    );
    assert_eq!(api.get(format!("/patrons/{keep}")).await.status, 200);
    assert_eq!(api.items_with_pk_prefix("CARD#").await.len(), 2);
}

async fn correct_book_sets_the_fields_given(api: Api) {
    create_book(&api, ISBN).await;
    let reply = api
        .call("PATCH", format!("/books/{ISBN10}"))
        .json(json!({"title": " Fundamentals of Data Structures in Pascal ", "pageCount": 542, "isbn": "9780804429573"}))
        .send()
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let mut expected = book_body(ISBN);
    expected["title"] = json!(" Fundamentals of Data Structures in Pascal ");
    expected["pageCount"] = json!(542);
    assert_eq!(
        reply.body, expected,
        "the fields given, and the ISBN of the path"
    );
    assert_eq!(api.get(format!("/books/{ISBN}")).await.body, expected);
    let row = api
        .item(&format!("BOOK#{ISBN}"), &format!("BOOK#{ISBN}"))
        .await
        .unwrap();
    assert_eq!(
        s(&row, "title"),
        " Fundamentals of Data Structures in Pascal "
    );
    assert_eq!(s(&row, "author"), "Ellis Horowitz");
    assert_eq!(n(&row, "pageCount"), 542);

    let patch = |isbn: &'static str, body: Value| {
        let api = api.clone();
        async move {
            api.call("PATCH", format!("/books/{isbn}"))
                .json(body)
                .send()
                .await
        }
    };
    patch("9780804429573", json!({"title": "Nothing"}))
        .await
        .assert_problem(404, &[]);
    assert!(
        api.items_with_pk_prefix("BOOK#9780804429573")
            .await
            .is_empty(),
        "a correction never creates a book"
    );
    let nothing = patch(ISBN, json!({})).await;
    nothing.assert_problem(400, &[]);
    patch(ISBN, json!({"colour": "red", "title": null}))
        .await
        .assert_problem(400, &[]);
    patch(
        ISBN,
        json!({"title": "  ", "author": "x".repeat(101), "publishYear": 1200, "pageCount": 0,
               "genre": 7, "description": "bad\u{202E}text"}),
    )
    .await
    .assert_problem(
        400,
        &[
            ("author", "too_long"),
            ("description", "invalid"),
            ("genre", "invalid"),
            ("pageCount", "invalid"),
            ("publishYear", "invalid"),
            ("title", "required"),
        ],
    );
    patch("978-0-306-40615-8", json!({"title": "x"}))
        .await
        .assert_problem(400, &[("isbn", "invalid")]);
    assert_eq!(
        api.get(format!("/books/{ISBN}")).await.body,
        expected,
        "a refused correction changes nothing"
    );
    // One read of the book (its event holds the whole book), then one transaction: the
    // update, conditioned on the book as read, and the event's outbox item.
    let again = patch(ISBN, json!({"genre": "Algorithms"})).await;
    assert_eq!(again.body["genre"], "Algorithms");
    if crate::harness::capacity_as_dynamodb() {
        assert_eq!(again.consumed(), (1.0, 4.0));
    }
}

/// Two patrons reissued onto one card number at the same moment, round after round: one wins,
/// the other is `409` and keeps its own card, and every lock names the patron that holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reissues_racing_for_one_card_have_one_winner() {
    let api = Api::start(Mode::Http).await;
    branch(&api, "central").await;
    for round in 0..8 {
        let a = fixtures::patron(&api, "central", &format!("a-{round}"), "standard").await;
        let b = fixtures::patron(&api, "central", &format!("b-{round}"), "standard").await;
        let card = format!("x-{round}");
        let (ra, rb) = tokio::join!(
            api.put(format!("/patrons/{a}/card"), json!({"cardNumber": card})),
            api.put(format!("/patrons/{b}/card"), json!({"cardNumber": card})),
        );
        let (winner, loser, lost) = match (ra.status, rb.status) {
            (200, 409) => (&a, &b, &rb),
            (409, 200) => (&b, &a, &ra),
            other => panic!("round {round}: {other:?} {ra:?} {rb:?}"),
        };
        lost.assert_problem(409, &[("cardNumber", "taken")]);
        let lock = api
            .item(&format!("CARD#{card}"), &format!("CARD#{card}"))
            .await
            .unwrap();
        assert_eq!(s(&lock, "patronId"), winner.as_str(), "round {round}");
        let (winner_old, loser_old) = if winner == &a {
            (format!("a-{round}"), format!("b-{round}"))
        } else {
            (format!("b-{round}"), format!("a-{round}"))
        };
        assert!(
            api.item(&format!("CARD#{winner_old}"), &format!("CARD#{winner_old}"))
                .await
                .is_none(),
            "the winner's old card is free"
        );
        let kept = api
            .item(&format!("CARD#{loser_old}"), &format!("CARD#{loser_old}"))
            .await
            .unwrap();
        assert_eq!(
            s(&kept, "patronId"),
            loser.as_str(),
            "the loser keeps its card"
        );
    }
    // No orphan: every lock names a patron that holds exactly that card, and the reverse.
    let items = api.items().await;
    let cards: Vec<&Item> = items
        .iter()
        .filter(|i| s(i, "PK").starts_with("CARD#"))
        .collect();
    let patrons: Vec<&Item> = items
        .iter()
        .filter(|i| s(i, "SK").starts_with("PATRON#"))
        .collect();
    assert_eq!(cards.len(), patrons.len());
    for card in cards {
        let holder = patrons
            .iter()
            .find(|p| s(p, "patronId") == s(card, "patronId"))
            .unwrap_or_else(|| panic!("an orphan lock: {card:?}"));
        assert_eq!(format!("CARD#{}", s(holder, "cardNumber")), s(card, "PK"));
    }
}
