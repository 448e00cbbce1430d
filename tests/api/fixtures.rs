//! The test data every domain's tests build on, written once: a library (branches, a book), its
//! patrons, copies and loans, through the real routes. The `*_body` builders are the bodies as a
//! librarian would type them (the patron's email with stray spaces and capitals, so every test
//! that registers one also exercises the normalisation); the `register_*`/`create_*`/`add_*`
//! calls answer the raw reply, the short names assert the `201` and answer the new id (a write
//! throttled on the way is sent again, as a client does: [`unthrottled`]).

use crate::harness::{Api, Reply};
use serde_json::{Value, json};
use std::time::Duration;

/// `send`'s reply once it is not a `503` `throttled`. A test building its data writes to one
/// branch's partition as fast as the machine allows, and on a quick one that passes the
/// embedded engine's 1,000 write units a second per key (docs/guide/partition-limits.md): two
/// hundred loans at one branch did. The request is then sent again after the reply's
/// `retry-after`, as the contract asks a client to, up to ten times.
async fn unthrottled<F: Future<Output = Reply>>(send: impl Fn() -> F) -> Reply {
    for _ in 1..10 {
        let reply = send().await;
        if reply.status != 503 || reply.body["type"] != "/problems/throttled" {
            return reply;
        }
        let wait = reply.header("retry-after").and_then(|s| s.parse().ok());
        tokio::time::sleep(Duration::from_secs(wait.unwrap_or(1))).await;
    }
    send().await
}

/// One book, in its two ISBN forms.
pub const ISBN: &str = "9780306406157";
pub const ISBN10: &str = "0-306-40615-2";

pub fn branch_body(branch_id: &str) -> Value {
    json!({
        "branchId": branch_id,
        "name": "Central Library",
        "address": "1 Library Square",
        "city": "Springfield",
        "phone": "+44 20 7946 0000",
        "openingHours": "Mon-Sat 09:00-20:00",
    })
}

pub fn patron_body(card: &str, tier: &str) -> Value {
    json!({
        "cardNumber": card,
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": " Ada@Example.COM ",
        "membershipTier": tier,
    })
}

pub fn book_body(isbn: &str) -> Value {
    json!({
        "isbn": isbn,
        "title": "Fundamentals of Data Structures",
        "author": "Ellis Horowitz",
        "publisher": "Computer Science Press",
        "publishYear": 1976,
        "genre": "Computer science",
        "description": "Arrays, stacks, queues, lists, trees and graphs.",
        "pageCount": 564,
    })
}

pub async fn branch(api: &Api, branch_id: &str) {
    let reply = api.post("/branches", branch_body(branch_id)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
}

/// Two branches, `central` and `east`, and the book [`ISBN`].
pub async fn library(api: &Api) {
    branch(api, "central").await;
    branch(api, "east").await;
    let reply = create_book(api, ISBN).await;
    assert_eq!(reply.status, 201, "{reply:?}");
}

pub async fn register_patron(api: &Api, branch_id: &str, card: &str, tier: &str) -> Reply {
    api.post(
        format!("/branches/{branch_id}/patrons"),
        patron_body(card, tier),
    )
    .await
}

pub async fn patron(api: &Api, branch_id: &str, card: &str, tier: &str) -> String {
    let reply = unthrottled(|| register_patron(api, branch_id, card, tier)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["patronId"].as_str().unwrap().to_owned()
}

pub async fn create_book(api: &Api, isbn: &str) -> Reply {
    api.post("/books", book_body(isbn)).await
}

pub async fn add_copy(api: &Api, branch_id: &str, isbn: &str) -> Reply {
    api.post(
        format!("/branches/{branch_id}/copies"),
        json!({"isbn": isbn, "condition": "good"}),
    )
    .await
}

pub async fn copy(api: &Api, branch_id: &str) -> String {
    let reply = unthrottled(|| add_copy(api, branch_id, ISBN)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body["copyId"].as_str().unwrap().to_owned()
}

pub async fn checkout(api: &Api, patron_id: &str, branch_id: &str, copy_id: &str) -> Reply {
    api.post(
        "/checkouts",
        json!({"patronId": patron_id, "branchId": branch_id, "copyId": copy_id}),
    )
    .await
}

pub async fn lend(api: &Api, patron_id: &str, branch_id: &str) -> Value {
    let copy_id = copy(api, branch_id).await;
    let reply = unthrottled(|| checkout(api, patron_id, branch_id, &copy_id)).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    reply.body
}
